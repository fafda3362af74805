package replication

import "github.com/strata-io/strata/log"

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
