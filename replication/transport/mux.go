package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
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

// maxForwardsInFlight bounds concurrent forwarded requests per Mux.
const maxForwardsInFlight = 64

// SetForwardHandler sets the handler of requests other brokers Forward to
// this one. It runs on its own goroutine per request (at most
// maxForwardsInFlight at once) and may block.
func (m *Mux) SetForwardHandler(fn func(req []byte) ([]byte, error)) {
	m.fwdMu.Lock()
	m.fwd = fn
	m.fwdMu.Unlock()
}

// Forward sends req to the Mux at target and returns its handler's answer.
func (m *Mux) Forward(target raft.ServerAddress, req []byte, timeout time.Duration) ([]byte, error) {
	cc, err := m.conn(target, "", true)
	if err != nil {
		return nil, err
	}
	var resp rawMsg
	cl, err := cc.start(kindForward, "", &rawMsg{b: req}, &resp)
	if err != nil {
		return nil, err
	}
	if err := cc.wait(cl, timeout); err != nil {
		return nil, err
	}
	return resp.b, nil
}

func (m *Mux) handleForward(f frame, w *frameWriter, peer string) error {
	var req rawMsg
	if err := decodeRPC(f.body, &req); err != nil {
		return err
	}
	if m.cfg.CheckForward != nil {
		if err := m.cfg.CheckForward(peer, req.b); err != nil {
			m.framesRefused.Add(1)
			m.logger.Warn("raft transport: forwarded request refused", "node", peer, "err", err)
			return w.writeError(f.reqID, nil, err.Error())
		}
	}
	m.fwdMu.Lock()
	fn := m.fwd
	m.fwdMu.Unlock()
	if fn == nil {
		return w.writeError(f.reqID, nil, "no forward handler")
	}
	select {
	case m.fwdSem <- struct{}{}:
	default:
		return w.writeError(f.reqID, nil, "too many forwarded requests")
	}
	reqID := f.reqID
	m.fwdWG.Add(1)
	go func() {
		defer m.fwdWG.Done()
		defer func() { <-m.fwdSem }()
		var resp []byte
		err := m.guard("forwarded request", func() error {
			var err error
			resp, err = fn(req.b)
			return err
		})
		if err != nil {
			w.writeError(reqID, nil, err.Error())
			return
		}
		w.writeMsg(kindResponse, reqID, nil, &rawMsg{b: resp})
	}()
	return nil
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

// ---- accepting side ----

func (m *Mux) accept() {
	defer m.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.shutdown:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(backoff)
				continue
			}
			m.logger.Error("raft transport: accept failed; listener stopped", "err", err)
			return
		}
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			c.Close()
			return
		}
		m.inbound[c] = struct{}{}
		m.wg.Add(1)
		m.mu.Unlock()
		go m.serve(c)
	}
}

func (m *Mux) forget(c net.Conn) {
	m.mu.Lock()
	delete(m.inbound, c)
	m.mu.Unlock()
	c.Close()
}

