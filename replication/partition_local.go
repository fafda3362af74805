package replication

import (
	"context"
	"fmt"

	"github.com/strata-io/strata/log"
)

// Local partitions as request handlers reach them: the log of a partition
// led here, produce through its group, and any local replica's log.

// Partition returns the local log of a partition this broker leads.
// ErrUnknownTopicOrPartition or ErrNotLeader otherwise.
func (r *partitionReplicas) Partition(topic string, partition int32) (*log.Partition, error) {
	lp, _, err := r.partition(topic, partition)
	return lp, err
}

func (r *partitionReplicas) partition(topic string, partition int32) (*log.Partition, PartitionInfo, error) {
	if r.closed.Load() {
		return nil, PartitionInfo{}, ErrShuttingDown
	}
	t, ok := r.meta.img.Load().topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, PartitionInfo{}, fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, topic, partition)
	}
	pi := t.Partitions[partition]
	if pi.Leader != r.cfg.NodeID {
		return nil, pi, fmt.Errorf("%w: %s-%d is led by %d", ErrNotLeader, topic, partition, pi.Leader)
	}
	lp := r.logs.Get(log.TopicPartition{Topic: topic, Partition: partition})
	if lp == nil {
		return nil, pi, fmt.Errorf("%w: %s-%d has no open log", log.ErrStorage, topic, partition)
	}
	return lp, pi, nil
}

// Produce appends records to a partition this broker leads and returns once
// they are committed (the high watermark has passed them). With one voter
// the write is committed as soon as it is in the log. A retried idempotent
// batch returns the original offsets with Duplicate set.
func (r *partitionReplicas) Produce(ctx context.Context, topic string, partition int32, records []byte) (log.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return log.AppendResult{}, err
	}
	lp, _, err := r.partition(topic, partition)
	if err != nil {
		return log.AppendResult{}, err
	}
	if err := r.diskErr(); err != nil {
		return log.AppendResult{}, err // below strata.log.dir.min.free.bytes
	}
	g := r.group(lp.TopicPartition())
	if g == nil {
		return log.AppendResult{}, fmt.Errorf("%w: %s-%d has no raft group", log.ErrStorage, topic, partition)
	}
	return g.produce(ctx, records)
}

// LocalLog returns the local log of a partition this broker hosts, leader
// or follower, or nil when the partition is not in the current metadata
// image or has no open log here. Unlike Partition it does not require
// leadership: it serves reports about what is on this broker's disk
// (DescribeLogDirs), never reads or writes that need the leader.
func (r *partitionReplicas) LocalLog(topic string, partition int32) *log.Partition {
	if r.closed.Load() {
		return nil
	}
	t, ok := r.meta.img.Load().topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return nil
	}
	return r.logs.Get(log.TopicPartition{Topic: topic, Partition: partition})
}
