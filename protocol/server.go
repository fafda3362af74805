package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/groupcoord"
	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/groupconfig"
	"github.com/strata-io/strata/internal/quota"
	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/txncoord"
)

// Defaults for Config's zero values.
const (
	DefaultMaxRequestBytes    = 100 << 20 // socket.request.max.bytes
	DefaultMaxInFlightPerConn = 64
	maxInFlightPerConnLimit   = 4096
	DefaultMaxConnections     = 10000
	DefaultConnectionsMaxIdle = 10 * time.Minute // connections.max.idle.ms
)

// Config configures the Kafka listener.
type Config struct {
	MaxRequestBytes    int32        // socket.request.max.bytes (default 100 MiB); larger frames close the connection
	MaxInFlightPerConn int          // pipelined requests read ahead per connection (default 64)
	Logger             *slog.Logger // nil = slog.Default()
	// MaxConnections bounds open client connections (max.connections;
	// default 10000); one more is accepted and closed at once, with a log
	// line.
	MaxConnections int
	// ConnectionsMaxIdle closes a connection that sends no request for
	// this long (connections.max.idle.ms; default 10 minutes).
	ConnectionsMaxIdle time.Duration
	// MaxConnectionsPerIP bounds open connections from one IP address
	// (max.connections.per.ip; default MaxConnections): one more is
	// closed at once, with a log line.
	MaxConnectionsPerIP int
	// QueuedMaxRequestBytes bounds the request bytes held in memory by
	// every connection together (queued.max.request.bytes; default 256
	// MiB; -1 unbounded, as Kafka's default): readers wait when it is
	// spent (limits.go).
	QueuedMaxRequestBytes int64
	// RequestReadTimeout bounds how long a request may take to arrive
	// once its first byte has (strata.request.read.timeout.ms; default
	// 30 s); past it the connection closes.
	RequestReadTimeout time.Duration
	// ResponseWriteTimeout bounds the writing of one response
	// (strata.response.write.timeout.ms; default 60 s): a client that
	// stops reading is closed, releasing what its responses hold.
	ResponseWriteTimeout time.Duration
	// ProduceMaxPartitions bounds the topic-partitions one Produce names
	// (strata.produce.max.partitions; default 100000); a larger one
	// closes the connection before it is decoded.
	ProduceMaxPartitions int
	// BacklogCheckInterval is how often the backlog of topics with
	// strata.produce.backlog.group is checked
	// (strata.produce.backlog.check.interval.ms; default 1 s;
	// produce_backlog.go).
	BacklogCheckInterval time.Duration
	// InterBrokerClient are the options that give Strata's own Kafka
	// clients (the dead-letter writer, share-state reads, backlog checks)
	// the broker's identity on the inter-broker listener: TLS and SASL
	// as Kafka's brokers have (cmd: inter.broker.listener.name,
	// sasl.mechanism.inter.broker.protocol). nil: PLAINTEXT, anonymous.
	InterBrokerClient []kgo.Opt
	// Groups configures the group coordinator (offsets.topic.*, group.*
	// settings); zero values take Kafka's defaults.
	Groups groupcoord.Config
	// Share configures the share-partition leader (group.share.*
	// settings); zero values take Kafka's defaults.
	Share ShareConfig
	// GroupConfig is the broker settings behind group configs (defaults
	// and bounds of group.share.* and group.consumer.*; share_config.go);
	// zero values take Kafka's defaults.
	GroupConfig groupconfig.Broker
	// ShareVersion is the share.version feature level finalized until
	// UpdateFeatures sets one in the metadata: 0 = the default (2, share
	// groups with dead-letter topics; 1 without), ShareVersionOff = level
	// 0 (share groups refused).
	ShareVersion int16
	// Txns configures the transaction coordinator (transaction.state.log.*,
	// transaction.* settings); zero values take Kafka's defaults.
	Txns txncoord.Config
	// NoBodyPool reads Produce bodies into fresh allocations instead of
	// pooled buffers (bodypool.go): for a broker whose Produce keeps a
	// reference to the records after it returns.
	NoBodyPool bool
	// NoSendfile copies Fetch record sets through a buffer (pread +
	// writev) instead of sending them from the segment files with
	// sendfile (fetch_sendfile.go).
	NoSendfile bool
	// Authorizer turns ACLs on (authorizer.go): nil, every request is
	// allowed.
	Authorizer *acl.Authorizer
	// QuotaWindow is the client quotas' measurement window
	// (quota.window.num, quota.window.size.seconds; quotas.go); zero
	// values take Kafka's defaults (11 samples of 1 s).
	QuotaWindow quota.Window
	// Registerer receives the listener's and the group coordinator's
	// series (metrics.go, groupcoord/metrics.go); nil = not exported.
	Registerer prometheus.Registerer
}

