package main

import (
	"fmt"
	"time"
)

// groupSettings are the broker settings of the group coordinator, with
// Kafka's names and defaults (group.max.size: Kafka's is unbounded;
// Strata bounds it).
var groupSettings = []setting{
	{"offsets.topic.num.partitions", "50", "Partitions of __consumer_offsets, used when it is created."},
	{"offsets.topic.replication.factor", "3", "Replication factor of __consumer_offsets, capped at the number of brokers."},
	{"offsets.topic.segment.bytes", "104857600", "segment.bytes of __consumer_offsets."},
	{"offset.metadata.max.bytes", "4096", "Largest metadata string of one committed offset."},
	{"offsets.retention.minutes", "10080", "How long the committed offsets of an empty group are kept."},
	{"offsets.retention.check.interval.ms", "600000", "How often offsets are checked against offsets.retention.minutes."},
	{"group.initial.rebalance.delay.ms", "3000", "How long the first rebalance of an empty classic group waits for more members."},
	{"group.min.session.timeout.ms", "6000", "Smallest session timeout a classic group member may ask for."},
	{"group.max.session.timeout.ms", "1800000", "Largest session timeout a classic group member may ask for."},
	{"group.max.size", "100000", "Most members of one group."},
	{"group.consumer.session.timeout.ms", "45000", "Session timeout of KIP-848 consumer group members (default of the group config consumer.session.timeout.ms), within group.consumer.min/max.session.timeout.ms."},
	{"group.consumer.min.session.timeout.ms", "45000", "Smallest consumer.session.timeout.ms a group may set."},
	{"group.consumer.max.session.timeout.ms", "60000", "Largest consumer.session.timeout.ms a group may set."},
	{"group.consumer.heartbeat.interval.ms", "5000", "Heartbeat interval of KIP-848 consumer group members (default of consumer.heartbeat.interval.ms); below the session timeout, within group.consumer.min/max.heartbeat.interval.ms."},
	{"group.consumer.min.heartbeat.interval.ms", "5000", "Smallest consumer.heartbeat.interval.ms a group may set."},
	{"group.consumer.max.heartbeat.interval.ms", "15000", "Largest consumer.heartbeat.interval.ms a group may set."},
}

// parseGroupSettings fills cfg.Groups from the merged settings.
func parseGroupSettings(merged map[string]rawValue, cfg *Config) error {
	num := func(name string, lo, hi int64) (int64, error) { return intSetting(merged, name, lo, hi) }
	ms := func(name string, lo int64) (time.Duration, error) {
		n, err := num(name, lo, 1<<31-1)
		return time.Duration(n) * time.Millisecond, err
	}
	g := &cfg.Groups
	var err error
	var n int64
	if n, err = num("offsets.topic.num.partitions", 1, 50000); err != nil {
		return err
	}
	g.NumPartitions = int32(n)
	if n, err = num("offsets.topic.replication.factor", 1, 1<<15-1); err != nil {
		return err
	}
	g.ReplicationFactor = int16(n)
	if g.SegmentBytes, err = num("offsets.topic.segment.bytes", 1<<10, 1<<31-1); err != nil {
		return err
	}
	if n, err = num("offset.metadata.max.bytes", 0, 1<<20); err != nil {
		return err
	}
	g.MaxMetadataBytes = int(n)
	if n, err = num("offsets.retention.minutes", 1, 1<<31-1); err != nil {
		return err
	}
	g.OffsetsRetention = time.Duration(n) * time.Minute
	if g.OffsetsRetentionCheckInterval, err = ms("offsets.retention.check.interval.ms", 1); err != nil {
		return err
	}
	if g.InitialRebalanceDelay, err = ms("group.initial.rebalance.delay.ms", 0); err != nil {
		return err
	}
	if g.InitialRebalanceDelay == 0 {
		g.InitialRebalanceDelay = -1 // groupcoord: negative = none (0 = default)
	}
	if g.MinSessionTimeout, err = ms("group.min.session.timeout.ms", 1); err != nil {
		return err
	}
	if g.MaxSessionTimeout, err = ms("group.max.session.timeout.ms", 1); err != nil {
		return err
	}
	if g.MaxSessionTimeout < g.MinSessionTimeout {
		return fmt.Errorf("%w: group.max.session.timeout.ms is below group.min.session.timeout.ms", errConfig)
	}
	if n, err = num("group.max.size", 1, 1<<31-1); err != nil {
		return err
	}
	g.MaxGroupSize = int(n)
	if g.ConsumerSessionTimeout, err = ms("group.consumer.session.timeout.ms", 1); err != nil {
		return err
	}
	if g.ConsumerHeartbeatInterval, err = ms("group.consumer.heartbeat.interval.ms", 1); err != nil {
		return err
	}
	return nil
}
