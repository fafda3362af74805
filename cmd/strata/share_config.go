package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/strata-io/strata/protocol"
)

// shareSettings are the broker settings of share groups (KIP-932) with
// Apache Kafka 4.4's names, defaults and bounds (ShareGroupConfig and
// GroupCoordinatorConfig): the defaults of the group configs
// share.record.lock.duration.ms, share.delivery.count.limit, ... and the
// min/max each group's override must lie within. As on Kafka, tests that
// want short locks or sessions lower the min.* settings themselves:
//
//	--set group.share.min.record.lock.duration.ms=1000 --set group.share.record.lock.duration.ms=1000
//	--set group.share.min.session.timeout.ms=2000 --set group.share.session.timeout.ms=2000
//	--set group.share.min.heartbeat.interval.ms=500 --set group.share.heartbeat.interval.ms=500
var shareSettings = []setting{
	{"group.share.record.lock.duration.ms", "30000", "How long a share-group member holds a record it acquired before it is available again (default of the group config share.record.lock.duration.ms). 1000..3600000, within group.share.min/max.record.lock.duration.ms."},
	{"group.share.min.record.lock.duration.ms", "15000", "Smallest share.record.lock.duration.ms a group may set. 1000..30000."},
	{"group.share.max.record.lock.duration.ms", "60000", "Largest share.record.lock.duration.ms a group may set. 30000..3600000."},
	{"group.share.delivery.count.limit", "5", "Deliveries of a record to a share group before it is archived (default of share.delivery.count.limit). 2..10, within group.share.min/max.delivery.count.limit."},
	{"group.share.min.delivery.count.limit", "2", "Smallest share.delivery.count.limit a group may set. 2..5."},
	{"group.share.max.delivery.count.limit", "10", "Largest share.delivery.count.limit a group may set. 5..25."},
	{"group.share.partition.max.record.locks", "2000", "Records in flight (acquired or waiting for redelivery) per share partition (default of share.partition.max.record.locks). 100..10000, within group.share.min/max.partition.max.record.locks."},
	{"group.share.min.partition.max.record.locks", "100", "Smallest share.partition.max.record.locks a group may set. 100..2000."},
	{"group.share.max.partition.max.record.locks", "4000", "Largest share.partition.max.record.locks a group may set. 2000..10000."},
	{"group.share.max.share.sessions", "2000", "Share sessions (ShareFetch sessions of share consumers) this broker keeps; one more is refused with SHARE_SESSION_LIMIT_REACHED. 1.."},
	{"group.share.max.size", "200", "Most members of one share group. 1..1000."},
	{"group.share.session.timeout.ms", "45000", "A share-group member that sends no heartbeat for this long is removed (default of share.session.timeout.ms), within group.share.min/max.session.timeout.ms."},
	{"group.share.min.session.timeout.ms", "45000", "Smallest share.session.timeout.ms a group may set."},
	{"group.share.max.session.timeout.ms", "60000", "Largest share.session.timeout.ms a group may set."},
	{"group.share.heartbeat.interval.ms", "5000", "Heartbeat interval given to share-group members (default of share.heartbeat.interval.ms); below the session timeout, within group.share.min/max.heartbeat.interval.ms."},
	{"group.share.min.heartbeat.interval.ms", "5000", "Smallest share.heartbeat.interval.ms a group may set."},
	{"group.share.max.heartbeat.interval.ms", "15000", "Largest share.heartbeat.interval.ms a group may set."},
	{"share.version", "2", "Level of the share.version feature finalized for clients (Kafka's kafka-features) until kafka-features changes it: 2 = share groups with dead-letter topics (KIP-1191), 1 = share groups (KIP-932) without dead letters, 0 = share-group requests answered UNSUPPORTED_VERSION. 0..2."},
	{"errors.deadletterqueue.auto.create.topics.enable", "false", "Create a share group's dead-letter topic (errors.deadletterqueue.topic.name) when it does not exist, with errors.deadletterqueue.group.enable=true (KIP-1191)."},
	{"errors.deadletterqueue.topic.name.prefix", "dlq.", "The prefix every share group's dead-letter topic name must have; \"\" = any name (KIP-1191)."},
	{"strata.share.dlq.flood.ratio", "0", "Dead-letter flood guard (Strata-specific): when a share group's dead letters reach this share of its deliveries, summed over the cluster by the controller, within strata.share.dlq.flood.window.ms, the group is paused (group config strata.share.dlq.flood.paused=true: nothing is delivered to it) until strata share-group resume. 0 = off (the default); 0..1."},
	{"strata.share.dlq.flood.window.ms", "60000", "The flood guard's window (Strata-specific; sliding). 1000..86400000."},
	{"strata.share.dlq.flood.min.deliveries", "100", "Deliveries a window needs before the flood guard judges it (Strata-specific). 1.."},
	{"strata.share.dlq.depth.interval.ms", "30000", "How often the broker leading partition 0 of a share group's dead-letter topic counts the letters waiting there (not yet redriven) for the metrics strata_share_dlq_depth and strata_share_dlq_oldest_age_seconds (Strata-specific): each count reads the waiting letters. 1000..86400000."},
}

