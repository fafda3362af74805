package protocol

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/groupconfig"
)

// TestShareDelayedMetrics: records released under a redelivery backoff
// are counted (strata_share_redeliveries_delayed_total) and, while they
// wait, shown (strata_share_records_delayed); they are not delivered
// meanwhile.
func TestShareDelayedMetrics(t *testing.T) {
	c := newShareCluster(t, groupconfig.Broker{}, "g")
	c.createTopic("waits", 1)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = groupconfig.BackoffInitialMs, kmsg.StringPtr("600000")
	r.Configs = append(r.Configs, cfg)
	req.Resources = append(req.Resources, r)
	if resp, err := req.RequestWith(testCtx(t), c.client()); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("backoff config: %v %+v", err, resp)
	}
	cl := c.client()
	for i := range 3 {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "waits", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	info, _ := c.b.Topic("waits")
	a := &shareClient{t: t, cl: c.client(), group: "g", member: "m", topicID: info.ID}
	if got, _, _ := acquiredOf(t, a.fetch(500, 0)); got != "0-2#1" {
		t.Fatalf("acquired %q, want 0-2#1", got)
	}
	if r := a.ack(a.epoch, ackSpec{0, 2, []int8{2}}); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("releasing 0-2: %+v", r)
	}
	if got, _, _ := acquiredOf(t, a.fetch(500, 0)); got != "" {
		t.Fatalf("acquired %q while the records wait 10 minutes", got)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(shareCollector{c.s})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "strata_share_redeliveries_delayed_total":
				got[mf.GetName()] += m.GetCounter().GetValue()
			case "strata_share_records_delayed":
				got[mf.GetName()] += m.GetGauge().GetValue()
			}
		}
	}
	if got["strata_share_redeliveries_delayed_total"] != 3 || got["strata_share_records_delayed"] != 3 {
		t.Fatalf("metrics %v, want 3 delayed and 3 waiting", got)
	}
}

// TestShareRecordTTL: with strata.share.record.ttl.ms a batch older than
// the TTL is archived undelivered (strata_share_records_expired_total);
// a young one is delivered.
func TestShareRecordTTL(t *testing.T) {
	c := newShareCluster(t, groupconfig.Broker{}, "g")
	c.createTopic("aging", 1)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = groupconfig.RecordTTLMs, kmsg.StringPtr("60000")
	r.Configs = append(r.Configs, cfg)
	req.Resources = append(req.Resources, r)
	if resp, err := req.RequestWith(testCtx(t), c.client()); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("ttl config: %v %+v", err, resp)
	}
	cl := c.client(kgo.ProducerLinger(0))
	old := time.Now().Add(-time.Hour)
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: "aging", Value: []byte(fmt.Sprint(i)), Timestamp: old})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "aging", Value: []byte("young")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	info, _ := c.b.Topic("aging")
	a := &shareClient{t: t, cl: c.client(), group: "g", member: "m", topicID: info.ID}
	if got, _, _ := acquiredOf(t, a.fetch(500, 0)); got != "5-5#1" {
		t.Fatalf("acquired %q, want only the young record 5-5#1", got)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(shareCollector{c.s})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	expired := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "strata_share_records_expired_total" {
			for _, m := range mf.GetMetric() {
				expired += m.GetCounter().GetValue()
			}
		}
	}
	if expired != 5 {
		t.Fatalf("strata_share_records_expired_total %v, want 5", expired)
	}
}
