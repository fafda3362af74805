package replication

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/sharepart"
)

// Share-partition state (KIP-932) on the partition's own Raft group
// (doc.go, "Partition groups"; sharepart/doc.go). Every replica of a
// partition holds one sharepart.Registry, created when the group opens,
// changed only by extShareState side entries applied in log order, and
// carried whole by the group's snapshots (partition_snapshots.go). The
// leader computes a delta from its registry, proposes it (ShareApply) and
// answers its client once the delta is committed and applied here.

// shareEpochBytes is the leader-epoch prefix of an extShareState entry.
const shareEpochBytes = 4

// noShareFence is the epoch of an entry applied whatever its term.
const noShareFence = -1

// Share-state entries the partition FSMs of this process applied, fenced
// and refused (metrics.go).
var shareEntriesApplied, shareEntriesFenced, shareEntriesRefused atomic.Int64

// ShareRegistry returns this broker's replica of the partition's share
// state, leader or follower: read it for reports; only the leader's
// decisions change it (ShareLeader, ShareApply). The registry is replaced
// when the group restarts (after a snapshot install): call again rather
// than keep it. ErrUnknownTopicOrPartition for an unknown partition,
// ErrNotLeader (naming the leader) when this broker has no replica of it.
func (r *partitionReplicas) ShareRegistry(topic string, partition int32) (*sharepart.Registry, error) {
	g, err := r.shareGroup(topic, partition)
	if err != nil {
		return nil, err
	}
	return g.share, nil
}

// ShareLeader returns the share state of a partition this broker leads
// and the leader epoch it leads at (its Raft term: the epoch stamped in
// the batches it appends and reported in the metadata). The registry then
// holds every entry committed before this epoch (a raft barrier, once per
// epoch), so deltas computed from it are the leader's to propose. A leader
// that keeps state of its own beside the registry (acquisitions proposed,
// not yet applied) drops it when the epoch changes, and proposes with
// ShareApplyAt at the epoch it computed at.
//
// ErrNotLeader (naming the leader when one is known) on any other replica
// and while no leader is elected; ErrUnknownTopicOrPartition for an
// unknown partition.
func (r *partitionReplicas) ShareLeader(ctx context.Context, topic string, partition int32) (*sharepart.Registry, int32, error) {
	g, err := r.shareGroup(topic, partition)
	if err != nil {
		return nil, -1, err
	}
	if err := g.awaitLeader(ctx); err != nil {
		return nil, -1, err
	}
	term := g.raft.CurrentTerm()
	if term > math.MaxInt32 {
		return nil, -1, fmt.Errorf("%w: %s: term %d does not fit a leader epoch", log.ErrStorage, g.tp, term)
	}
	if g.shareReady.Load() != term {
		// Entries of earlier terms may be committed but not applied yet
		// (a new leader applies them once an entry of its own term
		// commits): a barrier waits for all of them.
		f := g.raft.Barrier(produceApplyTimeout)
		if err := waitFutureCtx(ctx, f, g.stopped); err != nil {
			return nil, -1, raftErr(g, err)
		}
		if g.raft.State() != raft.Leader || g.raft.CurrentTerm() != term {
			return nil, -1, fmt.Errorf("%w: %s: leadership changed", ErrNotLeader, g.tp)
		}
		g.shareReady.Store(term)
	}
	return g.share, int32(term), nil
}

// ShareApply proposes a share-state delta (sharepart.Delta.Encode) on a
// partition this broker leads and returns once it is committed and
// applied to this replica's registry (followers apply it with the
// leader's next AppendEntries). The error is ErrNotLeader (naming the
// leader) on another replica or when leadership is lost before the
// commit, ErrUnknownTopicOrPartition for an unknown partition, the
// registry's sharepart.ErrCorrupt for a delta that does not decode, or
// ctx's error: then, as after ErrShuttingDown, the delta may still be
// committed later. ShareApply does not fence: ShareApplyAt does.
func (r *partitionReplicas) ShareApply(ctx context.Context, topic string, partition int32, delta []byte) error {
	return r.shareApply(ctx, topic, partition, noShareFence, delta)
}