// Server serves the Kafka protocol for one broker.
type Server struct {
	cfg    Config
	broker *replication.Broker
	log    *slog.Logger

	ctx    context.Context // cancelled by Close; parent of every connection's context
	cancel context.CancelFunc
	// draining is closed when Close starts: long polls answer at once with
	// what they have, so queued responses can be written before the grace
	// period ends.
	draining chan struct{}

	// quotas measures the client quotas and quotaMetrics exports their
	// throttles (quotas.go).
	quotas       *quota.Manager
	quotaMetrics *quotaMetrics

	mu        sync.Mutex
	closed    bool                      // protected by mu
	listeners map[net.Listener]struct{} // protected by mu
	conns     map[*conn]struct{}        // protected by mu
	perIP     map[string]int            // protected by mu; open connections by remote IP

	// budget is queued.max.request.bytes (limits.go).
	budget *memBudget

	wg sync.WaitGroup // connection goroutines (reader, writer, handlers)

	sessions fetchSessions // incremental fetch sessions (fetch_session.go)

	groups *groupcoord.Coordinator // consumer groups and offsets (08-16, 42, 47, 68, 69)
	txns   *txncoord.Coordinator   // transactions (22, 24-28, 65, 66)
	share  *shareLeader            // share partitions this broker leads (78, 79)
	// shareRemote asks other brokers for their share partitions' state
	// (83, 86, 87 for 90-92: share_admin.go).
	shareRemote *shareRemote
	// backlog refuses produce to topics whose group is too far behind
	// (produce_backlog.go).
	backlog *backlogGuard

	// panics counts recovered handler panics (bugs); tests assert it stays 0.
	panics atomic.Int64

	// running counts the requests being handled, by API key, for what
	// Shutdown reports when its deadline passes first.
	running [256]atomic.Int32
	// stopped is closed once Shutdown's connection goroutines and the
	// coordinators are all done.
	stopped chan struct{}

	metrics *metrics // never nil (metrics.go)
}