// serve runs one accepted connection.
func (m *Mux) serve(c net.Conn) {
	defer m.wg.Done()
	defer m.forget(c)
	defer m.recoverConn("accepted connection", c.RemoteAddr())
	tc, certID, err := m.acceptTLS(c)
	if err != nil {
		m.peersRefused.Add(1)
		m.logger.Warn("raft transport: TLS handshake failed; closing", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	c = tc // closed through the raw connection (forget)
	r := bufio.NewReaderSize(c, 64<<10)
	c.SetReadDeadline(time.Now().Add(m.cfg.RPCTimeout))
	var pre [len(muxMagic) + 3]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return
	}
	if string(pre[:4]) != muxMagic || pre[4] != muxProtocolVersion || pre[6] > maxPeerIDBytes {
		m.peersRefused.Add(1)
		m.logger.Warn("raft transport: bad preface; closing", "remote", c.RemoteAddr().String(), "version", pre[4])
		return
	}
	idb := make([]byte, pre[6])
	if _, err := io.ReadFull(r, idb); err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	peer := string(idb)
	if m.tlsServer != nil {
		if err := admitAuthenticated(peer, certID); err != nil {
			m.peersRefused.Add(1)
			m.logger.Warn("raft transport: peer refused; closing", "remote", c.RemoteAddr().String(), "node", peer, "err", err)
			return
		}
	} else if admit := m.admitter(c.RemoteAddr()); admit != nil {
		if err := admit(peer); err != nil {
			m.peersRefused.Add(1)
			m.logger.Warn("raft transport: peer refused; closing", "remote", c.RemoteAddr().String(), "node", peer, "err", err)
			return
		}
	}
	w := &frameWriter{c: c, w: bufio.NewWriterSize(c, 64<<10), timeout: m.cfg.RPCTimeout}
	switch pre[5] {
	case muxModeRPC:
		m.serveRPC(c, r, w, peer)
	case muxModeSnapshot:
		m.serveSnapshot(c, r, w, peer)
	default:
		m.logger.Warn("raft transport: unknown connection mode; closing", "mode", pre[5])
	}
}

func (m *Mux) serveRPC(c net.Conn, r *bufio.Reader, w *frameWriter, peer string) {
	var buf []byte
	// A frame that has begun must arrive within the RPC timeout (scaled
	// with its size, as snapshots are): a peer announcing a frame and
	// stalling is closed.
	sr := &stallReader{c: c, r: r, timeout: m.cfg.RPCTimeout}
	for {
		f, nbuf, err := readFrame(sr, buf)
		buf = nbuf
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				m.logger.Debug("raft transport: connection ended", "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		kept, err := m.handle(f, w, peer)
		if err != nil {
			if errors.Is(err, ErrRefused) {
				m.framesRefused.Add(1)
			}
			m.logger.Warn("raft transport: bad request; closing connection", "remote", c.RemoteAddr().String(), "node", peer, "err", err)
			return
		}
		if kept || cap(buf) > bigFrameBytes {
			buf = nil // the next frame gets a buffer of its own
		}
	}
}

// handle dispatches one request frame. An error closes the connection
// (the frame did not decode); refusals are answered with kindError. kept
// reports that the request holds on to f's buffer (an AppendEntries'
// entries alias it rather than copy each batch once more), so the reader
// must not reuse it. peer is the node the connection's dialer named
// (validate.go).
func (m *Mux) handle(f frame, w *frameWriter, peer string) (kept bool, err error) {
	var cmd any
	switch f.kind {
	case kindForward:
		return false, m.handleForward(f, w, peer)
	case kindHeartbeats:
		return false, m.handleHeartbeats(f, w, peer)
	case kindAppendEntries:
		ae := new(raft.AppendEntriesRequest)
		if err := decodeAppendEntriesOwned(f.body, ae); err != nil {
			return false, err
		}
		if err := checkRequest(ae, peer); err != nil {
			return false, err
		}
		return len(ae.Entries) > 0, m.dispatch(f, w, ae)
	case kindRequestVote:
		cmd = new(raft.RequestVoteRequest)
	case kindRequestPreVote:
		cmd = new(raft.RequestPreVoteRequest)
	case kindTimeoutNow:
		cmd = new(raft.TimeoutNowRequest)
	default:
		return false, fmt.Errorf("%w: request kind %d on an rpc connection", ErrCodec, f.kind)
	}
	if err := decodeRPC(f.body, cmd); err != nil {
		return false, err
	}
	if err := checkRequest(cmd, peer); err != nil {
		return false, err
	}
	return false, m.dispatch(f, w, cmd)
}

// dispatch hands a decoded request to its group.
func (m *Mux) dispatch(f frame, w *frameWriter, cmd any) error {
	g := m.group(f.group)
	if g == nil && m.closedRecently(f.group) {
		return w.writeError(f.reqID, f.group, "raft group closed here: "+string(f.group))
	}
	if g == nil {
		// A group is opened on each replica when that broker applies the
		// metadata naming it, so a new partition's first election (its
		// preferred replica starts it at once) and first entries can reach
		// a replica a moment before it has the group. Refused, the
		// candidate would wait an election timeout (and the leader back
		// off) while the partition has no leader; so wait for the group a
		// little, on a goroutine of its own.
		select {
		case m.waitSem <- struct{}{}:
		default:
			return w.writeError(f.reqID, f.group, "unknown raft group "+string(f.group))
		}
		reqID, group := f.reqID, string(f.group)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer func() { <-m.waitSem }()
			defer m.recoverConn("request waiting for its group", nil)
			g := m.waitGroup(group, unknownGroupWait)
			if g == nil {
				w.writeError(reqID, []byte(group), "unknown raft group "+group)
				return
			}
			m.deliver(g, reqID, []byte(group), cmd, w)
		}()
		return nil
	}
	return m.deliver(g, f.reqID, f.group, cmd, w)
}

// deliver hands one request to g's raft and has the answer written back.
// group may alias the read buffer: it is copied before deliver returns.
func (m *Mux) deliver(g *Group, reqID uint64, group []byte, cmd any, w *frameWriter) error {
	if resp, ok := g.joinFilter(cmd); ok {
		return w.writeMsg(kindResponse, reqID, group, resp)
	}
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: cmd, RespChan: respCh}
	if ae, ok := cmd.(*raft.AppendEntriesRequest); ok && isHeartbeat(ae) {
		if fn := g.heartbeatFn(); fn != nil {
			// The fast path: answered on this goroutine without waiting
			// behind the group's raft loop (which may be doing disk I/O).
			fn(rpc)
			return g.respond(w, reqID, group, respCh, true)
		}
	}
	select {
	case g.consumeCh <- rpc:
	case <-g.shutdown:
		return w.writeError(reqID, group, "raft group closed")
	default:
		return w.writeError(reqID, group, "raft group busy")
	}
	ae, _ := cmd.(*raft.AppendEntriesRequest)
	owned := bytes.Clone(group) // before the reader reuses its buffer
	go func() {
		defer m.recoverConn("answer", nil)
		g.respond(w, reqID, owned, respCh, ae != nil && len(ae.Entries) == 0)
	}()
	return nil
}

// waitGroup returns the group id once it is registered, or nil after
// timeout or when the Mux closes.
func (m *Mux) waitGroup(id string, timeout time.Duration) *Group {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		m.mu.Lock()
		g, added, closed := m.groups[id], m.groupAdded, m.closed
		m.mu.Unlock()
		if g != nil || closed {
			return g
		}
		select {
		case <-added:
		case <-t.C:
			return nil
		case <-m.shutdown:
			return nil
		}
	}
}

// isHeartbeat is hashicorp's test for an AppendEntries that only asserts
// leadership (net_transport.go): no entries, no log position, no commit.
func isHeartbeat(a *raft.AppendEntriesRequest) bool {
	leader := a.Addr
	if len(leader) == 0 {
		leader = a.Leader
	}
	return a.Term != 0 && leader != nil && a.PrevLogEntry == 0 && a.PrevLogTerm == 0 &&
		len(a.Entries) == 0 && a.LeaderCommitIndex == 0
}

