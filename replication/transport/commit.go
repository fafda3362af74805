package transport

import (
	"time"

	"github.com/hashicorp/raft"
)

// Idle commit-index updates (replication/doc.go, "Raft timing"). hashicorp/raft's
// pipeline sends each follower an AppendEntries every CommitTimeout to
// twice it even when there is nothing to say: no entries, the same
// previous entry and the same commit index as the last one the follower
// acknowledged. At 1,000 idle partitions on RF 3 those were most of a
// broker's frames (about 440 writes a second, each a round trip through
// the follower's raft loop). The pipeline answers such a repeat itself,
// with the follower's last answer, in order with the real ones:
//
//   - only a request with no entries whose term, previous entry (index
//     and term) and commit index equal those of the last request the
//     follower acknowledged on this pipeline (a new pipeline, after any
//     error, starts with nothing known);
//   - the follower already holds that state, so the request would change
//     nothing there; raft on the leader takes from the answer only the
//     contact time (the lease) and the verify-leader notification, so a
//     repeat is answered here only while frames from the follower's
//     broker keep arriving (one within RepeatLiveness; heartbeat answers
//     come every few hundred milliseconds): the contact it vouches for is
//     at most that old, inside the lease;
//   - at least every commitRefresh a repeat is sent anyway.
//
// A follower that restarted lost its connection, so its pipeline, so what
// was known about it.

const (
	// commitRefresh is the longest a pipeline answers repeats itself.
	commitRefresh = 30 * time.Second
	// RepeatLiveness is how recently a frame from the follower's broker
	// must have arrived for a repeat (or a steady heartbeat,
	// heartbeats.go) to be answered here: above the interval
	// of frames from a peer leading or following many groups, well inside
	// the 2 s lease (replication/raftconf/config.go).
	RepeatLiveness = time.Second
)

// followerState is what a follower acknowledged on one pipeline.
type followerState struct {
	term, last, lastTerm, commit uint64
	resp                         raft.AppendEntriesResponse
	sent                         time.Time // when the acknowledged request was sent
}

// acknowledged records f's successful answer (decode, in order).
func (p *muxPipeline) acknowledged(f *appendFuture) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.err != nil || !f.resp.Success {
		p.knownOK = false
		return
	}
	// A value, not a pointer: this runs for every answer on the produce
	// path and allocates nothing.
	req := f.req
	p.known = followerState{term: req.Term, last: req.PrevLogEntry, lastTerm: req.PrevLogTerm, commit: req.LeaderCommitIndex, resp: *f.resp, sent: f.start}
	if n := len(req.Entries); n > 0 {
		p.known.last, p.known.lastTerm = req.Entries[n-1].Index, req.Entries[n-1].Term
	}
	p.knownOK = true
}

// repeat reports whether args would tell the follower nothing new, and
// if so fills resp with its last answer.
func (p *muxPipeline) repeat(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) bool {
	if len(args.Entries) != 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := &p.known
	if !p.knownOK || args.Term != k.term || args.PrevLogEntry != k.last || args.PrevLogTerm != k.lastTerm ||
		args.LeaderCommitIndex != k.commit || time.Since(k.sent) > commitRefresh {
		return false
	}
	if !p.g.m.PeerHeardWithin(p.target, RepeatLiveness) {
		return false
	}
	*resp = k.resp
	return true
}
