package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/procs"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/protocol"
	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/retention"
)

// serveCommand parses the configuration and runs the broker until ctx is
// done (SIGINT/SIGTERM). stop releases the signal handler, so a second
// signal during shutdown kills the process the default way.
func serveCommand(ctx context.Context, stop func(), args, environ []string, stdout, stderr io.Writer) int {
	cfg, sf, err := loadConfig(args, environ, os.ReadFile, stdout)
	if sf != nil && sf.help {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitConfig
	}
	logger := newLogger(stderr, cfg)
	for _, w := range cfg.Warnings {
		logger.Warn(w)
	}
	if err := serve(ctx, stop, cfg, logger, nil); err != nil {
		logger.Error("strata stopped with an error", "err", err)
		return exitCodeFor(err)
	}
	return exitOK
}

// setCleanerProps applies the dynamic settings of the cleaner among a
// broker's effective settings (nil cleaner: not started yet).
func setCleanerProps(c *retention.Cleaner, props map[string]string, logger *slog.Logger) {
	if c == nil {
		return
	}
	var o retention.CleanerOptions
	if err := retention.CleanerOptionsFromProps(props, &o); err != nil {
		logger.Error("cleaner settings do not apply", "err", err)
		return
	}
	c.SetBackoff(o.Backoff)
}

// serve runs the broker: listen, open the logs, the broker and the Kafka
// server; on ctx done close them in reverse order. ready, if non-nil,
// receives the bound address once clients can connect (for tests).
func serve(ctx context.Context, stop func(), cfg *Config, logger *slog.Logger, ready chan<- net.Addr) error {
	if cfg.Cluster.ControllerOnly {
		return serveController(ctx, stop, cfg, logger, ready)
	}
	dataDir := cfg.LogDirs[0]
	if len(cfg.LogDirs) > 1 {
		logger.Warn("only the first of log.dirs is used", "used", dataDir, "ignored", cfg.LogDirs[1:])
	}
	cleanerOpts := retention.CleanerOptions{Logger: logger}
	if err := retention.CleanerOptionsFromProps(cfg.BrokerProps, &cleanerOpts); err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	// TEST ONLY (faultinject.go): disk faults and a clock offset read from
	// the fault harness's control file; off without STRATA_FAULTS_CONTROL.
	faults := startFaultInjection(ctx, logger)
	if faults.Now != nil {
		cfg.Txns.Now, cfg.Groups.Now, cfg.Share.Now, cleanerOpts.Now = faults.Now, faults.Now, faults.Now, faults.Now
	}
	lns, err := bindListeners(cfg)
	if err != nil {
		return err
	}
	// The operators' HTTP listener (monitoring.go) comes up before the
	// broker, so /healthz answers while a quorum is joined.
	reg := prometheus.NewRegistry()
	mon, err := startMonitor(cfg.Monitoring, reg, logger)
	if err != nil {
		lns.close()
		return err
	}
	advertiseConsole(cfg, mon)
	// The shutdown's watchdog, once armed, covers the deferred closes too.
	var watchdog *shutdownWatchdog
	defer func() {
		if watchdog != nil {
			watchdog.stop()
		}
	}()
	defer mon.close()

	var cleanerRef atomic.Pointer[retention.Cleaner] // set once the cleaner runs
	bc := replicationConfig(cfg, dataDir, lns.replication, faults, logger)
	bc.AdvertisedHost, bc.AdvertisedPort, bc.AdvertisedEndpoints = lns.advertised.Host, int32(lns.advertised.Port), lns.extra.endpoints
	bc.Rack, bc.BrokerOnly = cfg.Rack, cfg.Cluster.BrokerOnly
	bc.OnBrokerProps = func(p map[string]string) { setCleanerProps(cleanerRef.Load(), p, logger) }
	warnOpenFileLimit(bc, logger)
	// With other voters a partition may have other replicas: what this
	// broker stored but the quorum never committed (a leader's tail when
	// it died) must not count as committed at restart, or Raft's later
	// truncation of that tail is refused (below the high watermark) and
	// the replica is stuck. Such a partition starts at its checkpointed
	// high watermark and Raft commits the rest; alone, everything
	// recovered is committed (log.ManagerOptions).
	logs, broker, err := openReplicated(log.ManagerOptions{Dir: dataDir, Logger: logger,
		ProducerIDExpiration: cfg.ProducerIDExpiration, ProducerIDExpirationCheck: cfg.ProducerIDExpirationCheck,
		UseHighWatermarkCheckpoint: len(cfg.Cluster.Voters) > 1, FS: faults.FS, Now: faults.Now}, bc, "start broker")
	if err != nil {
		lns.closeKafka() // the replication listener is closed or owned by the broker
		return err
	}
	registerBrokerMetrics(reg, logs, broker)
	cleanerOpts.Logs = logs
	cleanerOpts.Registerer = reg
	cleaner := retention.NewCleaner(cleanerOpts)
	// Dynamic broker configs of the cleaner (log.cleaner.backoff.ms): those
	// set before this start, then every change (OnBrokerProps above).
	cleanerRef.Store(cleaner)
	setCleanerProps(cleaner, broker.EffectiveBrokerProps(), logger)
	srv, serveErr := startKafkaServer(ctx, cfg, lns, broker, reg, logger)
	logger.Info("strata ready", "listener", lns.kafka.Addr().String(), "advertised", lns.advertised.String(),
		"node_id", cfg.NodeID, "cluster_id", broker.ClusterID(), "data_dir", dataDir,
		"inter_broker_protocol", cfg.Security.InterBroker.Protocol, "inter_broker_principal", cfg.Security.InterBroker.Principal)
	cons := startConsole(cfg, lns.kafka.Addr(), reg, mon, broker, logger)
	mon.setReady(true)
	if ready != nil {
		ready <- lns.kafka.Addr()
	}
	defer runIdleProcs(cfg, logger)()
	defer logRaftStateOnSIGUSR1(broker)()

	runErr := awaitStop(ctx, serveErr, logger)
	if stop != nil {
		stop()
	}
	watchdog = shutdownBroker(cfg, shutdownParts{mon: mon, cons: cons, cleaner: cleaner, srv: srv, broker: broker}, &runErr, logger)
	return runErr
}

