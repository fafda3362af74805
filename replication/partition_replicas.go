package replication

import (
	"sync"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication/raftconf"
)

// partitionReplicas are the partitions this broker hosts: their logs (in
// the log manager) and Raft groups (partition_group.go), the local
// effects of applied metadata commands (onApply), leader reports
// (partition_leaders.go), reassignment steps (partition_reassign.go), leadership
// transfers and rebalance, share-group state, and the data directory's
// free space (partition_disk_space.go).
//
// It reads the metadata through meta's image and proposes through meta
// (leader reports, reassignment steps); it never writes the image.
type partitionReplicas struct {
	*node
	meta *metadataQuorum
	logs *log.Manager

	// effMu serializes local effects (onApply, reconcile). Taken on the
	// FSM goroutine, so never held while waiting for raft.
	effMu sync.Mutex

	// groups are the running partition Raft groups (partition_group.go),
	// one per open local partition. Lock order: effMu, then groupsMu;
	// groupsMu is never held while waiting for raft.
	groupsMu sync.RWMutex
	groups   map[log.TopicPartition]*partitionGroup // protected by groupsMu
	byRaft   map[*raft.Raft]*partitionGroup         // protected by groupsMu
	// guards keep a partition's open and removal apart (partition_guard.go).
	guards *partitionGuards
	// testHookOpening, when set, runs in openLog under the partition's
	// guard before the group starts (tests hold an open there).
	testHookOpening func(log.TopicPartition)
	// partitionTiming is the raft timing of groups with several voters.
	partitionTiming raftconf.Timing

	// Leader reports (partition_leaders.go): groups' raft observations
	// arrive on obsCh (observe), groups to report wait in reports
	// (reportLeaders).
	obsCh        chan raft.Observation
	reportMu     sync.Mutex
	reports      map[log.TopicPartition]*partitionGroup // protected by reportMu
	reportWake   chan struct{}
	observerDone chan struct{}
	memoDone     chan struct{}
	reporterDone chan struct{}
	reassignDone chan struct{}
	// rebalanceDone closes when rebalanceLoop (partition_rebalance.go) ends.
	rebalanceDone chan struct{}
}

func newPartitionReplicas(n *node, meta *metadataQuorum, logs *log.Manager) *partitionReplicas {
	r := &partitionReplicas{node: n, meta: meta, logs: logs,
		groups: map[log.TopicPartition]*partitionGroup{}, byRaft: map[*raft.Raft]*partitionGroup{},
		guards:          newPartitionGuards(),
		partitionTiming: raftconf.PartitionTiming,
		obsCh:           make(chan raft.Observation, 4096), reports: map[log.TopicPartition]*partitionGroup{},
		reportWake:   make(chan struct{}, 1),
		observerDone: make(chan struct{}), memoDone: make(chan struct{}), reporterDone: make(chan struct{}), reassignDone: make(chan struct{}),
		rebalanceDone: make(chan struct{})}
	if n.cfg.PartitionHeartbeat > 0 {
		r.partitionTiming = raftconf.PartitionTimingFor(n.cfg.PartitionHeartbeat)
	}
	return r
}