// respond waits for raft's answer to one RPC and writes it back. Write
// errors end the connection through its reader.
func (g *Group) respond(w *frameWriter, reqID uint64, group []byte, respCh chan raft.RPCResponse, lazy bool) error {
	select {
	case resp := <-respCh:
		if resp.Error != nil {
			return w.writeError(reqID, group, resp.Error.Error())
		}
		return w.writeMsgLazy(kindResponse, reqID, group, resp.Response, lazy)
	case <-g.shutdown:
		return w.writeError(reqID, group, "raft group closed")
	}
}

func (m *Mux) serveSnapshot(c net.Conn, r *bufio.Reader, w *frameWriter, peer string) {
	c.SetReadDeadline(time.Now().Add(m.cfg.RPCTimeout))
	f, _, err := readFrame(r, nil)
	if err != nil {
		return
	}
	req := new(raft.InstallSnapshotRequest)
	if f.kind != kindInstallSnapshot {
		m.logger.Warn("raft transport: snapshot connection without InstallSnapshot; closing", "kind", f.kind)
		return
	}
	err = decodeRPC(f.body, req)
	if err == nil {
		err = checkRequest(req, peer)
	}
	if err != nil {
		if errors.Is(err, ErrRefused) {
			m.framesRefused.Add(1)
		}
		m.logger.Warn("raft transport: bad InstallSnapshot; closing", "remote", c.RemoteAddr().String(), "node", peer, "err", err)
		return
	}
	g := m.group(f.group)
	if g == nil {
		w.writeError(f.reqID, f.group, "unknown raft group "+string(f.group))
		return
	}
	if j := g.joinGateFor(); j != nil {
		j.sawLeader(req.Term, req.LastLogIndex)
	}
	c.SetReadDeadline(time.Now().Add(snapshotTimeout(m.cfg.RPCTimeout, req.Size)))
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: req, Reader: io.LimitReader(r, req.Size), RespChan: respCh}
	select {
	case g.consumeCh <- rpc:
	case <-g.shutdown:
		return
	case <-time.After(m.cfg.RPCTimeout):
		w.writeError(f.reqID, f.group, "raft group busy")
		return
	}
	g.respond(w, f.reqID, f.group, respCh, false)
}

// snapshotTimeout scales the RPC timeout with the snapshot's size.
func snapshotTimeout(base time.Duration, size int64) time.Duration {
	return base * time.Duration(1+size/(16<<20))
}

// ---- dialing side ----

// muxPeer is the connection pool to one peer address.
type muxPeer struct {
	addr raft.ServerAddress
	// heard is when a frame from this peer last arrived on any of the
	// connections (unix nanoseconds): heartbeats answered every few
	// hundred milliseconds make it a liveness signal (commit.go).
	heard atomic.Int64
	// lanes are the connections: ConnsPerPeer data lanes (a group's
	// AppendEntries, pinned by a hash of its id) and, last, the control
	// lane (conn, "Lanes").
	lanes []*lane
	// reach tracks whether the last dial failed, for AppendEntries that
	// wait for the peer to come back (catchup.go).
	reach peerReach
}

// lane is one connection of a peer's pool, redialed when dead. Dialing
// under mu makes the callers of a dead lane wait for one dial (bounded by
// DialTimeout) instead of each dialing; the other lanes do not wait.
type lane struct {
	mu sync.Mutex
	cc *clientConn // protected by mu; nil or dead: redial
}

func (p *muxPeer) closeAll(err error) {
	for _, l := range p.lanes {
		l.mu.Lock()
		if l.cc != nil {
			l.cc.fail(err)
			l.cc = nil
		}
		l.mu.Unlock()
	}
}

// Lanes. The connections to a peer are ConnsPerPeer data lanes and one
// control lane. A data lane carries the AppendEntries of the partition
// groups pinned to it, frames of up to maxFrameBytes that its reader on
// the far side reads whole, one after the other, and whose writes hold
// the lane's write lock. The control lane carries what must not wait
// behind them (replication/doc.go, "Staying up under load"): heartbeat rounds, votes,
// pre-votes and TimeoutNow of every group, all of the metadata group's
// traffic, and forwarded metadata requests. Its frames are small, and
// each side reads it on a goroutine of its own.

// peer returns the connection pool to target, made on first use.
func (m *Mux) peer(target raft.ServerAddress) (*muxPeer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	p := m.peers[target]
	if p == nil {
		p = &muxPeer{addr: target, lanes: make([]*lane, m.cfg.ConnsPerPeer+1)}
		for i := range p.lanes {
			p.lanes[i] = &lane{}
		}
		m.peers[target] = p
	}
	return p, nil
}

// conn returns the live connection for group's request, dialing it if
// needed: the control lane when control is set, else the data lane group
// is pinned to.
func (m *Mux) conn(target raft.ServerAddress, group string, control bool) (*clientConn, error) {
	p, err := m.peer(target)
	if err != nil {
		return nil, err
	}
	i := m.cfg.ConnsPerPeer // the control lane
	if !control {
		h := fnv.New32a()
		h.Write([]byte(group))
		i = int(h.Sum32() % uint32(m.cfg.ConnsPerPeer))
	}
	l := p.lanes[i]
	l.mu.Lock()
	defer l.mu.Unlock()
	if cc := l.cc; cc != nil && cc.alive() {
		return cc, nil
	}
	c, err := m.dial(target, muxModeRPC)
	if err != nil {
		p.reach.failed()
		return nil, err
	}
	p.reach.reached()
	cc := newClientConn(m, c)
	cc.peer = p
	l.cc = cc
	m.wg.Add(1)
	go cc.readLoop()
	return cc, nil
}

