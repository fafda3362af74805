package replication

import "github.com/strata-io/strata/log"

// LocalLog returns the local log of a partition this broker hosts, leader
// or follower, or nil when the partition is not in the current metadata
// image or has no open log here. Unlike Partition it does not require
// leadership: it serves reports about what is on this broker's disk
// (DescribeLogDirs), never reads or writes that need the leader.
func (b *Broker) LocalLog(topic string, partition int32) *log.Partition {
	if b.closed.Load() {
		return nil
	}
	t, ok := b.img.Load().topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return nil
	}
	return b.logs.Get(log.TopicPartition{Topic: topic, Partition: partition})
}
