package protocol

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/quota"
	"github.com/strata-io/strata/replication"
)

// newQuotaCluster is one broker measuring quotas over w.
func newQuotaCluster(t *testing.T, w quota.Window) *testCluster {
	t.Helper()
	var b *replication.Broker
	s, addr := startServerWith(t, Config{QuotaWindow: w}, func(p int32) *replication.Broker {
		b = testBroker(t, func(c *replication.BrokerConfig) { c.AdvertisedPort = p })
		return b
	})
	return &testCluster{t: t, b: b, s: s, addr: addr, broker: b}
}

func setQuota(t *testing.T, adm *kadm.Client, entity kadm.ClientQuotaEntity, key string, v float64) {
	t.Helper()
	res, err := adm.AlterClientQuotas(testCtx(t), []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: v}}}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("AlterClientQuotas %v %s=%v: %v %+v", entity, key, v, err, res)
	}
}

// TestClientQuotasAlterDescribe: AlterClientQuotas and
// DescribeClientQuotas through kadm with Kafka's entity types, defaults,
// strict matching, validate_only and per-entry errors.
func TestClientQuotasAlterDescribe(t *testing.T) {
	c := newQuotaCluster(t, quota.DefaultWindow)
	adm := c.admin()
	ctx := testCtx(t)
	alice, app := "alice", "app"
	entries := []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1048576}, {Key: "request_percentage", Value: 25.5}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}, {Type: "client-id", Name: nil}}, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 2097152}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &app}}, Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 10}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: kmsg.StringPtr("10.1.2.3")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 100}}},
	}
	// validate_only commits nothing.
	res, err := adm.ValidateAlterClientQuotas(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("validate %v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
	if got, err := adm.DescribeClientQuotas(ctx, false, nil); err != nil || len(got) != 0 {
		t.Fatalf("after validate_only: %v %v", got, err)
	}
	res, err = adm.AlterClientQuotas(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter %v: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
	all, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(all) != 4 {
		t.Fatalf("describe all: %v %v", all, err)
	}
	got, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &alice, MatchType: 0}})
	if err != nil || len(got) != 1 || len(got[0].Values) != 2 {
		t.Fatalf("strict user=alice: %+v %v", got, err)
	}
	for _, v := range got[0].Values {
		if v.Key == "request_percentage" && v.Value != 25.5 || v.Key == "producer_byte_rate" && v.Value != 1048576 {
			t.Fatalf("values %+v", got[0].Values)
		}
	}
	got, err = adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &alice, MatchType: 0}})
	if err != nil || len(got) != 2 {
		t.Fatalf("user=alice, not strict: %+v %v", got, err)
	}
	got, err = adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 1}})
	if err != nil || len(got) != 1 || got[0].Entity[1].Name != nil {
		t.Fatalf("client-id=<default>: %+v %v", got, err)
	}
	// Bad filters: INVALID_REQUEST; unknown entity type: UNSUPPORTED_VERSION.
	if _, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 0}}); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("exact without a name: %v", err)
	}
	if _, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "group", MatchType: 2}}); !errors.Is(err, kerr.UnsupportedVersion) {
		t.Fatalf("unknown type: %v", err)
	}
	// Per-entry errors; the valid entry in the same request commits.
	bob := "bob"
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &bob}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1.5}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &bob}, {Type: "ip", Name: kmsg.StringPtr("10.0.0.1")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "group", Name: &bob}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &bob}}, Ops: []kadm.AlterClientQuotaOp{{Key: "bogus", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: kmsg.StringPtr("")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}}, Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Remove: true}}},
	})
	if err != nil || len(res) != 6 {
		t.Fatal(err, res)
	}
	for i, r := range res {
		want := kerr.InvalidRequest
		if i == 5 {
			want = nil
		}
		if !errors.Is(r.Err, want) && !(want == nil && r.Err == nil) {
			t.Errorf("entry %d %v: %v %s", i, r.Entity, r.Err, r.ErrMessage)
		}
	}
	if !strings.Contains(res[0].ErrMessage, "must be a Long value") || !strings.Contains(res[3].ErrMessage, "Invalid configuration key bogus") {
		t.Errorf("messages: %q %q", res[0].ErrMessage, res[3].ErrMessage)
	}
	if q := c.b.ClientQuotas().Get(quota.Entity{User: quota.Named("alice")}); len(q) != 1 || q[quota.ProducerByteRate] != 1048576 {
		t.Fatalf("alice after removing request_percentage: %v", q)
	}
}

