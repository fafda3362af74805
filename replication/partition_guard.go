package replication

import (
	"hash/maphash"
	"sync"

	"github.com/strata-io/strata/log"
)

// Partition guards: opening a partition (its log and raft group) and
// removing it (closing the group, deleting the log) never interleave for
// the same partition.
//
// Most of both run under effMu (onApply, reconcile). One open does not:
// start's pass over every topic after reconcile (it returns the first
// error, failing the start), which must not hold effMu -- holding it
// stalled the metadata FSM for the whole start (ff2f24b). Without a guard
// the FSM, applying a reassignment done or a deletion meanwhile, closed
// and deleted a partition whose group start was opening, and raft
// panicked reading the closed log in raft.NewRaft ("partition raft store:
// index N: log: partition closed", the 30-minute fault run, seed 11).
//
// Guards are striped (a fixed array, no growth with partitions); a holder
// takes one at a time and never waits for effMu while holding it, so the
// lock order is effMu, then a guard, then groupsMu.
const partitionGuardStripes = 64

type partitionGuards struct {
	seed    maphash.Seed
	stripes [partitionGuardStripes]sync.Mutex
}

func newPartitionGuards() *partitionGuards {
	return &partitionGuards{seed: maphash.MakeSeed()}
}

// of returns tp's guard.
func (g *partitionGuards) of(tp log.TopicPartition) *sync.Mutex {
	var h maphash.Hash
	h.SetSeed(g.seed)
	h.WriteString(tp.Topic)
	n := uint64(uint32(tp.Partition))
	return &g.stripes[(h.Sum64()^n*0x9e3779b97f4a7c15)%partitionGuardStripes]
}

// stillLocal reports whether the published image still places partition
// part of topic id on this broker (as a replica or a reassignment's
// target): start's open re-checks it under the guard, since the image it
// iterates may be older than an effect that removed the partition.
func (r *partitionReplicas) stillLocal(id [16]byte, part int32) bool {
	t, ok := r.meta.img.Load().byID[id]
	if !ok || part < 0 || int(part) >= len(t.Partitions) {
		return false
	}
	return containsNode(t.Partitions[part].members(), r.cfg.NodeID)
}