// NewServer returns a server answering for b.
func NewServer(cfg Config, b *replication.Broker) *Server {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.MaxInFlightPerConn <= 0 {
		cfg.MaxInFlightPerConn = DefaultMaxInFlightPerConn
	}
	if cfg.MaxInFlightPerConn > maxInFlightPerConnLimit {
		cfg.MaxInFlightPerConn = maxInFlightPerConnLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.ConnectionsMaxIdle <= 0 {
		cfg.ConnectionsMaxIdle = DefaultConnectionsMaxIdle
	}
	if cfg.MaxConnectionsPerIP <= 0 {
		cfg.MaxConnectionsPerIP = cfg.MaxConnections
	}
	if cfg.QueuedMaxRequestBytes == 0 {
		cfg.QueuedMaxRequestBytes = DefaultQueuedMaxRequestBytes
	}
	if cfg.RequestReadTimeout <= 0 {
		cfg.RequestReadTimeout = DefaultRequestReadTimeout
	}
	if cfg.ResponseWriteTimeout <= 0 {
		cfg.ResponseWriteTimeout = DefaultResponseWriteTimeout
	}
	if cfg.ProduceMaxPartitions <= 0 {
		cfg.ProduceMaxPartitions = DefaultProduceMaxPartitions
	}
	if cfg.Groups.Logger == nil {
		cfg.Groups.Logger = cfg.Logger.With("component", "groupcoord")
	}
	if cfg.Txns.Logger == nil {
		cfg.Txns.Logger = cfg.Logger.With("component", "txncoord")
	}
	cfg.GroupConfig = cfg.GroupConfig.WithDefaults()
	if cfg.Groups.ShareGroupTimeouts == nil && b != nil {
		// A share group's own share.session.timeout.ms and
		// share.heartbeat.interval.ms (group configs, share_config.go);
		// 0 where it has none (the coordinator's settings apply).
		gc := cfg.GroupConfig
		cfg.Groups.ShareGroupTimeouts = func(group string) (session, heartbeat time.Duration) {
			ov := b.GroupConfigsView(group)
			if len(ov) == 0 {
				return 0, 0
			}
			e := groupconfig.Resolve(ov, gc)
			if _, ok := ov[groupconfig.ShareSessionTimeoutMs]; ok {
				session = e.ShareSessionTimeout
			}
			if _, ok := ov[groupconfig.ShareHeartbeatIntervalMs]; ok {
				heartbeat = e.ShareHeartbeatInterval
			}
			return session, heartbeat
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:       cfg,
		broker:    b,
		groups:    groupcoord.New(cfg.Groups, b),
		log:       cfg.Logger.With("component", "protocol"),
		ctx:       ctx,
		cancel:    cancel,
		draining:  make(chan struct{}),
		stopped:   make(chan struct{}),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		perIP:     make(map[string]int),
		budget:    newMemBudget(cfg.QueuedMaxRequestBytes),
	}
	if cfg.Txns.ClientOpts == nil {
		cfg.Txns.ClientOpts = cfg.InterBrokerClient
	}
	s.txns = txncoord.New(cfg.Txns, b, s.groups)
	if cfg.Share.MaxShareSessions <= 0 {
		cfg.Share.MaxShareSessions = cfg.GroupConfig.ShareMaxShareSessions
	}
	s.share = newShareLeader(cfg.Share, b, s.groupShare, cfg.InterBrokerClient)
	s.shareRemote = &shareRemote{broker: b, opts: cfg.InterBrokerClient}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.share.sweep(s.draining)
	}()
	s.metrics = newMetrics(cfg.Registerer, s.connCount)
	s.backlog = newBacklogGuard(s, cfg.BacklogCheckInterval, cfg.Registerer)
	if b != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.backlog.loop(s.draining)
		}()
	}
	s.quotas = quota.NewManager(cfg.QuotaWindow)
	s.quotaMetrics = newQuotaMetrics(cfg.Registerer)
	if cfg.Registerer != nil {
		groupcoord.RegisterMetrics(cfg.Registerer, s.groups)
		txncoord.RegisterMetrics(cfg.Registerer, s.txns)
		cfg.Registerer.MustRegister(shareCollector{s}, newTrafficCollector(s))
	}
	return s
}

// connCount is the number of open client connections, read at scrape time.
func (s *Server) connCount() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(len(s.conns))
}

// Serve accepts connections on ln until Close; it returns nil after Close.
func (s *Server) Serve(ln net.Listener) error { return s.serve(ln, nil) }

