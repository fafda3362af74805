package transport

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Coalesced heartbeats (replication/doc.go, "Raft timing"). hashicorp/raft runs, in
// every group it leads, one heartbeat goroutine per follower that sends
// an AppendEntries with no entries every HeartbeatTimeout/10 to /5 and
// waits for the answer. A broker leading hundreds of groups would send
// thousands of such RPCs a second, each a frame to encode, write, read,
// decode and match, and as many on the way back. The Mux instead holds
// the heartbeats to one peer for up to heartbeatCoalesce and sends them
// as one kindHeartbeats frame; the peer hands each to its group's
// heartbeat handler (raft's processHeartbeat, which answers at once) and
// sends every answer back in one frame. A heartbeat is still exactly one
// request and one answer, delayed by at most heartbeatCoalesce, and a
// leader that stops heartbeating (it stepped down) is never vouched for
// by the Mux. The caller waits for the round that carries its heartbeat
// unless its group is steady (the same term, the peer's last answer a
// success from a round sent within RepeatLiveness, the peer heard from
// within it): then it gets that answer at once, and the round's answer
// replaces it; parking hundreds of raft goroutines per round and waking
// them again was a third of an idle broker's goroutine wakes.
//
//	request body:  count uvarint, then per heartbeat:
//	               group bytes, term uvarint, header (version, id, addr), leader bytes
//	response body: count uvarint (= the request's), then per heartbeat:
//	               0, term, lastLog uvarint, success, noRetryBackoff bool
//	            or 1, error bytes

const (
	// heartbeatCoalesce is how long a heartbeat waits for others to the
	// same peer: well below raft's heartbeat interval (400 ms and more for
	// partition groups, 100 ms for the metadata group, whose lease is
	// 1 s).
	heartbeatCoalesce = 50 * time.Millisecond
	// minBeatBytes is the least one encoded heartbeat takes; it bounds
	// the count a frame can claim.
	minBeatBytes = 6
)

// beat is one group's heartbeat in a round.
type beat struct {
	group string
	req   *raft.AppendEntriesRequest
}

// beatResult is the peer's answer to one beat.
type beatResult struct {
	resp raft.AppendEntriesResponse
	err  error
}

// beatRound is the heartbeats to one peer sent in one frame.
type beatRound struct {
	beats   []beat
	results []beatResult  // set before done is closed
	done    chan struct{} // closed when results are in
}

// beater gathers the heartbeats to one peer.
type beater struct {
	m    *Mux
	addr raft.ServerAddress
	mu   sync.Mutex
	next *beatRound // protected by mu; the round being gathered
	// answered holds each group's last successful answer (protected by
	// mu), for beat to answer a steady group's heartbeat at once.
	answered map[string]beatAnswer
}

// beatAnswer is a group's last successful heartbeat answer from the peer.
type beatAnswer struct {
	term uint64
	at   time.Time // when the round that carried it was sent
	resp raft.AppendEntriesResponse
}

func (m *Mux) beaterFor(addr raft.ServerAddress) *beater {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.beaters[addr]
	if b == nil {
		b = &beater{m: m, addr: addr, answered: map[string]beatAnswer{}}
		m.beaters[addr] = b
	}
	return b
}

// heartbeat sends g's heartbeat args to target in the next round and
// waits for its answer.
func (g *Group) heartbeat(target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if g.closed() {
		return ErrClosed
	}
	return g.beat(target, args, resp)
}

// beat sends one heartbeat in the next round to target.
func (g *Group) beat(target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	b := g.m.beaterFor(target)
	b.mu.Lock()
	r := b.next
	if r == nil {
		r = &beatRound{done: make(chan struct{})}
		b.next = r
		time.AfterFunc(heartbeatCoalesce, b.send)
	}
	i := len(r.beats)
	// A copy: the caller may not wait for the round (below).
	req := *args
	r.beats = append(r.beats, beat{group: g.id, req: &req})
	last, ok := b.answered[g.id]
	b.mu.Unlock()
	// A steady group is answered at once with the peer's last answer,
	// while its heartbeat still travels in the round (whose answer
	// replaces it): the same term, a success, from a round sent within
	// RepeatLiveness, and the peer heard from within it -- the contact this
	// vouches for is at most that old, inside the lease (as an idle
	// commit-index repeat, commit.go). A refusal or an error
	// drops the answer, and the next heartbeat waits for its round.
	if ok && last.term == args.Term && time.Since(last.at) < RepeatLiveness &&
		g.m.PeerHeardWithin(target, RepeatLiveness) {
		g.m.beatsVouched.Add(1)
		*resp = last.resp
		return nil
	}
	// No timer of its own: the round always ends, within heartbeatCoalesce
	// plus the RPC timeout (send waits for the answer at most that long),
	// and a timer per heartbeat was a measurable part of an idle broker.
	select {
	case <-r.done:
		res := r.results[i]
		if res.err != nil {
			return res.err
		}
		*resp = res.resp
		return nil
	case <-g.shutdown:
		return ErrClosed
	}
}

