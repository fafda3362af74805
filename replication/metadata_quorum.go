package replication

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication/raftstore"
)

// metadataQuorum is the replicated metadata of the cluster as this broker
// sees it: the metadata Raft group (metadata_raft.go), the image it applies
// commands to (metadata_fsm.go), the single writer that validates and
// proposes commands, and the requests it serves as controller
// (metadata_controller_ext.go, metadata_roles.go, metadata_describe_quorum.go, metadata_fencing.go) -- topics,
// configs, ACLs, SCRAM credentials, quotas, features, registrations.
//
// Readers (Topics, Topic, ...) load the current image through an atomic
// pointer and never block on writers. Writers (CreateTopic, DeleteTopic,
// CreatePartitions, SetTopicConfigs, AllocateProducerID, ...) hold mu,
// which makes them the single writer of both the metadata log and the
// image.
//
// The quorum does not know partitions' logs or groups: what an applied
// command does on this broker's disk is local's (replicaEffects).
type metadataQuorum struct {
	*node
	clusterID string

	// img is the current metadata; replaced only with mu held, after the
	// command that produced it is durable in the metadata log.
	img atomic.Pointer[image]

	mu      writerLock // this broker's single metadata writer (validate + propose); metadata_writer_lock.go
	pidNext int64      // next producer ID of the reserved block; protected by mu
	pidEnd  int64      // end (exclusive) of the reserved block; protected by mu. Invariant: pidNext <= pidEnd

	// The metadata Raft group (metadata_raft.go); set by openRaft, then
	// read-only.
	raft  *raft.Raft
	rlog  *raftstore.LogFile
	fsm   *metadataFSM
	fresh bool // the metadata raft store was empty at start

	// local carries out applied commands on this broker's partitions.
	local replicaEffects

	// fenceDone closes when fenceLoop (metadata_fencing.go) ends.
	fenceDone chan struct{}
	// announce wakes announceCommits (metadata_raft.go) after a proposal
	// committed here; announceDone closes when it ends.
	announce     chan struct{}
	announceDone chan struct{}

	// Handlers of requests to the controller by name
	// (metadata_controller_ext.go); protected by extMu.
	extMu sync.Mutex
	ext   map[string]func([]byte) ([]byte, error)
}

func newMetadataQuorum(n *node, clusterID string) *metadataQuorum {
	q := &metadataQuorum{node: n, clusterID: clusterID, mu: newWriterLock(),
		fenceDone: make(chan struct{}), announce: make(chan struct{}, 1), announceDone: make(chan struct{})}
	// The loops read the image from their first tick (reassignLoop every
	// 250 ms); openRaft's FSM takes this one over, and a start whose
	// openRaft took longer found none.
	q.img.Store(newImage())
	return q
}

// replicaEffects is what the metadata quorum asks of this broker's
// partition replicas (partitionReplicas implements it).
type replicaEffects interface {
	// onApply carries out an applied command's local effects and
	// publishes next (metadataFSM).
	onApply(index uint64, c Command, prev, next *image, publish func())
	// openLogs opens the local logs and groups of t's partitions from
	// first on (CreateTopics, CreatePartitions on the proposer).
	openLogs(t *TopicInfo, first int32) error
	// deleteLogs removes this broker's logs of a deleted topic.
	deleteLogs(pd pendingDelete) error
	// removeLeftoversLocked removes what a topic named name must not
	// inherit, before it is created.
	removeLeftoversLocked(name string) ([][16]byte, error)
	// setLogConfigs gives t's open local logs cfg.
	setLogConfigs(t *TopicInfo, cfg log.Config)
	// handleTransfer serves a forwarded partition leadership transfer.
	handleTransfer(req *transferRequest) forwardResponse
}
