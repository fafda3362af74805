package transport

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Catching a follower up (replication/doc.go, "Raft timing"). hashicorp/raft's
// pipeline sends a follower at most MaxAppendEntries entries per trigger,
// and a trigger is a new entry on the leader -- or, when none comes, its
// CommitTimeout (6-12 s for partition groups; 2.5-5 s when this was written). Triggers coalesce, so a
// burst of entries outruns the sends and what is left behind waits: a
// burst of 2,560 entries took 38-83 s to commit in the harness
// (TestHarnessBurstReachesFollowersPromptly), a follower back from an
// outage took minutes to catch up once producers paused, and acks=all
// produce stalled behind it. raft offers no way to trigger a send, but a
// barrier is a new entry: the pipeline asks for one whenever a follower
// acknowledges the last entry sent to it, the leader's log goes further
// and raft has sent nothing more 10 ms later (under load it sends again at
// once, and no barrier is needed), one barrier being queued at a time per
// group, so a backlog drains at the pace of round trips.

const (
	// catchUpBarrierTimeout bounds one catch-up barrier's wait to be
	// queued.
	catchUpBarrierTimeout = 5 * time.Second
	// catchUpLook is how long a pipeline waits for raft to send again on
	// its own before it appends a barrier: far above the leader loop's
	// reaction to a new entry, far below CommitTimeout.
	catchUpLook = 10 * time.Millisecond
)

// catchUp is a group's way to make its raft send again (SetCatchUp).
type catchUp struct {
	last func() uint64 // the leader's last log index
	poke func()        // start a barrier unless one is under way
}

// SetCatchUp gives the group's pipelines r: when a follower acknowledges
// the last entry sent to it and r's log goes further, they append a
// barrier so that raft sends the rest now (catchup.go). It also
// attaches r (Attach). Call it once r runs; without it pipelines behave as
// raft alone.
func (g *Group) SetCatchUp(r *raft.Raft) {
	g.Attach(r)
	var busy atomic.Bool
	c := &catchUp{last: r.LastIndex, poke: func() {
		if !busy.CompareAndSwap(false, true) {
			return
		}
		g.m.catchUpPokes.Add(1)
		go func() {
			// Barrier returns once the entry is queued for the leader's
			// loop; its commit is not waited for (it commits behind the
			// very backlog it is here to move). Not leader, shut down:
			// nothing to do.
			r.Barrier(catchUpBarrierTimeout)
			busy.Store(false)
		}()
	}}
	g.catchUp.Store(c)
}

// Poke makes the group's raft send to its followers now, when it leads
// (a barrier entry, as a catch-up): for a follower raft lost and that is
// back, which raft would otherwise retry only on the next entry or after
// CommitTimeout. No-op before SetCatchUp.
func (g *Group) Poke() {
	if c := g.catchUp.Load(); c != nil {
		c.poke()
	}
}

// caughtUp is called by a pipeline, in order, for each successful answer:
// when it acknowledges the last entry sent and the log goes further, the
// rest is asked for.
func (p *muxPipeline) caughtUp(f *appendFuture) {
	n := len(f.req.Entries)
	if n == 0 || f.err != nil || !f.resp.Success {
		return
	}
	c := p.g.catchUp.Load()
	if c == nil {
		return
	}
	last := f.req.Entries[n-1].Index
	p.ackLast.Store(last)
	if last != p.sentLast.Load() || c.last() <= last {
		return // more is on its way already, or nothing more to send
	}
	// Under load raft sends again within a millisecond (each new entry
	// triggers it): look again a little later, and append a barrier only
	// if everything sent is acknowledged and the log still goes further.
	// One look pending per pipeline; it reads the state when it runs.
	if !p.lookArmed.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(catchUpLook, func() {
		p.lookArmed.Store(false)
		select {
		case <-p.stop:
			return
		default:
		}
		sent := p.sentLast.Load()
		if p.ackLast.Load() == sent && c.last() > sent {
			c.poke()
		}
	})
}

