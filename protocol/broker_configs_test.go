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

// describeBrokerConfig returns one config of BROKER resource "1" (or ""
// with broker < 0), with synonyms.
func describeBrokerConfig(t *testing.T, adm *kadm.Client, broker int32, name string) (kadm.Config, bool) {
	t.Helper()
	var brokers []int32
	if broker >= 0 {
		brokers = []int32{broker}
	}
	rcs, err := adm.DescribeBrokerConfigs(testCtx(t), brokers...)
	if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("describe broker %d: %v %+v", broker, err, rcs)
	}
	for _, c := range rcs[0].Configs {
		if c.Key == name {
			return c, true
		}
	}
	return kadm.Config{}, false
}

func synonymsString(c kadm.Config) string {
	var parts []string
	for _, s := range c.Synonyms {
		v := "null"
		if s.Value != nil {
			v = *s.Value
		}
		parts = append(parts, s.Source.String()+":"+s.Key+"="+v)
	}
	return strings.Join(parts, " ")
}

// TestDynamicBrokerRetentionDeletesSegments: kadm changes the broker's
// log.retention.bytes on a running broker (IncrementalAlterConfigs on
// BROKER "1"), and the next retention check deletes the old segments of a
// topic that does not override it -- and not those of a topic whose own
// retention.bytes still wins. DescribeConfigs reports the layers with
// their sources in Kafka's order, and deleting the setting goes back.
func TestDynamicBrokerRetentionDeletesSegments(t *testing.T) {
	c := newRetentionCluster(t)
	ctx := testCtx(t)
	adm := c.admin()
	seg := str("1024")
	for name, cfg := range map[string]map[string]*string{
		"dyn":  {"segment.bytes": seg},
		"keep": {"segment.bytes": seg, "retention.bytes": str("-1")},
	} {
		if resp, err := adm.CreateTopic(ctx, 1, 1, cfg, name); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", name, err, resp.Err)
		}
	}
	for _, topic := range []string{"dyn", "keep"} {
		prod := c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
		for i := 0; i < 60; i++ {
			if err := prod.ProduceSync(ctx, kgo.StringRecord(strings.Repeat("x", 100))).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := c.cleaner.RunOnce(); n != 0 {
		t.Fatalf("retention deleted %d segments before the change", n)
	}

	// A cluster-wide default first (legacy AlterConfigs on BROKER ""),
	// then this broker's own value on top (incremental, BROKER "1").
	if resps, err := adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "log.retention.bytes", Value: str("999999999")}}); err != nil || resps[0].Err != nil {
		t.Fatalf("alter default: %v %+v", err, resps)
	}
	if resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.bytes", Value: str("0")}}, 1); err != nil || resps[0].Err != nil {
		t.Fatalf("alter broker 1: %v %+v", err, resps)
	}
	got, ok := describeBrokerConfig(t, adm, 1, "log.retention.bytes")
	if !ok || got.Value == nil || *got.Value != "0" || got.Source != kmsg.ConfigSourceDynamicBrokerConfig || got.Sensitive {
		t.Fatalf("broker 1 log.retention.bytes: %+v", got)
	}
	want := "DYNAMIC_BROKER_CONFIG:log.retention.bytes=0 DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=999999999 DEFAULT_CONFIG:log.retention.bytes=-1"
	if s := synonymsString(got); s != want {
		t.Fatalf("synonyms:\n got %s\nwant %s", s, want)
	}
	def, ok := describeBrokerConfig(t, adm, -1, "log.retention.bytes")
	if !ok || *def.Value != "999999999" || def.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("default log.retention.bytes: %+v", def)
	}
	if rb := describeTopicConfig(t, adm, "dyn", "retention.bytes"); *rb.Value != "0" || rb.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("topic dyn retention.bytes: %s %v", *rb.Value, rb.Source)
	}

	c.cleaner.RunOnce()
	starts, err := adm.ListStartOffsets(ctx, "dyn", "keep")
	if err != nil {
		t.Fatal(err)
	}
	if lo, _ := starts.Lookup("dyn", 0); lo.Offset == 0 {
		t.Fatal("dynamic log.retention.bytes=0 deleted no segment of dyn")
	}
	if lo, _ := starts.Lookup("keep", 0); lo.Offset != 0 {
		t.Fatalf("topic override retention.bytes=-1 lost to the broker config: log start %d", lo.Offset)
	}

	// DELETE falls back to the cluster default.
	if resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.retention.bytes"}}, 1); err != nil || resps[0].Err != nil {
		t.Fatalf("delete: %v %+v", err, resps)
	}
	if p := c.logs.Get(log.TopicPartition{Topic: "dyn", Partition: 0}); p == nil || p.Config().Cleanup.RetentionBytes != 999999999 {
		t.Fatalf("live retention.bytes after DELETE: %+v", p.Config().Cleanup)
	}
}

