package transport

import (
	"errors"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"
)

// A broker that joins a partition's group (a reassignment's target) opens
// it empty, and the leader fills its log. Until the log holds what the
// leader had when it added the broker, the broker's votes are not Raft's
// votes: hashicorp/raft grants any candidate the vote of a server with an
// empty configuration (it takes it for a cluster bootstrapping), and a
// server with a part of the log carries the configurations of that part.
// A broker that had been a voter of the group before (removed, its log
// deleted, added back: the fault harness's reassignments every few
// seconds do this) is named in those old configurations, so a candidate
// that also holds only an old part of the log -- another broker catching
// up, whose configuration is as old -- could win with the two of them:
// a leader without the committed tail, which then truncates every
// replica to its own log (docs/RELIABILITY.md, the seed-11 finding).
//
// So a joining broker neither grants nor asks for votes until its log
// reaches the leader's last index as of the first entries it was sent
// (at or past the configuration entry that added it): from there on its
// log is a voter's log like any other. The state survives restarts: the
// gate persists a value (through the function SetJoinGate is given; a
// broker keeps it in the group's stable store) that holds the index plus
// one while the broker is joining, 1 before any leader has been heard, 0
// after.

// errJoining refuses a vote request this broker would have sent while
// joining.
var errJoining = errors.New("replication: replica still joining the group: no votes until caught up")

// joinGate holds a joining replica's votes back until it has caught up.
type joinGate struct {
	mu      sync.Mutex
	pending bool   // protected by mu
	until   uint64 // protected by mu; 0 while no leader has been heard
	term    uint64 // protected by mu; the term of the leader that set until

	last    func() uint64            // raft's last log index
	persist func(value uint64) error // stores the gate's new value
	logger  *slog.Logger
	done    func() // called once, when the gate opens
}

// newJoinGate reads the persisted state: value is the persisted value
// (0: not joining).
func newJoinGate(value uint64) *joinGate {
	if value == 0 {
		return nil
	}
	return &joinGate{pending: true, until: value - 1}
}

// refuses reports whether a vote request must be refused (the gate is
// closed); it opens the gate first if the log has caught up.
func (j *joinGate) refuses() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.checkLocked()
	return j.pending
}

// sawLeader notes that a leader of term sent entries up to index (the
// first append of each newer term, or a snapshot install).
func (j *joinGate) sawLeader(term, index uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.pending {
		return
	}
	if j.until == 0 || term > j.term {
		if index > j.until {
			j.until = index
			if err := j.persist(index + 1); err != nil {
				j.logger.Warn("join gate: could not persist the catch-up index", "index", index, "err", err)
			}
		}
		j.term = max(j.term, term)
	}
	j.checkLocked()
}

func (j *joinGate) checkLocked() {
	if !j.pending || j.until == 0 || j.last() < j.until {
		return
	}
	if err := j.persist(0); err != nil {
		j.logger.Warn("join gate: could not persist the end of the catch-up", "err", err)
		return // still closed: tried again at the next request
	}
	j.pending = false
	j.logger.Info("joining replica caught up; it votes from now on", "index", j.until)
	if j.done != nil {
		j.done()
	}
}

// Joining reports whether the join gate holds this replica's votes back.
func (g *Group) Joining() bool { return g.joinGateFor() != nil }

// joinGateFor returns g's gate, nil when the replica is not joining.
func (g *Group) joinGateFor() *joinGate { return g.join.Load() }

// SetJoinGate holds this replica's votes back until its log reaches what
// the leader had (join_gate.go); value is the gate's persisted value (0:
// not joining) and persist stores a new one. last is raft's last index (0
// until raft runs: set before raft starts, the gate holds from the first
// request).
func (g *Group) SetJoinGate(last func() uint64, value uint64, persist func(value uint64) error, logger *slog.Logger) {
	j := newJoinGate(value)
	if j == nil {
		return
	}
	j.last = last
	j.persist = persist
	j.logger = logger
	j.done = func() { g.join.CompareAndSwap(j, nil) }
	g.join.Store(j)
}

// joinFilter answers a vote request for a joining replica (refused) and
// notes a leader's appends; handled reports whether the request was
// answered here.
func (g *Group) joinFilter(cmd any) (resp any, handled bool) {
	j := g.joinGateFor()
	if j == nil {
		return nil, false
	}
	switch c := cmd.(type) {
	case *raft.AppendEntriesRequest:
		if !isHeartbeat(c) {
			j.sawLeader(c.Term, max(c.PrevLogEntry+uint64(len(c.Entries)), c.LeaderCommitIndex))
		}
	case *raft.RequestVoteRequest:
		if j.refuses() {
			g.m.joinVotesRefused.Add(1)
			return &raft.RequestVoteResponse{RPCHeader: raft.RPCHeader{ProtocolVersion: c.ProtocolVersion}, Term: c.Term}, true
		}
	case *raft.RequestPreVoteRequest:
		if j.refuses() {
			g.m.joinVotesRefused.Add(1)
			var resp raft.RequestPreVoteResponse
			refusePreVote(c, &resp)
			return &resp, true
		}
	}
	return nil, false
}

// joinCampaign refuses this replica's own vote requests while it joins.
func (g *Group) joinCampaign() error {
	if j := g.joinGateFor(); j != nil && j.refuses() {
		return errJoining
	}
	return nil
}

// followerMatch is how far a follower's log matched the leader's at its
// last successful append, as this leader's transport saw it: the
// reassignment promotes a replica added as a non-voter once it has
// caught up (replication's partition_reassign.go).
type followerMatch struct {
	mu sync.Mutex
	m  map[raft.ServerAddress]uint64 // protected by mu
}

// noteMatch records a successful append's end for target.
func (g *Group) noteMatch(target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, err error) {
	if err != nil || resp == nil || !resp.Success || isHeartbeat(req) {
		return
	}
	end := req.PrevLogEntry + uint64(len(req.Entries))
	fm := &g.matches
	fm.mu.Lock()
	if fm.m == nil {
		fm.m = map[raft.ServerAddress]uint64{}
	}
	fm.m[target] = end
	fm.mu.Unlock()
}

// Matched returns target's last matched index (0: none seen here).
func (g *Group) Matched(target raft.ServerAddress) uint64 {
	fm := &g.matches
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return fm.m[target]
}