// startKafkaServer builds the Kafka server's config from cfg and serves
// it on the bound Kafka listeners; serveErr receives the first listener's
// failure.
func startKafkaServer(ctx context.Context, cfg *Config, lns *serveListeners, broker *replication.Broker, reg *prometheus.Registry, logger *slog.Logger) (srv *protocol.Server, serveErr chan error) {
	pcfg := protocol.Config{MaxRequestBytes: cfg.SocketRequestMaxBytes, Logger: logger, Groups: cfg.Groups, Txns: cfg.Txns, Registerer: reg,
		Share: cfg.Share, GroupConfig: cfg.GroupConfig, ShareVersion: cfg.ShareVersion}
	cfg.Limits.apply(&pcfg)
	cfg.Quotas.apply(&pcfg)
	cfg.ACLs.apply(&pcfg)
	pcfg.InterBrokerClient = cfg.Security.InterBroker.opts()
	ensureInterBrokerScram(ctx, broker, cfg.Security.InterBroker, logger)
	srv = protocol.NewServer(pcfg, broker)
	serveErr = make(chan error, 1)
	go func() { serveErr <- srv.ServeListener(lns.kafka, lns.extra.main) }()
	lns.extra.serve(srv, serveErr)
	return srv, serveErr
}

// awaitStop waits until ctx ends (a signal) or the Kafka listener fails,
// and returns the listener's error (nil after a signal).
func awaitStop(ctx context.Context, serveErr <-chan error, logger *slog.Logger) error {
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "cause", context.Cause(ctx))
		return nil
	case err := <-serveErr:
		if err == nil {
			err = errors.New("server stopped unexpectedly")
		}
		logger.Error("kafka listener failed", "err", err)
		return err
	}
}

// serveListeners are the sockets a broker binds before any disk work: a
// busy port fails start-up early, and port 0 gives the real port to
// advertise.
type serveListeners struct {
	kafka       net.Listener    // the first of listeners
	advertised  Listener        // kafka's advertised address (its real port for port 0)
	extra       *extraListeners // the other listeners (security_config.go)
	replication net.Listener    // the Raft transport's (cluster_config.go); nil when alone
}