func (m *Mux) dial(target raft.ServerAddress, mode byte) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(m.dialCtx, m.cfg.DialTimeout)
	defer cancel()
	c, err := m.cfg.Dial(ctx, string(target))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errDial, target, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	raw := c
	if c, err = m.dialTLS(ctx, c, string(target)); err != nil {
		raw.Close()
		return nil, fmt.Errorf("%w %s: TLS: %w", errDial, target, err)
	}
	pre := append([]byte(muxMagic), muxProtocolVersion, mode, byte(len(m.cfg.LocalID)))
	pre = append(pre, m.cfg.LocalID...)
	c.SetWriteDeadline(time.Now().Add(m.cfg.RPCTimeout))
	if _, err := c.Write(pre); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w %s: %w", errDial, target, err)
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

// call is one outstanding request on a clientConn.
type call struct {
	id   uint64
	resp any        // decoded into on success
	done chan error // buffered 1; receives exactly once
}

// clientConn is a dialed RPC connection: many callers write requests, one
// reader goroutine matches responses to calls.
type clientConn struct {
	m    *Mux
	c    net.Conn
	w    *frameWriter
	peer *muxPeer // nil for a connection of its own (snapshots)

	// lastRead is when the reader last got a frame (unix nanoseconds):
	// a connection that answers is not failed for one late answer.
	lastRead atomic.Int64

	mu      sync.Mutex
	pending map[uint64]*call // protected by mu
	dead    error            // protected by mu; set once
}

func newClientConn(m *Mux, c net.Conn) *clientConn {
	cc := &clientConn{
		m:       m,
		c:       c,
		w:       &frameWriter{c: c, w: bufio.NewWriterSize(c, 64<<10), timeout: m.cfg.RPCTimeout},
		pending: map[uint64]*call{},
	}
	cc.lastRead.Store(time.Now().UnixNano())
	return cc
}

func (cc *clientConn) alive() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.dead == nil
}

// fail closes the connection and fails every pending call with err.
func (cc *clientConn) fail(err error) {
	cc.mu.Lock()
	if cc.dead != nil {
		cc.mu.Unlock()
		return
	}
	cc.dead = err
	pending := cc.pending
	cc.pending = nil
	cc.mu.Unlock()
	if cc.peer != nil {
		// A connection to the peer broke: nothing is answered on its
		// behalf (repeats, steady heartbeats) until a frame arrives again.
		cc.peer.heard.Store(0)
	}
	cc.c.Close()
	for _, cl := range pending {
		cl.done <- err
	}
}

// start sends a request and returns its call; the answer arrives on
// call.done.
func (cc *clientConn) start(kind byte, group string, req, resp any) (*call, error) {
	lazy := false
	if ae, ok := req.(*raft.AppendEntriesRequest); ok && len(ae.Entries) == 0 {
		lazy = true // a heartbeat or an idle commit-index update
	}
	id := cc.m.nextReq.Add(1)
	cl := &call{id: id, resp: resp, done: make(chan error, 1)}
	cc.mu.Lock()
	if cc.dead != nil {
		err := cc.dead
		cc.mu.Unlock()
		return nil, err
	}
	if len(cc.pending) >= maxPendingCalls {
		cc.mu.Unlock()
		return nil, fmt.Errorf("replication: %d requests outstanding to %s", maxPendingCalls, cc.c.RemoteAddr())
	}
	cc.pending[id] = cl
	cc.mu.Unlock()
	if err := cc.w.writeMsgLazy(kind, id, []byte(group), req, lazy); err != nil {
		cc.fail(fmt.Errorf("replication: write to %s: %w", cc.c.RemoteAddr(), err))
		return nil, err
	}
	return cl, nil
}

// wait waits for cl's answer, at most timeout.
func (cc *clientConn) wait(cl *call, timeout time.Duration) error {
	return cc.waitOr(cl, timeout, nil)
}

// waitOr is wait that also ends when stop closes (the calling group's
// transport closed): its raft is shutting down, and a shutdown that waits
// for its RPCs -- a topic's deletion on the metadata FSM goroutine, one
// group after another -- must not wait out their timeouts.
func (cc *clientConn) waitOr(cl *call, timeout time.Duration, stop <-chan struct{}) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-cl.done:
		return err
	case <-stop:
		cc.mu.Lock()
		delete(cc.pending, cl.id)
		cc.mu.Unlock()
		return ErrClosed
	case <-t.C:
	}
	if time.Since(time.Unix(0, cc.lastRead.Load())) < timeout {
		// Other answers arrive: the peer reads and writes this
		// connection, and this request waits on something else there
		// (a vote behind its group's busy raft loop). Failing the
		// connection would fail every group's requests on it, their
		// pipelines and heartbeat rounds with them, and make raft back
		// off from followers that are fine -- under load, more work and
		// more missed heartbeats (the election storm of issue 15). Only
		// this call ends; its late answer is dropped.
		cc.mu.Lock()
		delete(cc.pending, cl.id)
		cc.mu.Unlock()
		return ErrRPCTimeout
	}
	// Nothing came back for the whole wait: the connection may be wedged
	// (a peer that stopped reading); failing it makes every caller on it
	// redial.
	cc.fail(ErrRPCTimeout)
	return ErrRPCTimeout
}

