package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// The Mux: one raft transport per broker, multiplexing every Raft group
// over a few TCP connections per peer (doc.go, "Raft design"). A
// connection starts with a preface:
//
//	+------+---------+------+----------+----------------+
//	| STRX | version | mode | idLen u8 | node ID (text) |
//	+------+---------+------+----------+----------------+
//
// The node ID is the dialer's raft server ID (its node.id): the accepting
// side refuses a node its broker does not admit (Config.Admit), and
// every request on the connection must name that node in its header
// (validate.go). Version 1 (no ID) is refused. Then frames:
//
//	+---------+---------+-----------+----------------------+---------+
//	| len u32 | kind u8 | reqID u64 | group: uvarint + str | body    |
//	+---------+---------+-----------+----------------------+---------+
//	  big endian, counts everything after itself; at most maxFrameBytes
//
// The dialing side sends requests and reads responses (kindResponse,
// kindError) matched by reqID; the accepting side does the reverse. A
// snapshot connection (mode muxModeSnapshot) carries one InstallSnapshot
// frame followed by exactly Size bytes of snapshot data, then one
// response, and is closed. The constants are wire format.

const (
	muxMagic           = "STRX"
	muxProtocolVersion = 2
	muxModeRPC         = 0
	muxModeSnapshot    = 1

	kindAppendEntries   = 1
	kindRequestVote     = 2
	kindRequestPreVote  = 3
	kindTimeoutNow      = 4
	kindInstallSnapshot = 5
	kindResponse        = 6
	kindError           = 7
	// kindForward carries a broker-level request (not raft's) to the
	// Mux's forward handler: metadata writes sent to the controller.
	kindForward = 8
	// kindHeartbeats carries many groups' heartbeats to one peer
	// (heartbeats.go).
	kindHeartbeats = 9

	// maxFrameBytes bounds one frame: MaxAppendEntries batches of at most
	// max.message.bytes each, with room to spare.
	maxFrameBytes = 128 << 20
	// maxGroupIDBytes bounds a group id (topic id + partition is ~40).
	maxGroupIDBytes = 256
	// frameHeaderBytes is len + kind + reqID.
	frameHeaderBytes = 4 + 1 + 8
	// groupInboxSize bounds the RPCs queued for one group's raft loop; an
	// RPC past it is answered with an error (the sender retries).
	groupInboxSize = 256
	// pipelineDepth bounds the AppendEntries in flight on one pipeline.
	pipelineDepth = 128
	// maxPendingCalls bounds the outstanding requests on one connection.
	maxPendingCalls = 1 << 16
	// bigFrameBytes: a read buffer grown past this is dropped after use.
	bigFrameBytes = 1 << 20
	// unknownGroupWait is how long a request for a group this broker has
	// not opened (yet) waits for it; maxGroupWaits bounds such requests.
	unknownGroupWait = 2 * time.Second
	maxGroupWaits    = 1024
)

var (
	// ErrClosed is returned by RPCs on a closed Mux or group.
	ErrClosed = errors.New("replication: transport closed")
	// ErrRPCTimeout is an RPC that got no answer within Config.RPCTimeout.
	ErrRPCTimeout = errors.New("replication: rpc timed out")
	// ErrRemote wraps an error the remote side answered with.
	ErrRemote = errors.New("replication: remote error")
	// errDial wraps a failure to open a connection to a peer (Mux.dial).
	errDial = errors.New("replication: dial")
)

// MetadataGroup is the id of the metadata quorum's group: its RPCs travel
// on the control connection beside forwarded requests, never behind a
// partition's backlog; its elections count apart (Stats); the pre-vote
// gate never holds it back (elections.go).
const MetadataGroup = "__metadata"