// bindListeners binds every listener; on failure none is left open.
func bindListeners(cfg *Config) (*serveListeners, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Listener.Host, strconv.Itoa(cfg.Listener.Port)))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listener, err)
	}
	l := &serveListeners{kafka: ln, advertised: cfg.Advertised}
	if l.advertised.Port == 0 {
		l.advertised.Port = ln.Addr().(*net.TCPAddr).Port
	}
	if l.extra, err = listenExtra(cfg, ln); err != nil {
		ln.Close()
		return nil, err
	}
	if cfg.Cluster.Bind != "" {
		if l.replication, err = net.Listen("tcp", cfg.Cluster.Bind); err != nil {
			l.closeKafka()
			return nil, fmt.Errorf("listen on replication listener %s: %w", cfg.Cluster.Bind, err)
		}
	}
	return l, nil
}

// closeKafka closes the Kafka listeners (before a server took them).
func (l *serveListeners) closeKafka() {
	l.kafka.Close()
	for _, o := range l.extra.lns {
		o.Close()
	}
}

// close closes every listener (before a broker or server took them).
func (l *serveListeners) close() {
	l.closeKafka()
	if l.replication != nil {
		l.replication.Close()
	}
}

// replicationConfig is the part of replication.BrokerConfig both roles
// (serve, serveController) take from the configuration alike.
func replicationConfig(cfg *Config, dataDir string, repLn net.Listener, faults *faultInjection, logger *slog.Logger) replication.BrokerConfig {
	return replication.BrokerConfig{
		NodeID:                   cfg.NodeID,
		DataDir:                  dataDir,
		NumPartitions:            cfg.NumPartitions,
		DefaultReplicationFactor: cfg.DefaultReplicationFactor,
		AutoCreateTopics:         cfg.AutoCreateTopics,
		DeleteTopicEnable:        cfg.DeleteTopicEnable,
		BrokerProps:              cfg.BrokerProps,
		Logger:                   logger,
		Voters:                   cfg.Cluster.Voters,
		ReplicationListener:      repLn, // owned by the broker once NewBroker is called
		ReplicationAdvertise:     cfg.Cluster.Advertise,
		JoinOffLoopback:          cfg.Cluster.PlaintextAnywhere,
		ReplicationTLS:           cfg.Cluster.TLS,
		PartitionHeartbeat:       cfg.Cluster.PartitionHeartbeat,
		LeaderRebalance:          cfg.Rebalance.LeaderRebalanceConfig,
		BrokerSessionTimeout:     cfg.Rebalance.SessionTimeout,
		FS:                       faults.FS,
		Now:                      faults.Now,
		MinFreeBytes:             cfg.Disk.MinFreeBytes,
		FreeSpace:                faults.FreeSpace,
		OnStorageFatal:           storageFatal(logger),
		OpenFileLimit:            openFileLimit(),
	}
}

// warnOpenFileLimit logs when the open-file limit allows fewer partition
// replicas than max.broker.partitions: CreateTopics beyond it is refused
// (replication/metadata_partition_limits.go), and the operator should know why.
func warnOpenFileLimit(bc replication.BrokerConfig, logger *slog.Logger) {
	perBroker, _ := retention.PartitionLimits(bc.BrokerProps)
	if c := replication.ReplicaCapacity(bc.OpenFileLimit); c > 0 && c < perBroker {
		logger.Warn("the open-file limit allows fewer partition replicas than max.broker.partitions; raise RLIMIT_NOFILE (e.g. systemd's LimitNOFILE) to host more",
			"open_file_limit", bc.OpenFileLimit, "files_per_replica", replication.FDsPerReplica, "replicas_allowed", c, retention.MaxBrokerPartitions, perBroker)
	}
}