func (cc *clientConn) readLoop() {
	defer cc.m.wg.Done()
	defer func() {
		if r := recover(); r != nil {
			cc.m.panicked("dialed connection's reader", r)
			cc.fail(fmt.Errorf("replication: connection to %s: reader panicked: %v", cc.c.RemoteAddr(), r))
		}
	}()
	r := bufio.NewReaderSize(cc.c, 64<<10)
	var buf []byte
	for {
		f, nbuf, err := readFrame(r, buf)
		buf = nbuf
		if err != nil {
			cc.fail(fmt.Errorf("replication: connection to %s: %w", cc.c.RemoteAddr(), err))
			return
		}
		now := time.Now().UnixNano()
		cc.lastRead.Store(now)
		if cc.peer != nil {
			cc.peer.heard.Store(now)
		}
		cc.mu.Lock()
		cl := cc.pending[f.reqID]
		delete(cc.pending, f.reqID)
		cc.mu.Unlock()
		if cl == nil {
			continue // answer to a call that timed out
		}
		switch f.kind {
		case kindResponse:
			err := decodeRPC(f.body, cl.resp)
			if err == nil {
				err = checkResponse(cl.resp)
			}
			cl.done <- err
		case kindError:
			cl.done <- fmt.Errorf("%w: %s", ErrRemote, f.body)
		default:
			cl.done <- fmt.Errorf("%w: response kind %d", ErrCodec, f.kind)
		}
		if cap(buf) > bigFrameBytes {
			buf = nil
		}
	}
}

// ---- frames ----

type frame struct {
	kind  byte
	reqID uint64
	group []byte // aliases the read buffer
	body  []byte // aliases the read buffer
}

// frameReader is where readFrame reads from: a bufio.Reader, or a
// stallReader that bounds the time a frame takes once begun.
type frameReader interface {
	io.Reader
	begun(n uint32)
	ended()
}

type plainFrames struct{ *bufio.Reader }

func (plainFrames) begun(uint32) {}
func (plainFrames) ended()       {}

// stallReader sets a read deadline when a frame begins and clears it when
// the frame has arrived: between frames a connection may idle.
type stallReader struct {
	c       net.Conn
	r       *bufio.Reader
	timeout time.Duration
}

func (s *stallReader) Read(p []byte) (int, error) { return s.r.Read(p) }
func (s *stallReader) begun(n uint32) {
	s.c.SetReadDeadline(time.Now().Add(snapshotTimeout(s.timeout, int64(n))))
}
func (s *stallReader) ended() { s.c.SetReadDeadline(time.Time{}) }

// readFrame reads one frame into buf (grown as needed) and returns it.
// The buffer grows from the bytes received, not from the length the frame
// claims: a peer announcing maxFrameBytes and sending nothing more pins
// at most frameGrowBytes (8 such connections used to hold 1 GiB).
func readFrame(br io.Reader, buf []byte) (frame, []byte, error) {
	r, ok := br.(frameReader)
	if !ok {
		r = plainFrames{br.(*bufio.Reader)}
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, buf, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	r.begun(n)
	defer r.ended()
	if n < frameHeaderBytes-4+1 || n > maxFrameBytes {
		return frame{}, buf, fmt.Errorf("%w: frame length %d", ErrCodec, n)
	}
	if cap(buf) >= int(n) {
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return frame{}, buf, err
		}
	} else {
		var err error
		if buf, err = readGrowing(r, buf[:0], int(n)); err != nil {
			return frame{}, nil, err
		}
	}
	f := frame{kind: buf[0], reqID: binary.BigEndian.Uint64(buf[1:9])}
	gl, k := binary.Uvarint(buf[9:])
	if k <= 0 || gl > maxGroupIDBytes || gl > uint64(len(buf)-9-k) {
		return frame{}, buf, fmt.Errorf("%w: bad group id length", ErrCodec)
	}
	f.group = buf[9+k : 9+k+int(gl)]
	f.body = buf[9+k+int(gl):]
	return f, buf, nil
}

// frameGrowBytes is the most readGrowing allocates ahead of the bytes it
// has received.
const frameGrowBytes = 1 << 20

// readGrowing reads n bytes into buf (reused when large enough), growing
// it at most doubling what has arrived (and by frameGrowBytes at first).
func readGrowing(r io.Reader, buf []byte, n int) ([]byte, error) {
	if cap(buf) < min(n, frameGrowBytes) {
		buf = make([]byte, 0, min(n, frameGrowBytes))
	}
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), n))
			copy(grown, buf)
			buf = grown
		}
		k, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// frameWriter serializes frames onto a connection. Writers queue on wmu;
// the last one in the queue flushes, so frames from many groups written
// at once leave in one syscall. AppendEntries without entries (an idle
// leader's commit-index updates; heartbeats travel coalesced,
// heartbeats.go), and their answers, are written lazily: they
// wait up to heartbeatFlushDelay for other frames to share their syscall
// (replication/doc.go, "Raft timing"); any eager frame flushes them along.
type frameWriter struct {
	c       net.Conn
	timeout time.Duration
	waiting atomic.Int32
	wmu     sync.Mutex
	w       *bufio.Writer // protected by wmu
	armed   bool          // protected by wmu; a lazy flush is scheduled
	werr    error         // protected by wmu; a failed write sticks
}

// heartbeatFlushDelay is how long a lazy frame may wait in the buffer for
// company. Heartbeats no longer need it (they travel coalesced); the lazy
// frames left are idle commit-index updates, a new leader's probes and
// their answers, which a failover waits on: 50 ms here (with the leader
// timing of that attempt) failed 2 of 5 chaos runs, 2 ms never did.
const heartbeatFlushDelay = 2 * time.Millisecond

