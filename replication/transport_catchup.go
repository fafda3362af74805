package replication

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Catching a follower up (doc.go, "Raft timing"). hashicorp/raft's
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
// barrier so that raft sends the rest now (transport_catchup.go). Call it
// once r runs; without it pipelines behave as raft alone.
func (g *GroupTransport) SetCatchUp(r *raft.Raft) {
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
func (g *GroupTransport) Poke() {
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