// ShareApplyAt is ShareApply for a delta computed at leaderEpoch (from
// ShareLeader): the entry is applied only if it is in the log at that
// epoch, on every replica alike. A leader that lost its leadership and won
// it again after computing the delta (others may have changed the state
// meanwhile) gets ErrNotLeader, and no replica applies the delta.
func (r *partitionReplicas) ShareApplyAt(ctx context.Context, topic string, partition int32, leaderEpoch int32, delta []byte) error {
	if leaderEpoch < 0 {
		return fmt.Errorf("%w: %s-%d: leader epoch %d", ErrNotLeader, topic, partition, leaderEpoch)
	}
	return r.shareApply(ctx, topic, partition, leaderEpoch, delta)
}

func (r *partitionReplicas) shareApply(ctx context.Context, topic string, partition int32, epoch int32, delta []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g, err := r.shareGroup(topic, partition)
	if err != nil {
		return err
	}
	if err := g.awaitLeader(ctx); err != nil {
		return err
	}
	if epoch >= 0 && uint64(epoch) != g.raft.CurrentTerm() {
		return fmt.Errorf("%w: %s: leader epoch %d is not the current one", ErrNotLeader, g.tp, epoch)
	}
	data := make([]byte, shareEpochBytes, shareEpochBytes+len(delta))
	binary.BigEndian.PutUint32(data, uint32(epoch))
	data = append(data, delta...)
	f := g.raft.ApplyLog(raft.Log{Data: data, Extensions: []byte{extShareState}}, produceApplyTimeout)
	if err := waitFutureCtx(ctx, f, g.stopped); err != nil {
		if err == ctx.Err() {
			return err
		}
		return raftErr(g, err)
	}
	pr, ok := f.Response().(partitionResult)
	if !ok {
		return fmt.Errorf("%w: %s: unexpected raft response %T", log.ErrStorage, g.tp, f.Response())
	}
	return pr.err
}

// applyShareState applies an extShareState entry stored at term.
func (f *partitionFSM) applyShareState(term uint64, data []byte) any {
	if len(data) < shareEpochBytes {
		shareEntriesRefused.Add(1)
		return partitionResult{err: fmt.Errorf("%w: share-state entry of %d bytes", errPartitionStore, len(data))}
	}
	res := log.AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1}
	epoch := int32(binary.BigEndian.Uint32(data))
	if epoch != noShareFence && uint64(epoch) != term {
		// Computed at another epoch than it was appended at: fenced.
		shareEntriesFenced.Add(1)
		return partitionResult{res: res, err: fmt.Errorf("%w: share state computed at leader epoch %d, appended at %d", ErrNotLeader, epoch, term)}
	}
	if f.share == nil {
		return partitionResult{res: res}
	}
	if err := f.share.Apply(data[shareEpochBytes:]); err != nil {
		shareEntriesRefused.Add(1)
		return partitionResult{res: res, err: err}
	}
	shareEntriesApplied.Add(1)
	return partitionResult{res: res}
}

// shareSnapshot returns the registry's snapshot, nil when it holds no
// group (the snapshot then has the format of one without share state).
func (f *partitionFSM) shareSnapshot() []byte {
	if f.share == nil || len(f.share.Groups()) == 0 {
		return nil
	}
	return f.share.Snapshot()
}

// shareGroup finds the local group of a partition.
func (r *partitionReplicas) shareGroup(topic string, partition int32) (*partitionGroup, error) {
	if r.closed.Load() {
		return nil, ErrShuttingDown
	}
	t, ok := r.meta.img.Load().topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, topic, partition)
	}
	g := r.group(log.TopicPartition{Topic: topic, Partition: partition})
	if g == nil {
		return nil, fmt.Errorf("%w: %s-%d has no replica here; led by %d", ErrNotLeader, topic, partition, t.Partitions[partition].Leader)
	}
	return g, nil
}

// waitFutureCtx waits for f, for stop to close (raft shut down) or for
// ctx to end (ctx's error).
func waitFutureCtx(ctx context.Context, f raft.Future, stop <-chan struct{}) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return ctx.Err()
		}
	case <-stop:
		select {
		case err := <-done:
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}