func (fw *frameWriter) writeMsg(kind byte, reqID uint64, group []byte, msg any) error {
	return fw.writeMsgLazy(kind, reqID, group, msg, false)
}

func (fw *frameWriter) writeMsgLazy(kind byte, reqID uint64, group []byte, msg any, lazy bool) error {
	e := &enc{b: make([]byte, frameHeaderBytes, frameHeaderBytes+64+len(group)+encodedSizeHint(msg)), vec: true}
	e.u64(uint64(len(group)))
	e.b = append(e.b, group...)
	if !encodeRPC(e, msg) {
		return fmt.Errorf("%w: cannot encode %T", ErrCodec, msg)
	}
	if len(e.parts) == 0 {
		return fw.write(kind, reqID, e.b, lazy)
	}
	return fw.writeParts(kind, reqID, append(e.parts, e.b), lazy)
}

func (fw *frameWriter) writeError(reqID uint64, group []byte, msg string) error {
	b := make([]byte, frameHeaderBytes, frameHeaderBytes+binary.MaxVarintLen64+len(group)+len(msg))
	b = binary.AppendUvarint(b, uint64(len(group)))
	b = append(b, group...)
	b = append(b, msg...)
	return fw.write(kindError, reqID, b, false)
}

// write fills in the header of b (frameHeaderBytes reserved at its start)
// and writes it.
func (fw *frameWriter) write(kind byte, reqID uint64, b []byte, lazy bool) error {
	return fw.writeParts(kind, reqID, [][]byte{b}, lazy)
}

// writeParts writes one frame made of parts, in order; the first has
// frameHeaderBytes reserved at its start for the header. Parts larger than
// the buffer's room go to the connection without being copied (bufio
// writes them directly once the buffer is flushed).
func (fw *frameWriter) writeParts(kind byte, reqID uint64, parts [][]byte, lazy bool) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n-4 > maxFrameBytes {
		return fmt.Errorf("replication: frame of %d bytes exceeds %d", n-4, maxFrameBytes)
	}
	b := parts[0]
	binary.BigEndian.PutUint32(b[0:4], uint32(n-4))
	b[4] = kind
	binary.BigEndian.PutUint64(b[5:13], reqID)
	fw.waiting.Add(1)
	fw.wmu.Lock()
	defer fw.wmu.Unlock()
	if fw.werr != nil {
		fw.waiting.Add(-1)
		return fw.werr
	}
	var err error
	for _, p := range parts {
		if len(p) > fw.w.Available() {
			// bufio flushes (or writes p itself) here, not only in
			// flushLocked: the deadline must cover these writes too.
			fw.c.SetWriteDeadline(time.Now().Add(fw.timeout))
		}
		if _, err = fw.w.Write(p); err != nil {
			break
		}
	}
	if fw.waiting.Add(-1) == 0 && err == nil {
		if lazy {
			if !fw.armed {
				fw.armed = true
				time.AfterFunc(heartbeatFlushDelay, fw.lazyFlush)
			}
		} else {
			err = fw.flushLocked()
		}
	}
	if err != nil {
		fw.werr = err
	}
	return err
}

func (fw *frameWriter) flushLocked() error {
	if fw.w.Buffered() == 0 {
		return nil
	}
	fw.c.SetWriteDeadline(time.Now().Add(fw.timeout))
	return fw.w.Flush()
}

func (fw *frameWriter) lazyFlush() {
	fw.wmu.Lock()
	defer fw.wmu.Unlock()
	fw.armed = false
	if fw.werr != nil {
		return
	}
	if err := fw.flushLocked(); err != nil {
		fw.werr = err
		fw.c.Close() // the reader sees it and fails the calls waiting
	}
}

// ---- the raft.Transport of one group ----

// Group is one Raft group's raft.Transport over the Mux.
type Group struct {
	m         *Mux
	id        string
	consumeCh chan raft.RPC
	shutdown  chan struct{}
	closeOnce sync.Once

	hbMu sync.Mutex
	hb   func(raft.RPC) // protected by hbMu

	catchUp atomic.Pointer[catchUp] // catchup.go
	// watch is the group's raft as the transport follows it (Attach;
	// catchup.go); nil: AppendEntries never wait for a peer.
	watch atomic.Pointer[raftWatch]

	// voteTerm and leadTerm are the highest term this group asked votes
	// for and sent AppendEntries at as a leader: each new one counts an
	// election or a leadership won here (Mux.metaCounts, partCounts;
	// replication's metrics.go).
	voteTerm, leadTerm atomic.Uint64
	// election gates its pre-vote rounds (elections.go).
	election electionGate
	// beatTerm is the highest heartbeat term handled for this group
	// (handleHeartbeats): one above it may make raft persist a new term.
	beatTerm atomic.Uint64
	// lastBeat is when the group last handled a heartbeat (unix nanos).
	lastBeat atomic.Int64
	// join holds a joining replica's votes back (join_gate.go); nil once
	// it has caught up, or when it never joined.
	join atomic.Pointer[joinGate]
	// matches is each follower's last matched index (join_gate.go).
	matches followerMatch
}

// countTerm raises *seen to term and reports whether term was new.
func countTerm(seen *atomic.Uint64, term uint64) bool {
	for {
		old := seen.Load()
		if term <= old {
			return false
		}
		if seen.CompareAndSwap(old, term) {
			return true
		}
	}
}