// throttleHook records the throttle times the client is given.
type throttleHook struct {
	mu    sync.Mutex
	first time.Time
	n     int
	maxMs int64
}

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		h.first = time.Now()
	}
	h.n++
	h.maxMs = max(h.maxMs, d.Milliseconds())
}

func (h *throttleHook) since() (time.Time, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.first, h.n
}

// measure waits until the client is first throttled, then counts the
// bytes add reports for measureFor and returns the rate per second.
func measureRate(t *testing.T, h *throttleHook, bytes *atomic.Int64, measureFor time.Duration) float64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, n := h.since(); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never throttled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b0, t0 := bytes.Load(), time.Now()
	time.Sleep(measureFor) // the measurement interval itself, not a wait for a condition
	return float64(bytes.Load()-b0) / time.Since(t0).Seconds()
}

// TestProduceQuotaThrottles: with producer_byte_rate set for a client ID,
// a franz-go producer going as fast as it can is given throttle_time_ms
// > 0 and gets through at most 1.2x the quota once throttling began
// (KIP-219: throttle time in the response, then the connection muted).
func TestProduceQuotaThrottles(t *testing.T) {
	if testing.Short() {
		t.Skip("measures a rate for seconds")
	}
	const rate = 256 << 10
	// Two samples of 1 s (quota.window.num=2): the burst allowed before
	// the first throttle is one second of the quota, not ten.
	c := newQuotaCluster(t, quota.Window{Samples: 2, SizeMs: 1000})
	c.createTopic("q-produce", 1)
	setQuota(t, c.admin(), kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsg.StringPtr("fast-producer")}}, "producer_byte_rate", rate)
	h := &throttleHook{}
	cl := c.client(kgo.ClientID("fast-producer"), kgo.WithHooks(h), kgo.DefaultProduceTopic("q-produce"),
		kgo.ProducerBatchMaxBytes(64<<10), kgo.MaxBufferedRecords(64), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var acked atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			val := make([]byte, 8<<10)
			rand.Read(val) // incompressible: the quota counts bytes on the wire
			cl.Produce(ctx, &kgo.Record{Value: val}, func(r *kgo.Record, err error) {
				if err == nil {
					acked.Add(int64(len(r.Value)))
				}
			})
		}
	}()
	got := measureRate(t, h, &acked, 8*time.Second)
	cancel()
	<-done
	_, n := h.since()
	t.Logf("produce: %.0f B/s against a quota of %d B/s (%.2fx), %d throttled responses, max throttle %d ms", got, rate, got/rate, n, h.maxMs)
	if got > 1.2*rate {
		t.Fatalf("produce rate %.0f B/s is above 1.2x the quota %d", got, rate)
	}
}