// send sends the round gathered so far and hands out the answers.
func (b *beater) send() {
	b.mu.Lock()
	r := b.next
	b.next = nil
	b.mu.Unlock()
	if r == nil {
		return
	}
	r.results = make([]beatResult, len(r.beats))
	fail := func(err error) {
		for i := range r.results {
			r.results[i].err = err
		}
	}
	finished := false
	defer func() {
		if rec := recover(); rec != nil {
			b.m.panicked("heartbeat round", rec)
			if !finished {
				fail(fmt.Errorf("replication: heartbeat round panicked: %v", rec))
				close(r.done)
			}
		}
	}()
	var out beatAnswers
	sent := time.Now()
	b.m.beatsSent.Add(uint64(len(r.beats)))
	b.m.beatFrames.Add(1)
	cc, err := b.m.conn(b.addr, "", true)
	if err == nil {
		var cl *call
		cl, err = cc.start(kindHeartbeats, "", &beatRequests{beats: r.beats}, &out)
		if err == nil {
			err = cc.wait(cl, b.m.cfg.RPCTimeout)
		}
	}
	if err == nil {
		b.m.beatRTT.Observe(time.Since(sent))
	}
	switch {
	case err != nil:
		fail(err)
	case len(out.results) != len(r.beats):
		fail(fmt.Errorf("%w: %d heartbeat answers to %d heartbeats", ErrCodec, len(out.results), len(r.beats)))
	default:
		copy(r.results, out.results)
	}
	b.mu.Lock()
	for i, bt := range r.beats {
		res := &r.results[i]
		if res.err == nil && res.resp.Success && res.resp.Term == bt.req.Term {
			b.answered[bt.group] = beatAnswer{term: bt.req.Term, at: sent, resp: res.resp}
		} else {
			delete(b.answered, bt.group)
		}
	}
	b.mu.Unlock()
	finished = true
	close(r.done)
}

// beatRequests and beatAnswers are the bodies of a kindHeartbeats request
// and its response (encodeRPC, decodeRPC).
type beatRequests struct{ beats []beat }
type beatAnswers struct{ results []beatResult }

func encodeBeats(e *enc, m *beatRequests) {
	e.u64(uint64(len(m.beats)))
	for _, b := range m.beats {
		e.u64(uint64(len(b.group)))
		e.b = append(e.b, b.group...)
		e.u64(b.req.Term)
		e.header(b.req.RPCHeader)
		e.bytes(b.req.Leader)
	}
}

func decodeBeats(d *dec, m *beatRequests) {
	n := d.u64()
	if d.err == nil && n > uint64(len(d.b)/minBeatBytes) {
		d.fail("heartbeat count runs past the frame")
		return
	}
	m.beats = make([]beat, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		group := d.bytes()
		if len(group) > maxGroupIDBytes {
			d.fail("group id too long")
			return
		}
		req := &raft.AppendEntriesRequest{Term: d.u64()}
		req.RPCHeader = d.header()
		req.Leader = d.bytes()
		m.beats = append(m.beats, beat{group: string(group), req: req})
	}
}

func encodeBeatAnswers(e *enc, m *beatAnswers) {
	e.u64(uint64(len(m.results)))
	for _, r := range m.results {
		if r.err != nil {
			e.b = append(e.b, 1)
			msg := r.err.Error()
			if re, ok := r.err.(*remoteBeatError); ok {
				msg = re.msg
			}
			e.bytes([]byte(msg))
			continue
		}
		e.b = append(e.b, 0)
		e.header(r.resp.RPCHeader)
		e.u64(r.resp.Term)
		e.u64(r.resp.LastLog)
		e.bool(r.resp.Success)
		e.bool(r.resp.NoRetryBackoff)
	}
}

func decodeBeatAnswers(d *dec, m *beatAnswers) {
	n := d.u64()
	if d.err == nil && n > uint64(len(d.b)/2) {
		d.fail("heartbeat answer count runs past the frame")
		return
	}
	m.results = make([]beatResult, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		var r beatResult
		switch {
		case len(d.b) == 0:
			d.fail("heartbeat answer cut short")
		case d.b[0] == 1:
			d.b = d.b[1:]
			r.err = &remoteBeatError{msg: string(d.bytes())}
		case d.b[0] == 0:
			d.b = d.b[1:]
			r.resp.RPCHeader = d.header()
			r.resp.Term = d.u64()
			r.resp.LastLog = d.u64()
			r.resp.Success = d.bool()
			r.resp.NoRetryBackoff = d.bool()
		default:
			d.fail("bad heartbeat answer tag")
		}
		m.results = append(m.results, r)
	}
}