// raftCounters counts raft events of one kind of group (replication's metrics.go).
type raftCounters struct {
	elections, preVotes, leaderChanges atomic.Uint64
}

// counters is where g's events count: the metadata group's apart from
// the partitions'.
func (g *Group) counters() *raftCounters {
	if g.id == MetadataGroup {
		return &g.m.metaCounts
	}
	return &g.m.partCounts
}

var (
	_ raft.Transport   = (*Group)(nil)
	_ raft.WithPreVote = (*Group)(nil)
	_ raft.WithClose   = (*Group)(nil)
)

// ID is the group id.
func (g *Group) ID() string { return g.id }

func (g *Group) Consumer() <-chan raft.RPC     { return g.consumeCh }
func (g *Group) LocalAddr() raft.ServerAddress { return g.m.addr }

func (g *Group) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	g.hbMu.Lock()
	g.hb = cb
	g.hbMu.Unlock()
}

func (g *Group) heartbeatFn() func(raft.RPC) {
	g.hbMu.Lock()
	defer g.hbMu.Unlock()
	return g.hb
}

func (g *Group) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte {
	return []byte(addr)
}

func (g *Group) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }

// Close unregisters the group and ends its RPCs in flight; raft calls it
// at the end of Shutdown, and partitionGroup.shutdown first, so that raft's
// goroutines do not wait out their RPCs' timeouts.
func (g *Group) Close() error {
	g.closeOnce.Do(func() {
		close(g.shutdown)
		g.m.mu.Lock()
		if g.m.groups[g.id] == g {
			delete(g.m.groups, g.id)
			g.m.noteClosedLocked(g.id)
		}
		g.m.mu.Unlock()
	})
	return nil
}

// Recently closed groups. A request for a group this broker does not have
// waits unknownGroupWait for it to open (dispatch): a new partition's
// first messages can arrive before this broker applied its creation. A
// group closed here (its topic deleted, the replica moved away) is not
// about to open: its requests, from a peer that has not applied the
// deletion yet, are refused at once, or every RPC of the peer's group
// waited 2 s, and the peer's shutdown of that group with it.
const (
	closedGroupMemory = time.Minute
	maxClosedGroups   = 16384
)

// noteClosedLocked records id as closed now (m.mu held), forgetting the
// oldest entries past closedGroupMemory or maxClosedGroups.
func (m *Mux) noteClosedLocked(id string) {
	now := time.Now()
	if len(m.closedGroups) >= maxClosedGroups {
		for k, at := range m.closedGroups {
			if now.Sub(at) > closedGroupMemory || len(m.closedGroups) >= maxClosedGroups {
				delete(m.closedGroups, k)
			}
		}
	}
	m.closedGroups[id] = now
}

// closedRecently reports whether group id was closed here within
// closedGroupMemory and not opened again.
func (m *Mux) closedRecently(id []byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.closedGroups[string(id)]
	return ok && time.Since(at) < closedGroupMemory
}

func (g *Group) closed() bool {
	select {
	case <-g.shutdown:
		return true
	default:
		return false
	}
}

// rpc sends one request and waits for its answer, at most timeout: on
// the control lane when control is set (conn, "Lanes").
func (g *Group) rpc(target raft.ServerAddress, kind byte, req, resp any, control bool, timeout time.Duration) error {
	if g.closed() {
		return ErrClosed
	}
	cc, err := g.m.conn(target, g.id, control || g.id == MetadataGroup)
	if err != nil {
		return err
	}
	cl, err := cc.start(kind, g.id, req, resp)
	if err != nil {
		return err
	}
	return cc.waitOr(cl, timeout, g.shutdown)
}

// voteTimeout bounds a vote or pre-vote RPC (voteRPCTimeout).
func (g *Group) voteTimeout() time.Duration {
	return min(voteRPCTimeout, g.m.cfg.RPCTimeout)
}

func (g *Group) AppendEntries(_ raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if countTerm(&g.leadTerm, args.Term) {
		g.counters().leaderChanges.Add(1)
		// A leader hears no heartbeats: its gap, once it follows
		// again, starts at the next one it handles.
		g.lastBeat.Store(0)
	}
	if isHeartbeat(args) {
		return g.heartbeat(target, args, resp)
	}
	err := g.rpc(target, kindAppendEntries, args, resp, false, g.m.cfg.RPCTimeout)
	if errors.Is(err, errDial) && g.waitPeer(target) {
		// The peer is back: send now rather than fail, which would make
		// raft back off from it (catchup.go).
		err = g.rpc(target, kindAppendEntries, args, resp, false, g.m.cfg.RPCTimeout)
	}
	g.noteMatch(target, args, resp, err)
	return err
}

func (g *Group) RequestVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := g.joinCampaign(); err != nil {
		return err
	}
	if countTerm(&g.voteTerm, args.Term) {
		g.counters().elections.Add(1)
	}
	return g.rpc(target, kindRequestVote, args, resp, true, g.voteTimeout())
}

func (g *Group) RequestPreVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if g.joinCampaign() != nil || !g.admitPreVote() {
		refusePreVote(args, resp)
		return nil
	}
	err := g.rpc(target, kindRequestPreVote, args, resp, true, g.voteTimeout())
	g.endPreVote(err == nil && resp.Granted)
	return err
}

func (g *Group) TimeoutNow(_ raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return g.rpc(target, kindTimeoutNow, args, resp, true, g.m.cfg.RPCTimeout)
}