// TestFetchQuotaThrottles: with consumer_byte_rate set for a user (the
// PLAINTEXT listener's ANONYMOUS), a franz-go consumer reading a backlog
// is given throttle_time_ms > 0 and reads at most 1.2x the quota.
func TestFetchQuotaThrottles(t *testing.T) {
	if testing.Short() {
		t.Skip("measures a rate for seconds")
	}
	const rate = 256 << 10
	c := newQuotaCluster(t, quota.Window{Samples: 2, SizeMs: 1000})
	c.createTopic("q-fetch", 1)
	p := c.client(kgo.DefaultProduceTopic("q-fetch"), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(16<<10))
	var recs []*kgo.Record
	for i := 0; i < 1024; i++ { // 8 MiB of backlog: more than the test reads
		val := make([]byte, 8<<10)
		rand.Read(val) // incompressible: the quota counts bytes on the wire
		recs = append(recs, &kgo.Record{Value: val})
	}
	if err := p.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	setQuota(t, c.admin(), kadm.ClientQuotaEntity{{Type: "user", Name: kmsg.StringPtr("ANONYMOUS")}}, "consumer_byte_rate", rate)
	h := &throttleHook{}
	cl := c.client(kgo.ClientID("slow-consumer"), kgo.WithHooks(h), kgo.ConsumeTopics("q-fetch"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var read atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { read.Add(int64(len(r.Value))) })
		}
	}()
	got := measureRate(t, h, &read, 8*time.Second)
	cancel()
	<-done
	_, n := h.since()
	t.Logf("fetch: %.0f B/s against a quota of %d B/s (%.2fx), %d throttled responses, max throttle %d ms", got, rate, got/rate, n, h.maxMs)
	if got > 1.2*rate {
		t.Fatalf("fetch rate %.0f B/s is above 1.2x the quota %d", got, rate)
	}
}

// TestControllerMutationQuota (KIP-599): under controller_mutation_rate,
// CreateTopics v6+ refuses a topic with THROTTLING_QUOTA_EXCEEDED once
// the bucket is below zero, with a throttle time; DeleteTopics too.
func TestControllerMutationQuota(t *testing.T) {
	c := newQuotaCluster(t, quota.Window{Samples: 2, SizeMs: 1000})
	adm := c.admin()
	ctx := testCtx(t)
	setQuota(t, adm, kadm.ClientQuotaEntity{{Type: "client-id", Name: nil}}, "controller_mutation_rate", 1)
	// Burst: 1 * 2 * 1 s = 2 partitions. A 5-partition topic is taken
	// (the bucket was not below zero), the next is refused.
	raw := dialRaw(t, c.addr)
	create := func(name string, parts int32) *kmsg.CreateTopicsResponse {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		req.TimeoutMillis = 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, 1
		req.Topics = append(req.Topics, rt)
		return raw.roundTrip(req).(*kmsg.CreateTopicsResponse)
	}
	if r := create("mut-a", 5); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("first topic: %v", kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
	r := create("mut-b", 1)
	if r.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || r.ThrottleMillis <= 0 {
		t.Fatalf("second topic: %v, throttle %d", kerr.ErrorForCode(r.Topics[0].ErrorCode), r.ThrottleMillis)
	}
	if _, ok := c.b.Topic("mut-b"); ok {
		t.Fatal("a refused topic was created")
	}
	// DeleteTopics from another client ID (its own bucket) goes ahead.
	if _, err := adm.DeleteTopic(ctx, "mut-a"); err != nil {
		t.Fatal(err)
	}
	_ = ctx
}

// TestRequestPercentageThrottles: request_percentage 0.01 (a hundredth
// of a percent of a thread) throttles a client sending metadata requests.
func TestRequestPercentageThrottles(t *testing.T) {
	c := newQuotaCluster(t, quota.Window{Samples: 2, SizeMs: 1000})
	setQuota(t, c.admin(), kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsg.StringPtr("busy")}}, "request_percentage", 0.01)
	raw := dialRaw(t, c.addr)
	raw.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID("busy"))
	var th int32
	for i := 0; i < 200 && th == 0; i++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		th = raw.roundTrip(req).(*kmsg.MetadataResponse).ThrottleMillis
	}
	if th <= 0 {
		t.Fatal("200 metadata requests at request_percentage=0.01 were never throttled")
	}
	// The connection is muted: the next request is answered only after
	// the throttle time.
	start := time.Now()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	raw.roundTrip(req)
	if took := time.Since(start); took < time.Duration(th)*time.Millisecond*9/10 {
		t.Fatalf("the request after a %d ms throttle was answered in %v", th, took)
	}
}
