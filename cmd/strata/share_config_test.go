package main

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/groupconfig"
	"github.com/strata-io/strata/protocol"
)

// TestShareSettings: Kafka 4.4's defaults, its bounds on each setting, its
// cross-checks, and the way tests shorten locks and sessions below Kafka's
// defaults (by lowering the min.* settings too, as on Kafka).
func TestShareSettings(t *testing.T) {
	load := func(args ...string) (*Config, error) {
		var set []string
		for _, a := range args {
			set = append(set, "--set", a)
		}
		cfg, _, err := loadConfig(set, nil, nil, io.Discard)
		return cfg, err
	}
	cfg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if want := (groupconfig.Broker{}).WithDefaults(); !equalBroker(cfg.GroupConfig, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", cfg.GroupConfig, want)
	}
	if g, sh := cfg.GroupConfig, cfg.Share; g.ShareRecordLockDuration != 30*time.Second || g.ShareDeliveryCountLimit != 5 || g.SharePartitionMaxRecordLocks != 2000 || sh.MaxShareSessions != 2000 || cfg.ShareVersion != 2 ||
		g.DLQAutoCreateTopics || g.DLQTopicNamePrefix != "dlq." {
		t.Fatalf("share %+v version %d", cfg.Share, cfg.ShareVersion)
	}
	cfg, err = load("group.share.min.record.lock.duration.ms=1000", "group.share.record.lock.duration.ms=1000",
		"group.share.min.session.timeout.ms=2000", "group.share.session.timeout.ms=2000",
		"group.share.min.heartbeat.interval.ms=500", "group.share.heartbeat.interval.ms=500", "share.version=0")
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.GroupConfig
	if g.ShareRecordLockDuration != time.Second || g.ShareSessionTimeout != 2*time.Second || g.ShareHeartbeatInterval != 500*time.Millisecond ||
		cfg.ShareVersion != protocol.ShareVersionOff ||
		!g.Explicit["group.share.record.lock.duration.ms"] || g.Explicit["group.share.delivery.count.limit"] ||
		cfg.Groups.ShareSessionTimeout != 2*time.Second || cfg.Groups.ShareHeartbeatInterval != 500*time.Millisecond || cfg.Groups.ShareMaxSize != 200 {
		t.Fatalf("lowered: %+v %+v %d", g, cfg.Share, cfg.ShareVersion)
	}
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"group.share.record.lock.duration.ms=1000"}, "group.share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"},
		{[]string{"group.share.record.lock.duration.ms=999"}, "group.share.record.lock.duration.ms"},
		{[]string{"group.share.min.record.lock.duration.ms=999"}, "between 1000 and 30000"},
		{[]string{"group.share.delivery.count.limit=11"}, "between 2 and 10"},
		{[]string{"group.share.partition.max.record.locks=5000"}, "group.share.max.partition.max.record.locks must be greater than or equal to group.share.partition.max.record.locks"},
		{[]string{"group.share.max.size=1001"}, "between 1 and 1000"},
		{[]string{"group.share.session.timeout.ms=1000"}, "group.share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"},
		{[]string{"group.share.min.session.timeout.ms=1000", "group.share.session.timeout.ms=1000"}, "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"},
		{[]string{"group.consumer.heartbeat.interval.ms=200"}, "group.consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"},
		{[]string{"share.version=3"}, "between 0 and 2"},
		{[]string{"errors.deadletterqueue.auto.create.topics.enable=yes"}, "must be true or false"},
		{[]string{"strata.share.dlq.flood.ratio=1.5"}, "between 0 and 1"},
		{[]string{"strata.share.dlq.flood.window.ms=10"}, "between 1000 and 86400000"},
	} {
		_, err := load(tc.set...)
		if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.set, err, tc.want)
		}
	}
	if _, err := load("group.consumer.heartbeat.interval.ms=200", "group.consumer.min.heartbeat.interval.ms=200"); err != nil {
		t.Fatalf("lowered consumer heartbeat: %v", err)
	}
	// KIP-1191's cluster settings.
	cfg, err = load("errors.deadletterqueue.auto.create.topics.enable=true", "errors.deadletterqueue.topic.name.prefix=",
		"strata.share.dlq.flood.ratio=0.5", "strata.share.dlq.flood.window.ms=5000", "strata.share.dlq.flood.min.deliveries=10")
	if err != nil || !cfg.GroupConfig.DLQAutoCreateTopics || cfg.GroupConfig.DLQTopicNamePrefix != "" || !cfg.GroupConfig.DLQTopicNamePrefixSet ||
		cfg.GroupConfig.FloodRatio != 0.5 || cfg.GroupConfig.FloodWindow != 5*time.Second || cfg.GroupConfig.FloodMinDeliveries != 10 {
		t.Fatalf("dead-letter settings: %v %+v", err, cfg)
	}
}

func equalBroker(a, b groupconfig.Broker) bool {
	a.Explicit, b.Explicit = nil, nil
	return reflect.DeepEqual(a, b)
}