// InstallSnapshot streams a snapshot on a connection of its own, so that
// a large snapshot never delays the heartbeats of other groups.
func (g *Group) InstallSnapshot(_ raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if g.closed() {
		return ErrClosed
	}
	c, err := g.m.dial(target, muxModeSnapshot)
	if err != nil {
		return err
	}
	defer c.Close()
	timeout := snapshotTimeout(g.m.cfg.RPCTimeout, args.Size)
	c.SetDeadline(time.Now().Add(timeout))
	fw := &frameWriter{c: c, w: bufio.NewWriterSize(c, 256<<10), timeout: timeout}
	fw.waiting.Add(1) // hold the flush until the data follows the frame
	if err := fw.writeMsg(kindInstallSnapshot, 1, []byte(g.id), args); err != nil {
		return err
	}
	n, err := io.Copy(fw.w, io.LimitReader(data, args.Size))
	if err != nil {
		return fmt.Errorf("replication: stream snapshot to %s: %w", target, err)
	}
	if n != args.Size {
		return fmt.Errorf("replication: snapshot for %s is %d bytes, announced %d", target, n, args.Size)
	}
	if err := fw.w.Flush(); err != nil {
		return fmt.Errorf("replication: stream snapshot to %s: %w", target, err)
	}
	f, _, err := readFrame(bufio.NewReader(c), nil)
	if err != nil {
		return fmt.Errorf("replication: snapshot answer from %s: %w", target, err)
	}
	switch f.kind {
	case kindResponse:
		if err := decodeRPC(f.body, resp); err != nil {
			return err
		}
		return checkResponse(resp)
	case kindError:
		return fmt.Errorf("%w: %s", ErrRemote, f.body)
	}
	return fmt.Errorf("%w: response kind %d", ErrCodec, f.kind)
}

// AppendEntriesPipeline returns a pipeline on the group's connection to
// target; requests and answers keep their order.
func (g *Group) AppendEntriesPipeline(_ raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if g.closed() {
		return nil, ErrClosed
	}
	cc, err := g.m.conn(target, g.id, g.id == MetadataGroup)
	if err != nil {
		return nil, err
	}
	p := &muxPipeline{
		g:        g,
		cc:       cc,
		target:   target,
		inflight: make(chan *appendFuture, pipelineDepth),
		consumer: make(chan raft.AppendFuture, pipelineDepth),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go p.decode()
	return p, nil
}

// muxPipeline pipelines AppendEntries on one connection.
type muxPipeline struct {
	g         *Group
	cc        *clientConn
	target    raft.ServerAddress
	inflight  chan *appendFuture
	consumer  chan raft.AppendFuture
	stop      chan struct{}
	done      chan struct{} // closed when decode returns
	closeOnce sync.Once
	sentLast  atomic.Uint64 // index of the last entry sent (catchup.go)
	ackLast   atomic.Uint64 // index of the last entry acknowledged (catchup.go)
	lookArmed atomic.Bool   // a catch-up look is pending (catchup.go)

	mu      sync.Mutex
	known   followerState // protected by mu; commit.go
	knownOK bool          // protected by mu; known holds an acknowledged state
}

func (p *muxPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	f := &appendFuture{start: time.Now(), req: args, resp: resp, done: make(chan struct{})}
	if p.repeat(args, resp) {
		// Answered here (commit.go); decode hands it to raft in
		// its place among the real ones.
		p.g.m.commitRepeats.Add(1)
	} else {
		cl, err := p.cc.start(kindAppendEntries, p.g.id, args, resp)
		if err != nil {
			return nil, err
		}
		f.call = cl
	}
	if n := len(args.Entries); n > 0 {
		p.sentLast.Store(args.Entries[n-1].Index)
	}
	select {
	case p.inflight <- f:
		return f, nil
	case <-p.stop:
		return nil, raft.ErrPipelineShutdown
	case <-p.g.shutdown:
		return nil, ErrClosed
	}
}

func (p *muxPipeline) Consumer() <-chan raft.AppendFuture { return p.consumer }

func (p *muxPipeline) Close() error {
	p.closeOnce.Do(func() { close(p.stop) })
	<-p.done
	return nil
}

// decode completes the futures in order and hands them to raft.
func (p *muxPipeline) decode() {
	defer close(p.done)
	for {
		select {
		case f := <-p.inflight:
			if f.call != nil {
				f.finish(p.cc.waitOr(f.call, p.g.m.cfg.RPCTimeout, p.g.shutdown))
				p.caughtUp(f)
				p.acknowledged(f)
				p.g.noteMatch(p.target, f.req, f.resp, f.err)
			} else {
				f.finish(nil)
			}
			select {
			case p.consumer <- f:
			case <-p.stop:
				return
			}
		case <-p.stop:
			return
		}
	}
}

// appendFuture is one pipelined AppendEntries.
type appendFuture struct {
	start time.Time
	req   *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	call  *call         // nil when the pipeline answered it itself
	err   error         // set before done is closed
	done  chan struct{} // closed by finish
}

func (f *appendFuture) finish(err error) {
	f.err = err
	close(f.done)
}

func (f *appendFuture) Error() error {
	<-f.done
	return f.err
}

func (f *appendFuture) Start() time.Time                      { return f.start }
func (f *appendFuture) Request() *raft.AppendEntriesRequest   { return f.req }
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// admitter is the plaintext admission check of a connection from remote:
// AdmitFrom, else Admit; nil admits every peer.
func (m *Mux) admitter(remote net.Addr) func(string) error {
	if m.cfg.AdmitFrom != nil {
		return func(id string) error { return m.cfg.AdmitFrom(id, remote) }
	}
	return m.cfg.Admit
}
