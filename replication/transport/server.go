package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// The accepting side: connections from peers (their preface checked),
// requests handed to their groups, answers written back, snapshots
// streamed in on connections of their own.

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

// admitter is the plaintext admission check of a connection from remote:
// AdmitFrom, else Admit; nil admits every peer.
func (m *Mux) admitter(remote net.Addr) func(string) error {
	if m.cfg.AdmitFrom != nil {
		return func(id string) error { return m.cfg.AdmitFrom(id, remote) }
	}
	return m.cfg.Admit
}