// serve accepts connections on ln, secured by sec (nil: PLAINTEXT;
// listener_security.go).
func (s *Server) serve(ln net.Listener, sec *ListenerSecurity) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Temporary (e.g. out of file descriptors): back off and
				// keep serving, bounded at one second.
				backoff = min(max(backoff*2, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed, retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.startConn(nc, sec)
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Server) startConn(nc net.Conn, sec *ListenerSecurity) {
	if s.connectionQuota(nc) { // connection_creation_rate (quotas.go)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	if len(s.conns) >= s.cfg.MaxConnections {
		s.mu.Unlock()
		s.log.Warn("refusing connection: too many connections", "remote", nc.RemoteAddr().String(), "max", s.cfg.MaxConnections)
		nc.Close()
		return
	}
	ip := remoteIP(nc)
	if s.perIP[ip] >= s.cfg.MaxConnectionsPerIP {
		s.mu.Unlock()
		s.log.Warn("refusing connection: too many connections from its address", "remote", nc.RemoteAddr().String(), "max_per_ip", s.cfg.MaxConnectionsPerIP)
		nc.Close()
		return
	}
	s.perIP[ip]++
	c := newSecuredConn(s, nc, sec)
	s.conns[c] = struct{}{}
	s.wg.Add(2)
	s.mu.Unlock()
	go c.readLoop()
	go c.writeLoop()
}

func (s *Server) removeConn(c *conn) {
	ip := remoteIP(c.nc)
	s.mu.Lock()
	if _, ok := s.conns[c]; ok {
		delete(s.conns, c)
		if s.perIP[ip]--; s.perIP[ip] <= 0 {
			delete(s.perIP, ip)
		}
	}
	s.mu.Unlock()
}

// remoteIP is the address max.connections.per.ip counts by.
func remoteIP(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return host
}

// Close is Shutdown without a deadline: it waits for every handler.
func (s *Server) Close() error { return s.Shutdown(context.Background()) }

// Shutdown stops accepting and closes every connection, within ctx:
//
//   - reading stops at once; the requests already read get their answers
//     while the writers drain, for closeGrace or half the time left before
//     ctx's deadline, whichever is shorter (long polls answer at once with
//     what they have, group requests parked in a rebalance get
//     NOT_COORDINATOR);
//   - then every connection closes, cancelling its handlers' contexts:
//     what was not answered yet is dropped with the connection, which
//     clients retry elsewhere;
//   - Shutdown waits for the connection goroutines and the coordinators
//     until ctx is done. Whatever still runs then -- a handler blocked in
//     the broker, such as a produce waiting for a commit its quorum cannot
//     make -- is left behind (it returns once the broker closes) and
//     Shutdown returns an error naming it (ErrShutdownIncomplete).
//
// A second call waits for the first one's goroutines, within its own ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		select {
		case <-s.stopped:
			return nil
		case <-ctx.Done():
			return s.incomplete(nil)
		}
	}
	s.closed = true
	close(s.draining)
	for ln := range s.listeners {
		ln.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	// Stop reading new requests; the writers finish what is queued, bounded
	// by the grace period, then every socket closes.
	for _, c := range conns {
		c.stopReading()
	}
	// Group requests parked in a rebalance are answered NOT_COORDINATOR
	// now rather than holding the grace period. The coordinators' own
	// goroutines may be writing to their partitions: they are waited for
	// like the handlers.
	coordsDone := make(chan struct{})
	go func() {
		defer close(coordsDone)
		s.txns.Close() // before groups: its marker goroutines call into groups
		s.groups.Close()
		s.shareRemote.close()
	}()
	connsDone := make(chan struct{})
	go func() { s.wg.Wait(); close(connsDone) }()
	go func() {
		<-connsDone
		<-coordsDone
		close(s.stopped)
	}()

	grace := closeGrace
	if d, ok := ctx.Deadline(); ok {
		grace = min(grace, time.Until(d)/2)
	}
	t := time.NewTimer(grace)
	select {
	case <-connsDone:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	s.cancel()
	for _, c := range conns {
		c.close()
	}
	select {
	case <-s.stopped:
		return nil
	case <-ctx.Done():
	}
	coords := false
	select {
	case <-coordsDone:
	default:
		coords = true
	}
	return s.incomplete(&coords)
}

// ErrShutdownIncomplete: Shutdown's deadline passed with handlers still
// running; they were left behind.
var ErrShutdownIncomplete = errors.New("protocol: shutdown deadline passed with work still running")

// incomplete describes what Shutdown leaves behind: the requests still
// being handled, by API, and whether the coordinators were still closing
// (nil: not known).
func (s *Server) incomplete(coords *bool) error {
	var parts []string
	total := 0
	for key := range s.running {
		if n := s.running[key].Load(); n > 0 {
			total += int(n)
			parts = append(parts, fmt.Sprintf("%s %d", kmsg.NameForKey(int16(key)), n))
		}
	}
	msg := fmt.Sprintf("%d requests still being handled", total)
	if len(parts) > 0 {
		msg += " (" + strings.Join(parts, ", ") + ")"
	}
	if coords != nil && *coords {
		msg += "; the group and transaction coordinators still closing"
	}
	return fmt.Errorf("%w: %s", ErrShutdownIncomplete, msg)
}

// closeGrace bounds how long Shutdown lets connections finish queued
// responses.
const closeGrace = 2 * time.Second