// openReplicated opens the data directory's logs and the replicated
// broker over them. On failure nothing it opened is left open, and the
// replication listener is closed (before NewBroker) or the broker's.
func openReplicated(mopts log.ManagerOptions, bc replication.BrokerConfig, what string) (*log.Manager, *replication.Broker, error) {
	logs, err := log.OpenManager(mopts)
	if err != nil {
		if bc.ReplicationListener != nil {
			bc.ReplicationListener.Close()
		}
		return nil, nil, fmt.Errorf("open data dir %s: %w", mopts.Dir, err)
	}
	broker, err := replication.NewBroker(bc, logs)
	if err != nil {
		logs.Close()
		if errors.Is(err, replication.ErrMetaProperties) || errors.Is(err, replication.ErrInvalidConfig) {
			return nil, nil, fmt.Errorf("%w: %w", errConfig, err)
		}
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return logs, broker, nil
}

// registerBrokerMetrics registers the logs', the broker's and idle
// mode's series.
func registerBrokerMetrics(reg *prometheus.Registry, logs *log.Manager, broker *replication.Broker) {
	log.RegisterMetrics(reg, logs)
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_idle",
			Help: "1 while the broker, idle for strata.idle.after.ms, runs on one scheduler P (GOMAXPROCS=1) with timer slack."},
			func() float64 {
				if procs.Shrunk() {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_idle_entered_total",
			Help: "Times the broker went idle (strata_idle)."},
			func() float64 { s, _ := procs.Transitions(); return float64(s) }),
	)
	broker.RegisterMetrics(reg)
}

// runIdleProcs runs idle mode (internal/procs: an idle broker runs on
// one scheduler P with timer slack) until the returned stop is called.
func runIdleProcs(cfg *Config, logger *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		procs.Run(ctx, procs.Config{After: cfg.IdleAfter, Slack: cfg.IdleTimerSlack, Environ: os.Environ(), Logger: logger})
	}()
	return func() { cancel(); <-done }
}

// logRaftStateOnSIGUSR1 logs every raft group's state at each SIGUSR1
// (replication/raft_state.go) until the returned stop is called.
func logRaftStateOnSIGUSR1(broker *replication.Broker) (stop func()) {
	usr1, done := make(chan os.Signal, 1), make(chan struct{})
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for {
			select {
			case <-usr1:
				broker.LogRaftState()
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(usr1); close(done) }
}

// shutdownParts are what shutdownBroker stops, in its order.
type shutdownParts struct {
	mon     *monitor
	cons    interface{ Close() }
	cleaner *retention.Cleaner
	srv     *protocol.Server
	broker  *replication.Broker
}

// shutdownBroker stops a broker in stages, each within its share of
// strata.shutdown.timeout.ms (shutdown.go), under a watchdog that ends
// the process at the end of it whatever is still running; it returns the
// watchdog (stopped by serve's deferred call, after the deferred closes)
// and adds a failure to close the broker to *runErr.
func shutdownBroker(cfg *Config, p shutdownParts, runErr *error, logger *slog.Logger) *shutdownWatchdog {
	total := cfg.ShutdownTimeout
	if total <= 0 {
		total = defaultShutdownTimeout
	}
	plan := planShutdown(time.Now(), total)
	watchdog := startShutdownWatchdog(plan, logger)
	p.mon.setReady(false) // load balancers stop sending clients here first
	p.cons.Close()        // its client and sampler, before the listener drains
	// The cleaner stops between partitions (a compaction in progress
	// finishes first): meanwhile the listener drains.
	cleanerDone := make(chan struct{})
	go func() { p.cleaner.Close(); close(cleanerDone) }()
	watchdog.enter("closing the kafka listener")
	lctx, lcancel := context.WithDeadline(context.Background(), plan.listener)
	if err := p.srv.Shutdown(lctx); err != nil {
		logger.Warn("kafka listener closed with work left behind", "err", err)
	}
	lcancel()
	watchdog.enter("stopping the log cleaner")
	<-cleanerDone
	watchdog.enter("closing the broker (leadership handoff, raft groups, logs)")
	bctx, bcancel := context.WithDeadline(context.Background(), plan.handoff)
	if err := p.broker.CloseContext(bctx); err != nil {
		*runErr = errors.Join(*runErr, fmt.Errorf("close broker: %w", err))
	}
	bcancel()
	watchdog.enter("closing the monitoring listener")
	logger.Info("strata stopped", "took", time.Since(plan.start).Round(time.Millisecond))
	return watchdog
}

// defaultShutdownTimeout is strata.shutdown.timeout.ms's default, for a
// Config not made by loadConfig.
const defaultShutdownTimeout = 20 * time.Second