// Kafka's ConfigDef bounds of the share settings (int32 max where Kafka
// has none).
var shareSettingBounds = map[string][2]int64{
	"group.share.record.lock.duration.ms":        {1000, 3600000},
	"group.share.min.record.lock.duration.ms":    {1000, 30000},
	"group.share.max.record.lock.duration.ms":    {30000, 3600000},
	"group.share.delivery.count.limit":           {2, 10},
	"group.share.min.delivery.count.limit":       {2, 5},
	"group.share.max.delivery.count.limit":       {5, 25},
	"group.share.partition.max.record.locks":     {100, 10000},
	"group.share.min.partition.max.record.locks": {100, 2000},
	"group.share.max.partition.max.record.locks": {2000, 10000},
	"group.share.max.share.sessions":             {1, 1<<31 - 1},
	"group.share.max.size":                       {1, 1000},
	"group.share.session.timeout.ms":             {1, 1<<31 - 1},
	"group.share.min.session.timeout.ms":         {1, 1<<31 - 1},
	"group.share.max.session.timeout.ms":         {1, 1<<31 - 1},
	"group.share.heartbeat.interval.ms":          {1, 1<<31 - 1},
	"group.share.min.heartbeat.interval.ms":      {1, 1<<31 - 1},
	"group.share.max.heartbeat.interval.ms":      {1, 1<<31 - 1},
	"group.consumer.session.timeout.ms":          {1, 1<<31 - 1},
	"group.consumer.min.session.timeout.ms":      {1, 1<<31 - 1},
	"group.consumer.max.session.timeout.ms":      {1, 1<<31 - 1},
	"group.consumer.heartbeat.interval.ms":       {1, 1<<31 - 1},
	"group.consumer.min.heartbeat.interval.ms":   {1, 1<<31 - 1},
	"group.consumer.max.heartbeat.interval.ms":   {1, 1<<31 - 1},
	"share.version":                              {0, 2},
	"strata.share.dlq.flood.window.ms":           {1000, 86400000},
	"strata.share.dlq.flood.min.deliveries":      {1, 1<<31 - 1},
	"strata.share.dlq.depth.interval.ms":         {1000, 86400000},
}

