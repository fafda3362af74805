package protocol

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/log"
)

// describeTopicConfig returns one config of a topic as DescribeConfigs
// reports it.
func describeTopicConfig(t *testing.T, adm *kadm.Client, topic, key string) kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("%s has no config %s", topic, key)
	return kadm.Config{}
}

func str(s string) *string { return &s }

// TestIncrementalAlterConfigs: SET, DELETE, APPEND, SUBTRACT through
// kadm, applied to the live partition at once and reported by
// DescribeConfigs with source DYNAMIC_TOPIC_CONFIG; bad input refused with
// INVALID_CONFIG naming the key.
func TestIncrementalAlterConfigs(t *testing.T) {
	c := newRetentionCluster(t)
	ctx := testCtx(t)
	adm := c.admin()
	c.createTopic("ac", 1)
	part := c.logs.Get(log.TopicPartition{Topic: "ac", Partition: 0})

	alter := func(cfgs ...kadm.AlterConfig) kadm.AlterConfigsResponse {
		t.Helper()
		resps, err := adm.AlterTopicConfigs(ctx, cfgs, "ac")
		if err != nil {
			t.Fatal(err)
		}
		return resps[0]
	}
	if r := alter(kadm.AlterConfig{Name: "retention.ms", Value: str("1000")}, kadm.AlterConfig{Name: "segment.bytes", Value: str("4096")}); r.Err != nil {
		t.Fatalf("set: %v %s", r.Err, r.ErrMessage)
	}
	if got := describeTopicConfig(t, adm, "ac", "retention.ms"); got.Value == nil || *got.Value != "1000" || got.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.ms after SET: %v source %v", got.Value, got.Source)
	}
	if cfg := part.Config(); cfg.Cleanup.RetentionMs != 1000 || cfg.SegmentBytes != 4096 {
		t.Fatalf("live partition config not updated: %+v", cfg)
	}

	// APPEND to the effective list (the default "delete"), then SUBTRACT.
	if r := alter(kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: str("compact")}); r.Err != nil {
		t.Fatalf("append: %v %s", r.Err, r.ErrMessage)
	}
	if got := describeTopicConfig(t, adm, "ac", "cleanup.policy"); *got.Value != "delete,compact" {
		t.Fatalf("cleanup.policy after APPEND: %s", *got.Value)
	}
	if cl := part.Config().Cleanup; !cl.Delete || !cl.Compact {
		t.Fatalf("live cleanup after APPEND: %+v", cl)
	}
	if r := alter(kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: str("delete")}); r.Err != nil {
		t.Fatalf("subtract: %v %s", r.Err, r.ErrMessage)
	}
	if got := describeTopicConfig(t, adm, "ac", "cleanup.policy"); *got.Value != "compact" {
		t.Fatalf("cleanup.policy after SUBTRACT: %s", *got.Value)
	}

	// Refused, with the key named; nothing changes.
	for _, bad := range []kadm.AlterConfig{
		{Name: "retention.ms", Value: str("soon")},
		{Name: "no.such.config", Value: str("1")},
		{Name: "min.cleanable.dirty.ratio", Value: str("1.5")},
		{Op: kadm.AppendConfig, Name: "retention.ms", Value: str("5")},
		{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: str("compact")}, // leaves an empty list
	} {
		r := alter(bad)
		if !errors.Is(r.Err, kerr.InvalidConfig) || !strings.Contains(r.ErrMessage, bad.Name) {
			t.Errorf("%v %s=%s: %v %q; want INVALID_CONFIG naming the key", bad.Op, bad.Name, *bad.Value, r.Err, r.ErrMessage)
		}
	}
	if got := describeTopicConfig(t, adm, "ac", "retention.ms"); *got.Value != "1000" {
		t.Fatalf("a refused change altered retention.ms: %s", *got.Value)
	}
	if r := alter(kadm.AlterConfig{Name: "retention.ms", Value: str("1")}, kadm.AlterConfig{Name: "retention.ms", Value: str("2")}); !errors.Is(r.Err, kerr.InvalidRequest) {
		t.Fatalf("duplicate key: %v", r.Err)
	}

	// Validate only: checked, not applied.
	resps, err := adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: str("7")}}, "ac")
	if err != nil || resps[0].Err != nil {
		t.Fatalf("validate only: %v %v", err, resps[0].Err)
	}
	if got := describeTopicConfig(t, adm, "ac", "retention.ms"); *got.Value != "1000" {
		t.Fatalf("validate-only changed retention.ms to %s", *got.Value)
	}

	// DELETE: back to the default.
	if r := alter(kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"}); r.Err != nil {
		t.Fatalf("delete: %v %s", r.Err, r.ErrMessage)
	}
	if got := describeTopicConfig(t, adm, "ac", "retention.ms"); *got.Value != "604800000" || got.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms after DELETE: %s source %v", *got.Value, got.Source)
	}
	if part.Config().Cleanup.RetentionMs != 604800000 {
		t.Fatalf("live retention.ms after DELETE: %d", part.Config().Cleanup.RetentionMs)
	}

	// Unknown topic, broker resource.
	if resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: str("1")}}, "nope"); err != nil || !errors.Is(resps[0].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v %v", err, resps)
	}
	if resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "num.partitions", Value: str("3")}}, 1); err != nil || !errors.Is(resps[0].Err, kerr.InvalidRequest) {
		t.Fatalf("read-only broker config: %v %v", err, resps)
	}
}

// TestAlterConfigsReplacesOverrides: the legacy AlterConfigs replaces the
// whole override set, and a retention change through it takes effect on
// the running broker at the next retention check.
func TestAlterConfigsReplacesOverrides(t *testing.T) {
	c := newRetentionCluster(t)
	ctx := testCtx(t)
	adm := c.admin()
	segBytes := "1024"
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &segBytes, "retention.ms": str("99999999")}, "acl"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	prod := c.client(kgo.DefaultProduceTopic("acl"), kgo.ProducerLinger(0))
	for i := 0; i < 60; i++ {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(strings.Repeat("x", 100))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if c.cleaner.RunOnce() != 0 {
		t.Fatal("retention deleted something before the change")
	}
	resps, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: &segBytes}, {Name: "retention.bytes", Value: str("0")}}, "acl")
	if err != nil || resps[0].Err != nil {
		t.Fatalf("AlterConfigs: %v %v %s", err, resps[0].Err, resps[0].ErrMessage)
	}
	if got := describeTopicConfig(t, adm, "acl", "retention.ms"); got.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms not in the new set should be back to its default, is %s (source %v)", *got.Value, got.Source)
	}
	if got := describeTopicConfig(t, adm, "acl", "retention.bytes"); *got.Value != "0" || got.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("retention.bytes: %s (source %v)", *got.Value, got.Source)
	}
	c.cleaner.RunOnce()
	starts, err := adm.ListStartOffsets(ctx, "acl")
	if err != nil {
		t.Fatal(err)
	}
	if lo, _ := starts.Lookup("acl", 0); lo.Offset != 60 {
		t.Fatalf("log start after retention.bytes=0: %d, want 60", lo.Offset)
	}
	// A null value is refused.
	resps, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.bytes"}}, "acl")
	if err != nil || !errors.Is(resps[0].Err, kerr.InvalidRequest) {
		t.Fatalf("null value: %v %v", err, resps[0].Err)
	}
}
