package transport

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Elections under load (replication/doc.go, "Staying up under load"). hashicorp/raft
// starts a pre-vote round whenever a follower's heartbeat timer fires
// and repeats it every election timeout (2-4 s for partition groups)
// while it fails; nothing limits how many groups of a broker do so at
// once, and every round costs its peers a pass through the group's raft
// loop. A burst that delays heartbeats makes hundreds of groups campaign
// together, and their votes, terms and leader reports are more work on
// the cores the heartbeats wait for. The Mux gates pre-vote rounds
// before any byte is sent:
//
//   - backoff per group: after k rounds in a row that no peer granted,
//     the next round waits preVoteBackoff(k) (1, 2, 4, then 8 s at most,
//     +-50% jitter) from the start of the last; a heartbeat from a leader
//     of the group, or a granted pre-vote, resets it;
//   - a broker-wide budget: at most maxPreVoteRounds rounds in flight.
//
// A round the gate holds back is answered "not granted" at the
// candidate's own term, so raft counts it as refused and waits its
// election timeout before the next (no error, no log line, no step
// down). The gate only ever delays an election; it cannot make two
// leaders (it refuses, it never grants). The metadata group is not gated:
// it is one group, and the cluster's progress hangs on it.

const (
	// maxPreVoteRounds bounds this broker's pre-vote rounds in flight.
	maxPreVoteRounds = 128
	// preVoteRoundSpan: raft asks every peer at once, so the calls of
	// one round start within this of each other.
	preVoteRoundSpan = 100 * time.Millisecond
	// voteRPCTimeout bounds a vote or pre-vote RPC: an answer much later
	// than the candidate's election timeout (2-4 s) counts for nothing,
	// and waiting longer only piles up goroutines. It exceeds
	// unknownGroupWait, so a peer's refusal for a group it never opened
	// still arrives.
	voteRPCTimeout = unknownGroupWait + time.Second
)

// preVoteBackoff is the least time from the start of a group's round to
// its next after k rounds in a row were refused.
func preVoteBackoff(k int) time.Duration {
	if k <= 0 {
		return 0
	}
	d := min(time.Second<<min(k-1, 3), 8*time.Second)
	return d/2 + rand.N(d)
}

// electionGate is a group's pre-vote state (protected by mu).
type electionGate struct {
	mu         sync.Mutex
	roundStart time.Time // start of the last round
	admitted   bool      // the last round was let through
	granted    bool      // a peer granted the last round
	pending    int       // the last round's RPCs still in flight
	refused    int       // rounds in a row no peer granted
	next       time.Time // no new round before this
	// heardLeader is set by a leader's heartbeat: the group has a leader
	// again, so its next campaign starts without backoff.
	heardLeader bool
}

// admitPreVote reports whether a pre-vote RPC may be sent now, and
// counts a new round.
func (g *Group) admitPreVote() bool {
	if g.id == MetadataGroup {
		g.m.metaCounts.preVotes.Add(1)
		return true
	}
	e := &g.election
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.roundStart.IsZero() && now.Sub(e.roundStart) < preVoteRoundSpan {
		if e.admitted {
			e.pending++
		}
		return e.admitted // a call of the same round
	}
	// A new round: judge the last one.
	if e.heardLeader {
		e.refused, e.heardLeader = 0, false
	} else if !e.roundStart.IsZero() && e.admitted && !e.granted {
		e.refused++
	}
	e.roundStart, e.granted, e.admitted = now, false, false
	if now.Before(e.next) {
		g.m.preVotesDeferred.Add(1)
		return false
	}
	if g.m.preVoteRounds.Add(1) > maxPreVoteRounds {
		g.m.preVoteRounds.Add(-1)
		g.m.preVotesDeferred.Add(1)
		return false
	}
	g.m.partCounts.preVotes.Add(1)
	e.admitted, e.pending = true, 1
	e.next = now.Add(preVoteBackoff(e.refused))
	return true
}

// endPreVote records the outcome of one admitted pre-vote RPC.
func (g *Group) endPreVote(granted bool) {
	if g.id == MetadataGroup {
		return
	}
	e := &g.election
	e.mu.Lock()
	defer e.mu.Unlock()
	if granted {
		e.granted, e.refused, e.next = true, 0, time.Time{}
	}
	if e.pending--; e.pending == 0 {
		g.m.preVoteRounds.Add(-1)
	}
}

// noteLeader records that a leader of the group heartbeats it.
func (g *Group) noteLeader() {
	e := &g.election
	e.mu.Lock()
	e.heardLeader = true
	e.mu.Unlock()
}

// refusePreVote answers a pre-vote the gate held back: not granted, at
// the candidate's own term (the request asks for its term + 1).
func refusePreVote(args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) {
	*resp = raft.RequestPreVoteResponse{RPCHeader: raft.RPCHeader{ProtocolVersion: args.ProtocolVersion}, Term: args.Term - 1}
}
