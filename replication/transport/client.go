package transport

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// The dialing side: per peer, a pool of connections (lanes), each with
// the calls outstanding on it.

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