// parseShareSettings fills cfg.GroupConfig (the group.share.* and
// group.consumer.* values behind group configs, checked as Kafka checks
// them), cfg.Share (the share-partition leader's broker defaults), the
// share-group membership settings of cfg.Groups and cfg.ShareVersion.
// Runs after parseGroupSettings.
func parseShareSettings(merged, explicit map[string]rawValue, cfg *Config) error {
	num := func(name string) (int64, error) {
		rv := merged[name]
		b := shareSettingBounds[name]
		n, err := strconv.ParseInt(rv.value, 10, 64)
		if err != nil || n < b[0] || n > b[1] {
			return 0, fmt.Errorf("%w: invalid value %q for %s (from %s): must be an integer between %d and %d", errConfig, rv.value, name, rv.origin, b[0], b[1])
		}
		return n, nil
	}
	var firstErr error
	ms := func(name string, p *time.Duration) {
		n, err := num(name)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		*p = time.Duration(n) * time.Millisecond
	}
	count := func(name string, p *int) {
		n, err := num(name)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		*p = int(n)
	}
	g := &cfg.GroupConfig
	ms("group.share.record.lock.duration.ms", &g.ShareRecordLockDuration)
	ms("group.share.min.record.lock.duration.ms", &g.ShareMinRecordLockDuration)
	ms("group.share.max.record.lock.duration.ms", &g.ShareMaxRecordLockDuration)
	count("group.share.delivery.count.limit", &g.ShareDeliveryCountLimit)
	count("group.share.min.delivery.count.limit", &g.ShareMinDeliveryCountLimit)
	count("group.share.max.delivery.count.limit", &g.ShareMaxDeliveryCountLimit)
	count("group.share.partition.max.record.locks", &g.SharePartitionMaxRecordLocks)
	count("group.share.min.partition.max.record.locks", &g.ShareMinPartitionMaxRecordLocks)
	count("group.share.max.partition.max.record.locks", &g.ShareMaxPartitionMaxRecordLocks)
	count("group.share.max.share.sessions", &g.ShareMaxShareSessions)
	count("group.share.max.size", &g.ShareMaxSize)
	ms("group.share.session.timeout.ms", &g.ShareSessionTimeout)
	ms("group.share.min.session.timeout.ms", &g.ShareMinSessionTimeout)
	ms("group.share.max.session.timeout.ms", &g.ShareMaxSessionTimeout)
	ms("group.share.heartbeat.interval.ms", &g.ShareHeartbeatInterval)
	ms("group.share.min.heartbeat.interval.ms", &g.ShareMinHeartbeatInterval)
	ms("group.share.max.heartbeat.interval.ms", &g.ShareMaxHeartbeatInterval)
	ms("group.consumer.session.timeout.ms", &g.ConsumerSessionTimeout)
	ms("group.consumer.min.session.timeout.ms", &g.ConsumerMinSessionTimeout)
	ms("group.consumer.max.session.timeout.ms", &g.ConsumerMaxSessionTimeout)
	ms("group.consumer.heartbeat.interval.ms", &g.ConsumerHeartbeatInterval)
	ms("group.consumer.min.heartbeat.interval.ms", &g.ConsumerMinHeartbeatInterval)
	ms("group.consumer.max.heartbeat.interval.ms", &g.ConsumerMaxHeartbeatInterval)
	if firstErr != nil {
		return firstErr
	}
	if err := g.Check(); err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	g.Explicit = map[string]bool{}
	for name := range shareSettingBounds {
		if _, ok := explicit[name]; ok {
			g.Explicit[name] = true
		}
	}
	// The share-partition leader resolves the rest per group from
	// cfg.GroupConfig (protocol/share_settings.go).
	// The group coordinator's share-group membership (ShareGroupHeartbeat)
	// takes the broker defaults from here; a group's own
	// share.session.timeout.ms / share.heartbeat.interval.ms come from its
	// group configs (groupconfig.Resolve).
	cfg.Groups.ShareSessionTimeout = g.ShareSessionTimeout
	cfg.Groups.ShareHeartbeatInterval = g.ShareHeartbeatInterval
	cfg.Groups.ShareMaxSize = g.ShareMaxSize
	cfg.Share = protocol.ShareConfig{MaxShareSessions: g.ShareMaxShareSessions}
	var on bool
	switch v := strings.ToLower(strings.TrimSpace(merged["errors.deadletterqueue.auto.create.topics.enable"].value)); v {
	case "true", "false":
		on = v == "true"
	default:
		rv := merged["errors.deadletterqueue.auto.create.topics.enable"]
		return fmt.Errorf("%w: invalid value %q for errors.deadletterqueue.auto.create.topics.enable (from %s): must be true or false", errConfig, rv.value, rv.origin)
	}
	g.DLQAutoCreateTopics = on
	g.DLQTopicNamePrefix, g.DLQTopicNamePrefixSet = merged["errors.deadletterqueue.topic.name.prefix"].value, true
	rv := merged["strata.share.dlq.flood.ratio"]
	ratio, err := strconv.ParseFloat(strings.TrimSpace(rv.value), 64)
	if err != nil || !(ratio >= 0 && ratio <= 1) {
		return fmt.Errorf("%w: invalid value %q for strata.share.dlq.flood.ratio (from %s): must be a number between 0 and 1", errConfig, rv.value, rv.origin)
	}
	g.FloodRatio = ratio
	ms("strata.share.dlq.flood.window.ms", &g.FloodWindow)
	count("strata.share.dlq.flood.min.deliveries", &g.FloodMinDeliveries)
	ms("strata.share.dlq.depth.interval.ms", &g.DLQDepthInterval)
	cfg.Share.DLQDepthEvery = g.DLQDepthInterval
	if firstErr != nil {
		return firstErr
	}
	sv, err := num("share.version")
	if err != nil {
		return err
	}
	cfg.ShareVersion = int16(sv)
	if sv == 0 {
		cfg.ShareVersion = protocol.ShareVersionOff
	}
	return nil
}