// Waiting for a follower that is down (doc.go, "Catch-up"). raft counts
// each failed AppendEntries to a follower and, before the next, sleeps
// backoff(10 ms, failures, 12): doubling from 10 ms to 10.24 s at the
// twelfth failure, reset only by a success (replicateTo, hashicorp/raft
// replication.go); the group's heartbeats, which resume at once, do not
// cut that sleep short. A dial to a broker that is down fails at once
// (connection refused), so a leader reached the cap about 20 s into an
// outage, and a broker that came back waited up to 10 s more for what it
// missed. Failing more slowly would only postpone the cap: it counts
// failures, not their rate. So an AppendEntries whose dial fails waits
// for the peer to be reachable again and is sent then: raft sees one
// slow call instead of a string of failures, and the follower gets its
// entries within peerRedialEvery of its return.
//
//   - One loop per peer that is down and has waiters (redial) dials the
//     peer's control lane every peerRedialEvery; any successful dial to
//     the peer (a heartbeat round, a vote) wakes the waiters too. No
//     goroutine or timer per group; nothing at all while every peer is
//     up.
//   - A wait ends, and the call fails as it did before, when the group's
//     raft changes state or shuts down (an observer's filter sees it
//     synchronously: Attach), when the peer leaves the group's latest
//     configuration (the loop checks every peerCheckEvery: raft's main
//     loop stops a removed peer's replication by handing its goroutine a
//     value, and waits for it to take it), when the group or the Mux
//     closes, or after peerWaitMax. So a wait never holds raft.Shutdown
//     (which waits for the replication goroutines) or a configuration
//     change for long, and a leader that lost its term does not send
//     late. A group without Attach never waits.
//   - Only AppendEntries that carry entries or a commit index wait:
//     heartbeats, votes and snapshots fail at once as before.

const (
	// peerRedialEvery is how often a peer that is down is dialed while
	// AppendEntries wait for it.
	peerRedialEvery = 200 * time.Millisecond
	// peerCheckEvery is how often the redial loop checks that the
	// waiting groups still have the peer in their configuration.
	peerCheckEvery = time.Second
	// peerWaitMax bounds one wait. Each one that ends so is one failure
	// to raft: its backoff stays at tens of milliseconds through half an
	// hour of outage and reaches its 10 s cap after about an hour.
	peerWaitMax = 5 * time.Minute
)

// peerReach is whether a peer's last dial failed, and who waits for it.
type peerReach struct {
	mu        sync.Mutex
	back      chan struct{}            // non-nil while the last dial failed; closed by the next that succeeds
	waiters   map[*peerWaiter]struct{} // AppendEntries waiting on back
	redialing bool                     // a redial loop runs
}

// peerWaiter is one AppendEntries waiting for its peer.
type peerWaiter struct {
	w    *raftWatch
	gone chan struct{} // closed (by the redial loop, under peerReach.mu) when the peer left w's configuration
}

// failed records a failed dial.
func (r *peerReach) failed() {
	r.mu.Lock()
	if r.back == nil {
		r.back = make(chan struct{})
	}
	r.mu.Unlock()
}

// reached records a successful dial and wakes the waiters.
func (r *peerReach) reached() {
	r.mu.Lock()
	if r.back != nil {
		close(r.back)
		r.back = nil
	}
	r.mu.Unlock()
}

// wait registers pw: back is nil when the peer was reached since (no
// wait); redial reports that the caller must start the redial loop. A
// waiter with a non-nil back calls done.
func (r *peerReach) wait(pw *peerWaiter) (back <-chan struct{}, redial bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.back == nil {
		return nil, false
	}
	if r.waiters == nil {
		r.waiters = map[*peerWaiter]struct{}{}
	}
	r.waiters[pw] = struct{}{}
	redial = !r.redialing
	r.redialing = true
	return r.back, redial
}