// Config configures a Mux.
type Config struct {
	// Listener is the replication listener; the Mux owns it from now on.
	// nil = no listener (Advertise must be set).
	Listener net.Listener
	// Advertise is the address peers dial to reach this Mux (the raft
	// ServerAddress); empty = Listener.Addr().
	Advertise string
	// Dial opens a connection to a peer; nil = TCP with DialTimeout.
	// Tests inject faults here (replication/internal/raftharness).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// ConnsPerPeer is the number of RPC connections per peer (default 2).
	// Each group uses one of them (hash of its id) so its RPCs stay in order.
	ConnsPerPeer int
	// RPCTimeout bounds one RPC, and every write (default 5s). An
	// InstallSnapshot gets RPCTimeout per 16 MiB more.
	RPCTimeout time.Duration
	// DialTimeout bounds a dial (default 2s).
	DialTimeout time.Duration
	// LocalID is this node's raft server ID, named in the preface of
	// every connection it dials; "" names none (tests).
	LocalID string
	// Admit decides whether a peer that named itself id in its preface
	// may use this Mux; nil admits every peer. A broker admits metadata
	// voters and registered brokers (Broker.admitPeer). Without TLS the
	// name is a claim, not an authentication. With TLS it is not asked:
	// the certificate admits the node (tls.go).
	Admit func(id string) error
	// AdmitFrom, when set, is asked instead of Admit with the peer's
	// remote address too (a broker admits a node asking to join from
	// loopback: replication's roles.go).
	AdmitFrom func(id string, remote net.Addr) error
	// TLS, when set, makes every connection mutual TLS with node
	// certificates (tls.go); nil = plaintext.
	TLS *TLS
	// CheckForward, when set, checks a forwarded request against the
	// node of the connection it came on ("" when the dialer named none)
	// before the forward handler sees it (Broker.checkForward).
	CheckForward func(peer string, req []byte) error
	// ExpectPeer, when set, names the node whose replication listener is
	// at addr, if known: with TLS, a server there whose certificate names
	// another node is refused (tls.go).
	ExpectPeer func(addr string) (id string, known bool)
	Logger     *slog.Logger
}

// Mux is one broker's raft transport. Groups get their raft.Transport from
// Group. Safe for concurrent use.
//
// Locks: Mux.mu (groups, peers, inbound, closed) is taken before a peer's
// mu; a connection's wmu and mu are leaves. No lock is held across a
// network read; a write holds only its connection's wmu.
type Mux struct {
	cfg    Config
	logger *slog.Logger
	ln     net.Listener
	addr   raft.ServerAddress

	mu      sync.Mutex
	groups  map[string]*Group // protected by mu
	peers   map[raft.ServerAddress]*muxPeer
	inbound map[net.Conn]struct{} // accepted connections, closed by Close
	beaters map[raft.ServerAddress]*beater
	// closedGroups holds when groups closed here (noteClosedLocked).
	closedGroups map[string]time.Time
	// groupAdded is closed (and replaced) when a group registers.
	groupAdded chan struct{}
	closed     bool

	shutdown chan struct{} // closed by Close
	// dialCtx is canceled by Close: a dial in progress ends with it.
	dialCtx    context.Context
	dialCancel context.CancelFunc
	wg         sync.WaitGroup
	nextReq    atomic.Uint64

	// catchUpPokes counts the barriers pipelines asked for to send a
	// follower the rest of a backlog (catchup.go).
	catchUpPokes atomic.Uint64

	// waitSem bounds the requests waiting for their group (waitGroup).
	waitSem chan struct{}
	// beatsSent and beatFrames count the heartbeats sent and the frames
	// that carried them (replication's metrics.go).
	beatsSent, beatFrames atomic.Uint64
	// beatsVouched counts heartbeats answered at once with the peer's last
	// answer while they travel (heartbeats.go).
	beatsVouched atomic.Uint64
	// commitRepeats counts idle commit-index updates a pipeline answered
	// itself (commit.go).
	commitRepeats atomic.Uint64
	// metaCounts and partCounts count elections, pre-vote rounds and
	// leaderships won by this broker's metadata group and partition
	// groups (Group.counters; replication's metrics.go).
	metaCounts, partCounts raftCounters
	// preVoteRounds is the partition groups' pre-vote rounds in flight;
	// preVotesDeferred counts the rounds the gate held back
	// (elections.go).
	preVoteRounds    atomic.Int64
	preVotesDeferred atomic.Uint64
	// beatRTT is a heartbeat round's time from send to answer (leader
	// side); beatGap the time between two heartbeats a follower group
	// handled (latency.go, replication's metrics.go).
	beatRTT, beatGap LatencyHist

	// fwdWG counts forwarded requests being handled: Close waits for them
	// only so long (fwdCloseWait), since a handler may wait on a raft
	// future that a raft shutting down never answers.
	fwdWG sync.WaitGroup

	fwdMu sync.Mutex
	fwd   func([]byte) ([]byte, error) // protected by fwdMu
	// fwdSem bounds the forwarded requests handled at once.
	fwdSem chan struct{}

	// peersRefused counts connections refused at the preface (Admit, a
	// bad preface) and framesRefused frames that broke a rule of
	// validate.go: both close their connection.
	peersRefused, framesRefused atomic.Uint64
	// joinVotesRefused counts vote requests refused by joining replicas
	// (join_gate.go).
	joinVotesRefused atomic.Uint64

	// tlsServer and tlsClient are set with Config.TLS (setupTLS).
	tlsServer, tlsClient *tls.Config
}

