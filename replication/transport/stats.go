package transport

import (
	"time"

	"github.com/hashicorp/raft"
)

// What a Mux tells its broker about the peers and the traffic it carries.

// PeerHeardWithin reports whether a frame from target arrived in the last d.
func (m *Mux) PeerHeardWithin(target raft.ServerAddress, d time.Duration) bool {
	m.mu.Lock()
	p := m.peers[target]
	m.mu.Unlock()
	return p != nil && time.Since(time.Unix(0, p.heard.Load())) < d
}

// PeerHeardAt is when the Mux last received a frame from the broker at
// target; zero when never.
func (m *Mux) PeerHeardAt(target raft.ServerAddress) time.Time {
	m.mu.Lock()
	p := m.peers[target]
	m.mu.Unlock()
	if p == nil {
		return time.Time{}
	}
	if ns := p.heard.Load(); ns > 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Stats are the Mux's counters since it started; a broker exports them as
// metrics (replication's metrics.go).
type Stats struct {
	// CatchUpPokes counts the barriers pipelines asked for to send a
	// follower the rest of a backlog (catchup.go).
	CatchUpPokes uint64
	// BeatsSent and BeatFrames count the heartbeats sent and the frames
	// that carried them; BeatsVouched the heartbeats answered at once with
	// the peer's last answer (heartbeats.go).
	BeatsSent, BeatFrames, BeatsVouched uint64
	// CommitRepeats counts idle commit-index updates a pipeline answered
	// itself (commit.go).
	CommitRepeats uint64
	// PreVotesDeferred counts the pre-vote rounds the gate held back
	// (elections.go).
	PreVotesDeferred uint64
	// Metadata and Partitions count the elections, pre-vote rounds and
	// leaderships won of the metadata group and of the partition groups.
	Metadata, Partitions RaftCounts
}

// RaftCounts counts raft events of one kind of group.
type RaftCounts struct {
	Elections, PreVotes, LeaderChanges uint64
}

// Stats returns the counters.
func (m *Mux) Stats() Stats {
	return Stats{
		CatchUpPokes:     m.catchUpPokes.Load(),
		BeatsSent:        m.beatsSent.Load(),
		BeatFrames:       m.beatFrames.Load(),
		BeatsVouched:     m.beatsVouched.Load(),
		CommitRepeats:    m.commitRepeats.Load(),
		PreVotesDeferred: m.preVotesDeferred.Load(),
		Metadata:         m.metaCounts.load(),
		Partitions:       m.partCounts.load(),
	}
}

func (c *raftCounters) load() RaftCounts {
	return RaftCounts{Elections: c.elections.Load(), PreVotes: c.preVotes.Load(), LeaderChanges: c.leaderChanges.Load()}
}

// BeatRTT is a heartbeat round's time from send to answer (leader side).
func (m *Mux) BeatRTT() *LatencyHist { return &m.beatRTT }

// BeatGap is the time between two heartbeats a follower group handled.
func (m *Mux) BeatGap() *LatencyHist { return &m.beatGap }
