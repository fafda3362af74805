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
	var cleanerRef atomic.Pointer[retention.Cleaner] // set once the cleaner runs
	if err := retention.CleanerOptionsFromProps(cfg.BrokerProps, &cleanerOpts); err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	// TEST ONLY (faultinject.go): disk faults and a clock offset read from
	// the fault harness's control file; off without STRATA_FAULTS_CONTROL.
	faults := startFaultInjection(ctx, logger)
	if faults.Now != nil {
		cfg.Txns.Now, cfg.Groups.Now, cfg.Share.Now, cleanerOpts.Now = faults.Now, faults.Now, faults.Now, faults.Now
	}
	// Listen first: a busy port fails start-up before any disk work, and
	// port 0 gives the real port to advertise.
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Listener.Host, strconv.Itoa(cfg.Listener.Port)))
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listener, err)
	}
	adv := cfg.Advertised
	if adv.Port == 0 {
		adv.Port = ln.Addr().(*net.TCPAddr).Port
	}
	// The other listeners (security_config.go), bound now too.
	extra, err := listenExtra(cfg, ln)
	if err != nil {
		ln.Close()
		return err
	}

	// The operators' HTTP listener (monitoring.go) comes up before the
	// broker, so /healthz answers while a quorum is joined.
	reg := prometheus.NewRegistry()
	mon, err := startMonitor(cfg.Monitoring, reg, logger)
	if err != nil {
		ln.Close()
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

	var repLn net.Listener // the Raft transport's listener (cluster_config.go)
	if cfg.Cluster.Bind != "" {
		if repLn, err = net.Listen("tcp", cfg.Cluster.Bind); err != nil {
			ln.Close()
			return fmt.Errorf("listen on replication listener %s: %w", cfg.Cluster.Bind, err)
		}
	}
	// With other voters a partition may have other replicas: what this
	// broker stored but the quorum never committed (a leader's tail when
	// it died) must not count as committed at restart, or Raft's later
	// truncation of that tail is refused (below the high watermark) and
	// the replica is stuck. Such a partition starts at its checkpointed
	// high watermark and Raft commits the rest; alone, everything
	// recovered is committed (log.ManagerOptions).
	logs, err := log.OpenManager(log.ManagerOptions{Dir: dataDir, Logger: logger,
		ProducerIDExpiration: cfg.ProducerIDExpiration, ProducerIDExpirationCheck: cfg.ProducerIDExpirationCheck,
		UseHighWatermarkCheckpoint: len(cfg.Cluster.Voters) > 1, FS: faults.FS, Now: faults.Now})
	if err != nil {
		ln.Close()
		if repLn != nil {
			repLn.Close()
		}
		return fmt.Errorf("open data dir %s: %w", dataDir, err)
	}
	broker, err := replication.NewBroker(replication.BrokerConfig{
		NodeID:                   cfg.NodeID,
		AdvertisedHost:           adv.Host,
		AdvertisedPort:           int32(adv.Port),
		AdvertisedEndpoints:      extra.endpoints,
		Rack:                     cfg.Rack,
		DataDir:                  dataDir,
		NumPartitions:            cfg.NumPartitions,
		DefaultReplicationFactor: cfg.DefaultReplicationFactor,
		AutoCreateTopics:         cfg.AutoCreateTopics,
		DeleteTopicEnable:        cfg.DeleteTopicEnable,
		BrokerProps:              cfg.BrokerProps,
		OnBrokerProps:            func(p map[string]string) { setCleanerProps(cleanerRef.Load(), p, logger) },
		Logger:                   logger,
		Voters:                   cfg.Cluster.Voters,
		ReplicationListener:      repLn, // owned by the broker from here on
		ReplicationAdvertise:     cfg.Cluster.Advertise,
		BrokerOnly:               cfg.Cluster.BrokerOnly,
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
	}, logs)
	if err != nil {
		ln.Close()
		logs.Close()
		if errors.Is(err, replication.ErrMetaProperties) || errors.Is(err, replication.ErrInvalidConfig) {
			return fmt.Errorf("%w: %w", errConfig, err)
		}
		return fmt.Errorf("start broker: %w", err)
	}
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
	cleanerOpts.Logs = logs
	cleanerOpts.Registerer = reg
	cleaner := retention.NewCleaner(cleanerOpts)
	// Dynamic broker configs of the cleaner (log.cleaner.backoff.ms): those
	// set before this start, then every change (OnBrokerProps above).
	cleanerRef.Store(cleaner)
	setCleanerProps(cleaner, broker.EffectiveBrokerProps(), logger)
	pcfg := protocol.Config{MaxRequestBytes: cfg.SocketRequestMaxBytes, Logger: logger, Groups: cfg.Groups, Txns: cfg.Txns, Registerer: reg,
		Share: cfg.Share, GroupConfig: cfg.GroupConfig, ShareVersion: cfg.ShareVersion}
	cfg.Limits.apply(&pcfg)
	cfg.ACLs.apply(&pcfg)
	srv := protocol.NewServer(pcfg, broker)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeListener(ln, extra.main) }()
	extra.serve(srv, serveErr)
	logger.Info("strata ready", "listener", ln.Addr().String(), "advertised", adv.String(),
		"node_id", cfg.NodeID, "cluster_id", broker.ClusterID(), "data_dir", dataDir)
	cons := startConsole(cfg, ln.Addr(), reg, mon, broker, logger)
	mon.setReady(true)
	if ready != nil {
		ready <- ln.Addr()
	}
	// An idle broker runs on one scheduler P with timer slack (internal/procs).
	procsCtx, procsStop := context.WithCancel(context.Background())
	procsDone := make(chan struct{})
	go func() {
		defer close(procsDone)
		procs.Run(procsCtx, procs.Config{After: cfg.IdleAfter, Slack: cfg.IdleTimerSlack, Environ: os.Environ(), Logger: logger})
	}()
	defer func() { procsStop(); <-procsDone }()
	// SIGUSR1 logs every raft group's state (replication/raft_state.go).
	usr1, usr1Done := make(chan os.Signal, 1), make(chan struct{})
	signal.Notify(usr1, syscall.SIGUSR1)
	defer func() { signal.Stop(usr1); close(usr1Done) }()
	go func() {
		for {
			select {
			case <-usr1:
				broker.LogRaftState()
			case <-usr1Done:
				return
			}
		}
	}()

	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down", "cause", context.Cause(ctx))
	case runErr = <-serveErr:
		if runErr == nil {
			runErr = errors.New("server stopped unexpectedly")
		}
		logger.Error("kafka listener failed", "err", runErr)
	}
	if stop != nil {
		stop()
	}
	// Bounded (shutdown.go): each stage has its share of
	// strata.shutdown.timeout.ms, and the watchdog ends the process at the
	// end of it whatever is still running.
	total := cfg.ShutdownTimeout
	if total <= 0 {
		total = defaultShutdownTimeout
	}
	plan := planShutdown(time.Now(), total)
	watchdog = startShutdownWatchdog(plan, logger)
	mon.setReady(false) // load balancers stop sending clients here first
	cons.Close()        // its client and sampler, before the listener drains
	// The cleaner stops between partitions (a compaction in progress
	// finishes first): meanwhile the listener drains.
	cleanerDone := make(chan struct{})
	go func() { cleaner.Close(); close(cleanerDone) }()
	watchdog.enter("closing the kafka listener")
	lctx, lcancel := context.WithDeadline(context.Background(), plan.listener)
	if err := srv.Shutdown(lctx); err != nil {
		logger.Warn("kafka listener closed with work left behind", "err", err)
	}
	lcancel()
	watchdog.enter("stopping the log cleaner")
	<-cleanerDone
	watchdog.enter("closing the broker (leadership handoff, raft groups, logs)")
	bctx, bcancel := context.WithDeadline(context.Background(), plan.handoff)
	if err := broker.CloseContext(bctx); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("close broker: %w", err))
	}
	bcancel()
	watchdog.enter("closing the monitoring listener")
	logger.Info("strata stopped", "took", time.Since(plan.start).Round(time.Millisecond))
	return runErr
}

// defaultShutdownTimeout is strata.shutdown.timeout.ms's default, for a
// Config not made by loadConfig.
const defaultShutdownTimeout = 20 * time.Second