// NewMux starts accepting on cfg.Listener.
func NewMux(cfg Config) (*Mux, error) {
	if cfg.Listener == nil && cfg.Advertise == "" {
		return nil, errors.New("replication: NewMux: no listener and no address")
	}
	if len(cfg.LocalID) > maxPeerIDBytes {
		return nil, fmt.Errorf("replication: NewMux: local ID of %d bytes (at most %d)", len(cfg.LocalID), maxPeerIDBytes)
	}
	if cfg.ConnsPerPeer <= 0 {
		cfg.ConnsPerPeer = 2
	}
	if cfg.ConnsPerPeer > 16 {
		cfg.ConnsPerPeer = 16
	}
	if cfg.RPCTimeout <= 0 {
		cfg.RPCTimeout = 5 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: cfg.DialTimeout}
		cfg.Dial = func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	addr := cfg.Advertise
	if addr == "" {
		addr = cfg.Listener.Addr().String()
	}
	// Without a listener the Mux only dials: a single voter, whose groups
	// never send an RPC, needs no port.
	m := &Mux{
		cfg:          cfg,
		logger:       cfg.Logger.With("component", "raft-transport"),
		ln:           cfg.Listener,
		addr:         raft.ServerAddress(addr),
		groups:       map[string]*Group{},
		peers:        map[raft.ServerAddress]*muxPeer{},
		inbound:      map[net.Conn]struct{}{},
		groupAdded:   make(chan struct{}),
		beaters:      map[raft.ServerAddress]*beater{},
		closedGroups: map[string]time.Time{},
		waitSem:      make(chan struct{}, maxGroupWaits),
		shutdown:     make(chan struct{}),
		fwdSem:       make(chan struct{}, maxForwardsInFlight),
	}
	if err := m.setupTLS(); err != nil {
		return nil, err
	}
	m.dialCtx, m.dialCancel = context.WithCancel(context.Background())
	if m.ln != nil {
		m.wg.Add(1)
		go m.accept()
	}
	return m, nil
}

// Addr is the address peers reach this Mux at.
func (m *Mux) Addr() raft.ServerAddress { return m.addr }

// Group registers a Raft group and returns its transport. The id must be
// the same on every member and unique on this broker.
func (m *Mux) Group(id string) (*Group, error) {
	if id == "" || len(id) > maxGroupIDBytes {
		return nil, fmt.Errorf("replication: group id of %d bytes (1..%d)", len(id), maxGroupIDBytes)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if _, ok := m.groups[id]; ok {
		return nil, fmt.Errorf("replication: raft group %q already registered", id)
	}
	g := &Group{m: m, id: id, consumeCh: make(chan raft.RPC, groupInboxSize), shutdown: make(chan struct{})}
	m.groups[id] = g
	delete(m.closedGroups, id)
	close(m.groupAdded) // wakes requests waiting for a group (waitGroup)
	m.groupAdded = make(chan struct{})
	return g, nil
}

func (m *Mux) group(id []byte) *Group {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.groups[string(id)]
}

// Close stops accepting, closes every connection and fails every RPC in
// flight. Groups still registered are closed too.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.shutdown)
	m.dialCancel()
	var err error
	if m.ln != nil {
		err = m.ln.Close()
	}
	for c := range m.inbound {
		c.Close()
	}
	for _, p := range m.peers {
		p.closeAll(ErrClosed)
	}
	groups := make([]*Group, 0, len(m.groups))
	for _, g := range m.groups {
		groups = append(groups, g)
	}
	m.mu.Unlock()
	for _, g := range groups {
		g.Close()
	}
	m.wg.Wait()
	fwdDone := make(chan struct{})
	go func() { m.fwdWG.Wait(); close(fwdDone) }()
	select {
	case <-fwdDone:
	case <-time.After(fwdCloseWait):
		m.logger.Warn("a forwarded request was still being handled when the transport closed; left behind", "waited", fwdCloseWait)
	}
	return err
}

// fwdCloseWait bounds how long Close waits for forwarded requests in
// progress (their answers can no longer be sent anyway).
const fwdCloseWait = 2 * time.Second
