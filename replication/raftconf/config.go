package raftconf

import (
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
)

// Timing is the part of raft.Config that sets the cost of an idle group
// against how fast a dead leader is replaced (replication/doc.go, "Raft timing").
type Timing struct {
	// Heartbeat is raft.Config.HeartbeatTimeout: a follower that hears
	// nothing for this long (to twice it) starts an election; a leader
	// heartbeats every tenth of it (to a fifth).
	Heartbeat time.Duration
	// Election is raft.Config.ElectionTimeout: a candidate's wait for votes.
	Election time.Duration
	// Commit is raft.Config.CommitTimeout: an idle leader tells followers
	// the commit index at least this often (to twice), one AppendEntries
	// per follower that goes through the follower's raft loop.
	Commit time.Duration
	// Lease is raft.Config.LeaderLeaseTimeout: a leader that has not heard
	// from a quorum for this long steps down. At most Heartbeat.
	Lease time.Duration
}

var (
	// PartitionTiming is for partition groups, of which a broker runs
	// thousands: about two heartbeats a second per follower when idle
	// (every 400-800 ms: leaders run with LeaderHeartbeatFactor times the
	// heartbeat timeout) and a commit-index update every 6-12 s (answered
	// by the pipeline itself while nothing changed, transport/commit.go);
	// a leader SIGKILL is noticed in 2-4 s. Idle followers learn the commit
	// index late, which costs nothing: consumers read from the leader.
	// CommitTimeout is also when raft retries a follower it lost while no
	// entries come: a follower whose heartbeats resume is caught up at once
	// instead (replication's Broker.observe pokes the group's transport).
	PartitionTiming = PartitionTimingFor(2 * time.Second)
	// MetadataTiming is for the one metadata group: fail over faster. Its
	// lease is the whole heartbeat timeout (raft's maximum): a controller
	// steps down only when it has not reached a quorum for a second; at
	// 500 ms, franz-go's whole kgo suite on three brokers sharing two
	// cores with other tests (load average above 10) saw the controller
	// step down several times, each a moment without a controller for
	// clients (issue 15). A follower still starts an election 1-2 s after
	// its leader falls silent, so failover is as fast as before.
	MetadataTiming = Timing{Heartbeat: time.Second, Election: time.Second, Commit: 100 * time.Millisecond, Lease: time.Second}
)

// PartitionTimingFor derives a partition group's timing from the
// heartbeat timeout strata.partition.heartbeat.timeout.ms sets.
func PartitionTimingFor(hb time.Duration) Timing {
	return Timing{Heartbeat: hb, Election: hb, Commit: hb * 3, Lease: hb}
}

// LeaderHeartbeatFactor: partition leaders run with this many times their
// followers' HeartbeatTimeout (replication's partitionGroup.fitTiming).
const LeaderHeartbeatFactor = 2

// New returns a raft.Config with every field set explicitly:
// hashicorp's DefaultConfig is tuned for one group per process.
func New(id raft.ServerID, t Timing, logger *slog.Logger) *raft.Config {
	return &raft.Config{
		ProtocolVersion:    raft.ProtocolVersionMax,
		HeartbeatTimeout:   t.Heartbeat,
		ElectionTimeout:    t.Election,
		CommitTimeout:      t.Commit,
		LeaderLeaseTimeout: t.Lease,
		// MaxAppendEntries bounds one AppendEntries; entries are batches
		// of at most max.message.bytes, so this also bounds the frame
		// (the transport's maxFrameBytes).
		MaxAppendEntries: 64,
		// BatchApplyCh lets Apply calls queue up to MaxAppendEntries while
		// the leader loop is busy, so concurrent producers share a disk
		// write and a round trip.
		BatchApplyCh: true,
		// A broker removed from a group (reassignment) stops that group.
		ShutdownOnRemove: true,
		// Partition snapshots are cheap (a position, replication/doc.go), so snapshot
		// often and keep a modest tail for slow followers.
		TrailingLogs:      10240,
		SnapshotInterval:  2 * time.Minute,
		SnapshotThreshold: 8192,
		LocalID:           id,
		NotifyCh:          nil, // leadership is observed with LeaderCh
		// Raft's lines go to the broker's logger, re-levelled (logger.go):
		// the metadata group's elections at INFO; partition groups set
		// theirs to DEBUG (replication's partitionGroup).
		Logger: newRaftLogger(logger.With("component", "raft", "raft_id", string(id)), slog.LevelInfo),
		// Restore the newest snapshot at start (the FSM is rebuilt from it
		// plus the log after it).
		NoSnapshotRestoreOnStart: false,
		// Pre-vote keeps a partitioned broker, on its return, from
		// deposing a healthy leader with an inflated term.
		PreVoteDisabled: false,
		// Legacy metric names: not exported by Strata.
		NoLegacyTelemetry: true,
		// Committed entries are applied after restart as raft replays
		// them; restoring them eagerly at NewRaft is not needed.
		RestoreCommittedLogs: false,
	}
}