func (r *peerReach) done(pw *peerWaiter) {
	r.mu.Lock()
	delete(r.waiters, pw)
	r.mu.Unlock()
}

// keepRedialing reports whether the redial loop goes on: the peer still
// unreached and someone waiting. When not, the loop ends (under mu, so a
// new waiter starts another).
func (r *peerReach) keepRedialing() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.back == nil || len(r.waiters) == 0 {
		r.redialing = false
		return false
	}
	return true
}

// releaseRemoved ends the waits of groups whose latest configuration no
// longer has addr.
func (r *peerReach) releaseRemoved(addr raft.ServerAddress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pw := range r.waiters {
		if !hasServer(pw.w.r.GetConfiguration().Configuration(), addr) {
			close(pw.gone)
			delete(r.waiters, pw)
		}
	}
}

func hasServer(c raft.Configuration, addr raft.ServerAddress) bool {
	for _, s := range c.Servers {
		if s.Address == addr {
			return true
		}
	}
	return false
}

// redial dials p's control lane every peerRedialEvery until it succeeds
// (conn marks the peer reached), nobody waits any more or the Mux closes;
// every peerCheckEvery it ends the waits of groups that dropped p.
func (m *Mux) redial(p *muxPeer) {
	defer m.wg.Done()
	t := time.NewTicker(peerRedialEvery)
	defer t.Stop()
	checked := time.Now()
	for {
		select {
		case <-m.shutdown:
			return
		case <-t.C:
		}
		if time.Since(checked) >= peerCheckEvery {
			// GetConfiguration reads an atomic: it never waits for raft's
			// main loop, which may be the one waiting on a waiter here.
			p.reach.releaseRemoved(p.addr)
			checked = time.Now()
		}
		if !p.reach.keepRedialing() {
			return
		}
		m.conn(p.addr, "", true)
	}
}

// raftWatch follows a group's raft for the transport: released is
// closed at each change of its state (and a new one made).
type raftWatch struct {
	r  *raft.Raft
	mu sync.Mutex
	ch chan struct{}
}

func (w *raftWatch) released() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}

func (w *raftWatch) release() {
	w.mu.Lock()
	close(w.ch)
	w.ch = make(chan struct{})
	w.mu.Unlock()
}

// Attach lets the transport follow r, the group's raft, so that an
// AppendEntries to a follower that is down waits for it to come back
// instead of failing at once (see above). Call it once, after
// raft.NewRaft; SetCatchUp does. The observer only filters: it sends
// nothing and needs no goroutine.
func (g *Group) Attach(r *raft.Raft) {
	w := &raftWatch{r: r, ch: make(chan struct{})}
	r.RegisterObserver(raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		if _, ok := o.Data.(raft.RaftState); ok {
			w.release()
		}
		return false
	}))
	g.watch.Store(w)
}

// waitPeer waits, after a failed dial, until target is reachable again;
// false when the wait ended otherwise (see above) and the call fails.
func (g *Group) waitPeer(target raft.ServerAddress) bool {
	w := g.watch.Load()
	if w == nil {
		return false
	}
	released := w.released()
	if w.r.State() != raft.Leader {
		return false
	}
	p, err := g.m.peer(target)
	if err != nil {
		return false
	}
	pw := &peerWaiter{w: w, gone: make(chan struct{})}
	back, redial := p.reach.wait(pw)
	if back == nil {
		return true
	}
	defer p.reach.done(pw)
	if redial {
		g.m.mu.Lock()
		closed := g.m.closed
		if !closed {
			g.m.wg.Add(1)
		}
		g.m.mu.Unlock()
		if closed {
			return false
		}
		go g.m.redial(p)
	}
	t := time.NewTimer(peerWaitMax)
	defer t.Stop()
	select {
	case <-back:
		return true
	case <-released:
	case <-pw.gone:
	case <-g.shutdown:
	case <-g.m.shutdown:
	case <-t.C:
	}
	return false
}
