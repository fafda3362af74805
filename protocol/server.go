package protocol

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/groupcoord"
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
	// Groups configures the group coordinator (offsets.topic.*, group.*
	// settings); zero values take Kafka's defaults.
	Groups groupcoord.Config
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

	mu        sync.Mutex
	closed    bool                      // protected by mu
	listeners map[net.Listener]struct{} // protected by mu
	conns     map[*conn]struct{}        // protected by mu

	wg sync.WaitGroup // connection goroutines (reader, writer, handlers)

	sessions fetchSessions // incremental fetch sessions (fetch_session.go)

	groups *groupcoord.Coordinator // consumer groups and offsets (08-16, 42, 47, 68, 69)
	txns   *txncoord.Coordinator   // transactions (22, 24-28, 65, 66)

	// panics counts recovered handler panics (bugs); tests assert it stays 0.
	panics atomic.Int64

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
	if cfg.Groups.Logger == nil {
		cfg.Groups.Logger = cfg.Logger.With("component", "groupcoord")
	}
	if cfg.Txns.Logger == nil {
		cfg.Txns.Logger = cfg.Logger.With("component", "txncoord")
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
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
	}
	s.txns = txncoord.New(cfg.Txns, b, s.groups)
	s.metrics = newMetrics(cfg.Registerer, s.connCount)
	if cfg.Registerer != nil {
		groupcoord.RegisterMetrics(cfg.Registerer, s.groups)
		txncoord.RegisterMetrics(cfg.Registerer, s.txns)
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
func (s *Server) Serve(ln net.Listener) error {
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
		s.startConn(nc)
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Server) startConn(nc net.Conn) {
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
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.wg.Add(2)
	s.mu.Unlock()
	go c.readLoop()
	go c.writeLoop()
}

func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Close stops accepting, closes every connection (finishing responses in
// flight where it can) and waits for the connection goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return nil
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
	// by a grace period, then every socket closes.
	for _, c := range conns {
		c.stopReading()
	}
	// Group requests parked in a rebalance are answered NOT_COORDINATOR
	// now rather than holding the grace period.
	s.txns.Close() // before groups: its marker goroutines call into groups
	s.groups.Close()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeGrace):
		s.cancel()
		for _, c := range conns {
			c.close()
		}
		<-done
	}
	s.cancel()
	return nil
}

// closeGrace bounds how long Close lets connections finish queued responses.
const closeGrace = 2 * time.Second