// remoteBeatError is a peer's refusal of one heartbeat (ErrRemote).
type remoteBeatError struct{ msg string }

func (e *remoteBeatError) Error() string { return ErrRemote.Error() + ": " + e.msg }
func (e *remoteBeatError) Unwrap() error { return ErrRemote }

// handleHeartbeats answers a kindHeartbeats frame. Groups with a
// heartbeat handler (raft sets one) are answered on this goroutine, as
// the single-heartbeat fast path does, unless the heartbeat carries a
// term above any this group was sent: raft then persists the new term
// (a file replaced and fsync'd), and a burst of leader changes would
// queue every other group's heartbeats on this lane behind those disk
// writes. Such heartbeats, and those of groups without a handler (through
// their raft loop), are answered on a goroutine of their own, and the
// frame's answer waits for them.
func (m *Mux) handleHeartbeats(f frame, w *frameWriter, peer string) error {
	var req beatRequests
	if err := decodeRPC(f.body, &req); err != nil {
		return err
	}
	if err := checkRequest(&req, peer); err != nil {
		return err
	}
	out := &beatAnswers{results: make([]beatResult, len(req.beats))}
	groups := make([]*Group, len(req.beats))
	m.mu.Lock()
	for i, b := range req.beats {
		groups[i] = m.groups[b.group]
	}
	m.mu.Unlock()
	respCh := make(chan raft.RPCResponse, 1)
	var slow []int
	for i, b := range req.beats {
		g := groups[i]
		if g == nil {
			out.results[i].err = fmt.Errorf("unknown raft group %s", b.group)
			continue
		}
		fn := g.heartbeatFn()
		if fn == nil || b.req.Term > g.beatTerm.Load() {
			slow = append(slow, i)
			continue
		}
		fn(raft.RPC{Command: b.req, RespChan: respCh})
		out.results[i] = takeBeatAnswer(respCh)
		g.beaten(b.req.Term, out.results[i])
	}
	reqID := f.reqID
	if len(slow) == 0 {
		return w.writeMsg(kindResponse, reqID, nil, out)
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer m.recoverConn("heartbeats answered off the reader", nil)
		respCh := make(chan raft.RPCResponse, 1)
		for _, i := range slow {
			g, b := groups[i], req.beats[i]
			if fn := g.heartbeatFn(); fn != nil {
				fn(raft.RPC{Command: b.req, RespChan: respCh})
				out.results[i] = takeBeatAnswer(respCh)
			} else {
				out.results[i] = g.viaLoop(b.req, m.cfg.RPCTimeout)
			}
			g.beaten(b.req.Term, out.results[i])
		}
		w.writeMsg(kindResponse, reqID, nil, out)
	}()
	return nil
}

// beaten records a heartbeat g answered: its term, and, when it was
// taken, that the group has a leader (its elections start afresh).
func (g *Group) beaten(term uint64, r beatResult) {
	countTerm(&g.beatTerm, term)
	now := time.Now().UnixNano()
	if last := g.lastBeat.Swap(now); last != 0 {
		g.m.beatGap.Observe(time.Duration(now - last))
	}
	if r.err == nil && r.resp.Success {
		g.noteLeader()
	}
}

// takeBeatAnswer reads the answer raft's heartbeat handler wrote; it
// writes none when the group is shutting down.
func takeBeatAnswer(ch chan raft.RPCResponse) beatResult {
	select {
	case r := <-ch:
		if r.Error != nil {
			return beatResult{err: r.Error}
		}
		resp, ok := r.Response.(*raft.AppendEntriesResponse)
		if !ok {
			return beatResult{err: fmt.Errorf("raft answered a heartbeat with %T", r.Response)}
		}
		return beatResult{resp: *resp}
	default:
		return beatResult{err: ErrClosed}
	}
}

// viaLoop hands one heartbeat to g's raft loop and waits for the answer.
func (g *Group) viaLoop(req *raft.AppendEntriesRequest, timeout time.Duration) beatResult {
	respCh := make(chan raft.RPCResponse, 1)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case g.consumeCh <- raft.RPC{Command: req, RespChan: respCh}:
	case <-g.shutdown:
		return beatResult{err: ErrClosed}
	case <-t.C:
		return beatResult{err: ErrRPCTimeout}
	}
	select {
	case r := <-respCh:
		if r.Error != nil {
			return beatResult{err: r.Error}
		}
		resp, _ := r.Response.(*raft.AppendEntriesResponse)
		if resp == nil {
			return beatResult{err: fmt.Errorf("raft answered a heartbeat with %T", r.Response)}
		}
		return beatResult{resp: *resp}
	case <-g.shutdown:
		return beatResult{err: ErrClosed}
	case <-t.C:
		return beatResult{err: ErrRPCTimeout}
	}
}