// TestDynamicBrokerConfigErrors: read-only settings INVALID_REQUEST as
// Kafka; bad values and unknown keys INVALID_CONFIG with a message naming
// the key; APPEND on a list setting; validate-only changes nothing.
func TestDynamicBrokerConfigErrors(t *testing.T) {
	c := newRetentionCluster(t)
	ctx := testCtx(t)
	adm := c.admin()
	for _, tc := range []struct {
		cfg  kadm.AlterConfig
		want error
		msg  string
	}{
		{kadm.AlterConfig{Name: "num.partitions", Value: str("4")}, kerr.InvalidRequest, "num.partitions"},
		{kadm.AlterConfig{Name: "log.retention.hours", Value: str("1")}, kerr.InvalidRequest, "log.retention.hours"},
		{kadm.AlterConfig{Name: "log.retention.ms", Value: str("soon")}, kerr.InvalidConfig, "log.retention.ms"},
		{kadm.AlterConfig{Name: "log.segment.bytes", Value: str("1")}, kerr.InvalidConfig, "log.segment.bytes"},
		{kadm.AlterConfig{Name: "no.such.setting", Value: str("1")}, kerr.InvalidConfig, "no.such.setting"},
		{kadm.AlterConfig{Op: kadm.AppendConfig, Name: "log.retention.ms", Value: str("1")}, kerr.InvalidConfig, "not a list"},
	} {
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{tc.cfg}, 1)
		if err != nil || !errors.Is(resps[0].Err, tc.want) || !strings.Contains(resps[0].ErrMessage, tc.msg) {
			t.Errorf("%s: %v %v %q", tc.cfg.Name, err, resps[0].Err, resps[0].ErrMessage)
		}
	}
	// A resource name that is not a broker ID.
	raw := dialRaw(t, c.addr)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, "one"
	req.Resources = append(req.Resources, r)
	if resp := raw.roundTrip(req).(*kmsg.IncrementalAlterConfigsResponse); resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("broker resource \"one\": %v", kerr.ErrorForCode(resp.Resources[0].ErrorCode))
	}

	// APPEND on the list setting starts from the effective value.
	if resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "log.cleanup.policy", Value: str("compact")}}, 1); err != nil || resps[0].Err != nil {
		t.Fatalf("append: %v %+v", err, resps)
	}
	if got, _ := describeBrokerConfig(t, adm, 1, "log.cleanup.policy"); *got.Value != "delete,compact" || got.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("log.cleanup.policy after append: %+v", got)
	}
	// Validate only.
	if resps, err := adm.ValidateAlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: str("5")}}, 1); err != nil || resps[0].Err != nil {
		t.Fatalf("validate only: %v %+v", err, resps)
	}
	if got, _ := describeBrokerConfig(t, adm, 1, "log.retention.ms"); got.Value != nil || got.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("validate-only changed log.retention.ms: %+v", got)
	}
	// Read-only flags: the dynamic settings are writable, the rest not.
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	dr.ConfigNames = []string{"num.partitions", "log.retention.ms", "log.retention.hours"}
	dreq.Resources = append(dreq.Resources, dr)
	wantRO := map[string]bool{"num.partitions": true, "log.retention.ms": false, "log.retention.hours": true}
	dresp := raw.roundTrip(dreq).(*kmsg.DescribeConfigsResponse)
	if len(dresp.Resources) != 1 || len(dresp.Resources[0].Configs) != 3 {
		t.Fatalf("describe: %+v", dresp)
	}
	for _, cfg := range dresp.Resources[0].Configs {
		if cfg.ReadOnly != wantRO[cfg.Name] {
			t.Errorf("%s read-only %v", cfg.Name, cfg.ReadOnly)
		}
	}
}
