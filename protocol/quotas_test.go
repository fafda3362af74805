package protocol

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/quota"
	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/replication"
)

// newQuotaCluster is one broker measuring quotas over w.
func newQuotaCluster(t *testing.T, w quota.Window) *testCluster {
	t.Helper()
	return newQuotaClusterReg(t, w, nil)
}

func newQuotaClusterReg(t *testing.T, w quota.Window, reg prometheus.Registerer) *testCluster {
	t.Helper()
	var b *replication.Broker
	s, addr := startServerWith(t, Config{QuotaWindow: w, Registerer: reg}, func(p int32) *replication.Broker {
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

// measureRate waits until the client is first throttled, then until it
// has moved n more bytes (bytes counts them), failing when either never
// comes, and returns the rate per second it moved them at.
func measureRate(t *testing.T, h *throttleHook, bytes *atomic.Int64, n int64) float64 {
	t.Helper()
	testwait.For(t, 60*time.Second, func() bool { _, k := h.since(); return k > 0 }, "never throttled")
	b0, t0 := bytes.Load(), time.Now()
	testwait.For(t, 2*time.Minute, func() bool { return bytes.Load()-b0 >= n }, "%d bytes not moved after the first throttle", n)
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
	got := measureRate(t, h, &acked, int64(8*rate)) // about 8 s at the quota
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
// is given throttle_time_ms > 0 (a throttled fetch answered empty, as
// Kafka's) and reads at most 1.2x the quota.
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
	got := measureRate(t, h, &read, int64(8*rate)) // about 8 s at the quota
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
// of a percent of a thread) throttles a client sending metadata requests;
// the throttle is counted on /metrics by quota type.
func TestRequestPercentageThrottles(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := newQuotaClusterReg(t, quota.Window{Samples: 2, SizeMs: 1000}, reg)
	defer func() {
		if t.Failed() {
			return
		}
		if n := histCount(t, reg, "kafka_server_quota_throttle_time_seconds", "Request"); n < 1 {
			t.Fatalf("kafka_server_quota_throttle_time_seconds{quota_type=Request} count %d", n)
		}
	}()
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

// histCount is the sample count of a histogram series with label
// quota_type=typ.
func histCount(t *testing.T, reg *prometheus.Registry, name, typ string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "quota_type" && l.GetValue() == typ {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// Versions from before KIP-219 (Metadata v5: Kafka throttled them by
// holding the response back) get their response after the throttle time.
func TestQuotaThrottleBeforeKIP219HoldsResponse(t *testing.T) {
	c := newQuotaCluster(t, quota.Window{Samples: 2, SizeMs: 1000})
	setQuota(t, c.admin(), kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsg.StringPtr("old")}}, "request_percentage", 0.01)
	raw := dialRaw(t, c.addr)
	raw.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID("old"))
	for i := 0; i < 200; i++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 5
		start := time.Now()
		th := raw.roundTrip(req).(*kmsg.MetadataResponse).ThrottleMillis
		if th > 0 {
			if took := time.Since(start); took < time.Duration(th)*time.Millisecond*9/10 {
				t.Fatalf("a v5 response with a %d ms throttle came after %v: not held back", th, took)
			}
			return
		}
	}
	t.Fatal("never throttled")
}

// KIP-599 before the strict versions: CreateTopics v5 over the bucket is
// not refused but throttled.
func TestControllerMutationQuotaPermissive(t *testing.T) {
	c := newQuotaCluster(t, quota.Window{Samples: 2, SizeMs: 1000})
	setQuota(t, c.admin(), kadm.ClientQuotaEntity{{Type: "client-id", Name: nil}}, "controller_mutation_rate", 1)
	raw := dialRaw(t, c.addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 5
	req.TimeoutMillis = 10000
	for _, n := range []string{"perm-a", "perm-b"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 3, 1
		req.Topics = append(req.Topics, rt)
	}
	r := raw.roundTrip(req).(*kmsg.CreateTopicsResponse)
	for _, rt := range r.Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("%s: %v", rt.Topic, kerr.ErrorForCode(rt.ErrorCode))
		}
	}
	// 6 partitions against a burst of 2: 4 below zero at 1/s.
	if r.ThrottleMillis < 3000 || r.ThrottleMillis > 4000 {
		t.Fatalf("throttle %d ms, want about 4000", r.ThrottleMillis)
	}
}

// With ACLs on, DescribeClientQuotas needs DESCRIBE_CONFIGS on the
// cluster and AlterClientQuotas ALTER_CONFIGS (each entry answered
// CLUSTER_AUTHORIZATION_FAILED), as Kafka.
func TestClientQuotasACLs(t *testing.T) {
	nobody := &authz{a: &acl.Authorizer{SuperUsers: map[string]bool{"User:admin": true}}, s: &Server{},
		r: acl.Request{Principal: "User:nobody", Host: "127.0.0.1"}}
	deny, _ := nobody.enforce(kmsg.NewPtrDescribeClientQuotasRequest())
	if deny == nil || deny.(*kmsg.DescribeClientQuotasResponse).ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("DescribeClientQuotas: %+v", deny)
	}
	alter := kmsg.NewPtrAlterClientQuotasRequest()
	for _, u := range []string{"a", "b"} {
		e := kmsg.NewAlterClientQuotasRequestEntry()
		c := kmsg.NewAlterClientQuotasRequestEntryEntity()
		c.Type, c.Name = "user", kmsg.StringPtr(u)
		e.Entity = append(e.Entity, c)
		alter.Entries = append(alter.Entries, e)
	}
	deny, _ = nobody.enforce(alter)
	r, ok := deny.(*kmsg.AlterClientQuotasResponse)
	if !ok || len(r.Entries) != 2 || r.Entries[1].ErrorCode != kerr.ClusterAuthorizationFailed.Code || *r.Entries[1].Entity[0].Name != "b" {
		t.Fatalf("AlterClientQuotas: %+v", deny)
	}
	admin := *nobody
	admin.r.Principal = "User:admin"
	if deny, _ := admin.enforce(alter); deny != nil {
		t.Fatal("a super user is denied AlterClientQuotas")
	}
}

// BenchmarkProduceQuota: the cost of quota accounting on the produce
// path, side by side in one run: kgo produces 1 KiB records (as
// BenchmarkProduce) with no quota configured, and under producer_byte_rate
// and request_percentage quotas too high to throttle (every request
// charged to both). Compare records/s of the two sub-benchmarks.
func BenchmarkProduceQuota(b *testing.B) {
	for _, withQuota := range []bool{false, true} {
		name := "none"
		if withQuota {
			name = "charged-unthrottled"
		}
		b.Run(name, func(b *testing.B) {
			var bk *replication.Broker
			s, addr := startServerWith(b, Config{}, func(p int32) *replication.Broker {
				bk = testBroker(b, func(c *replication.BrokerConfig) { c.AdvertisedPort = p })
				return bk
			})
			c := &testCluster{t: b, b: bk, s: s, addr: addr, broker: bk}
			c.createTopic("bench", 1)
			if withQuota {
				res, err := c.admin().AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{{
					Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: nil}},
					Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1 << 40}, {Key: "request_percentage", Value: 1e9}},
				}})
				if err != nil || res[0].Err != nil {
					b.Fatal(err, res)
				}
			}
			cl := c.client(kgo.DefaultProduceTopic("bench"), kgo.ProducerBatchCompression(kgo.NoCompression()),
				kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(1<<20))
			value := make([]byte, benchRecordBytes)
			ctx := context.Background()
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchRecordBytes)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				cl.Produce(ctx, &kgo.Record{Value: value}, nil)
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// KIP-612: over connection_creation_rate for its IP, a new connection is
// held unread for the throttle time and closed; within it, served.
func TestConnectionCreationRate(t *testing.T) {
	c := newQuotaCluster(t, quota.Window{Samples: 2, SizeMs: 1000})
	res, err := c.admin().AlterClientQuotas(testCtx(t), []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: kmsg.StringPtr("127.0.0.1")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 2}},
	}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	served, refused := 0, 0
	for i := 0; i < 6; i++ {
		nc, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		nc.Write([]byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}) // ApiVersions v0
		var hdr [8]byte
		if _, err := io.ReadFull(nc, hdr[:]); err == nil {
			served++
		} else {
			refused++
		}
		nc.Close()
	}
	if served == 0 || refused == 0 {
		t.Fatalf("%d served, %d refused: want both at 2 connections/s", served, refused)
	}
}

// An AlterClientQuotas naming more than MaxRequestPartitions elements (3
// bytes an entry on the wire, a 64-byte struct decoded) closes the
// connection before it is decoded; one under the limit is answered.
func TestAlterClientQuotasElementLimit(t *testing.T) {
	c := newQuotaCluster(t, quota.DefaultWindow)
	big := kmsg.NewPtrAlterClientQuotasRequest()
	big.Version = 1
	big.ValidateOnly = true
	big.Entries = make([]kmsg.AlterClientQuotasRequestEntry, MaxRequestPartitions+1)
	raw := dialRaw(t, c.addr)
	raw.send(big)
	raw.expectClosed()
	small := kmsg.NewPtrAlterClientQuotasRequest()
	small.Version = 1
	small.ValidateOnly = true
	small.Entries = make([]kmsg.AlterClientQuotasRequestEntry, 10)
	r := dialRaw(t, c.addr).roundTrip(small).(*kmsg.AlterClientQuotasResponse)
	if len(r.Entries) != 10 || r.Entries[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("10 empty entries: %+v", r.Entries)
	}
}
