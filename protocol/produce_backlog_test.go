package protocol

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/replication"
)

// newBacklogCluster is one broker checking backlogs every 50 ms, with its
// metrics on reg.
func newBacklogCluster(t *testing.T, reg prometheus.Registerer) *testCluster {
	t.Helper()
	var b *replication.Broker
	s, addr := startServerWith(t, Config{Registerer: reg, BacklogCheckInterval: 50 * time.Millisecond}, func(p int32) *replication.Broker {
		b = testBroker(t, func(c *replication.BrokerConfig) { c.AdvertisedPort = p })
		return b
	})
	return &testCluster{t: t, b: b, s: s, addr: addr, broker: b}
}

func createBacklogTopic(t *testing.T, c *testCluster, topic, group string, partitions int32, maxRecords string) {
	t.Helper()
	resp, err := c.admin().CreateTopic(testCtx(t), partitions, 1, map[string]*string{
		"strata.produce.backlog.group": &group, "strata.produce.backlog.max.records": &maxRecords,
	}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
}

// produceRaw sends one batch of one record with the newest Produce version and returns
// the partition's error code and message.
func produceRaw(t *testing.T, c *testCluster, cl *kgo.Client, topic string) (int16, string) {
	t.Helper()
	ti, _ := c.b.Topic(topic)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, ti.ID // kgo sends the newest version both speak
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = makeBatch(batchOpts{producerID: -1, producerEpoch: -1, baseSequence: -1}, recordSpec{value: []byte("raw")})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	msg := ""
	if p.ErrorMessage != nil {
		msg = *p.ErrorMessage
	}
	return p.ErrorCode, msg
}

// waitRefused waits until a raw produce to topic is refused with
// NOT_ENOUGH_REPLICAS (the check runs every 50 ms) and returns the message.
func waitRefused(t *testing.T, c *testCluster, cl *kgo.Client, topic string) string {
	t.Helper()
	var code int16
	var msg string
	if !testwait.Until(30*time.Second, func() bool {
		code, msg = produceRaw(t, c, cl, topic)
		return code == kerr.NotEnoughReplicas.Code
	}) {
		t.Fatalf("produce to %s over its backlog limit: %v %q", topic, kerr.ErrorForCode(code), msg)
	}
	return msg
}

// The overflow rule with a consumer group, end to end with franz-go:
// once group "workers" has more than 10 records not consumed, producing
// to "jobs" is refused with NOT_ENOUGH_REPLICAS naming the group and the
// limit (a producer with a delivery timeout fails; one with retries
// waits), the refusals are counted, and when the consumer commits its way
// through the backlog the waiting producer's record is written and new
// ones go through.
func TestProduceBacklogConsumerGroup(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := newBacklogCluster(t, reg)
	createBacklogTopic(t, c, "jobs", "workers", 2, "10")
	// franz-go retries a refused batch after a metadata refresh (at most
	// every 5 s, kgo.MetadataMinAge): the waits below take seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	prod := c.client(kgo.DefaultProduceTopic("jobs"))
	// Nobody has consumed: all 12 records are backlog (> 10).
	for i := 0; i < 12; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("job")}).FirstErr(); err != nil {
			t.Fatalf("record %d, below the limit: %v", i, err)
		}
	}
	msg := waitRefused(t, c, prod, "jobs")
	for _, want := range []string{"group workers", "records not consumed", "strata.produce.backlog.max.records=10"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("message %q does not say %q", msg, want)
		}
	}
	impatient := c.client(kgo.DefaultProduceTopic("jobs"), kgo.RecordDeliveryTimeout(time.Second))
	if err := impatient.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); err == nil {
		t.Fatal("a producer with a 1 s delivery timeout got through while the backlog is over the limit")
	}
	if n := testutil.ToFloat64(c.s.backlog.refusals.WithLabelValues("jobs")); n < 2 {
		t.Fatalf("strata_produce_backlog_refusals_total{topic=jobs} = %v", n)
	}
	var written atomic.Bool
	waitErr := make(chan error, 1)
	prod.Produce(ctx, &kgo.Record{Value: []byte("patient")}, func(_ *kgo.Record, err error) {
		written.Store(err == nil)
		waitErr <- err
	})

	// The consumer catches up and commits.
	cons := c.client(kgo.ConsumerGroup("workers"), kgo.ConsumeTopics("jobs"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	// Everything written so far: the 12 and the raw batches that got
	// through before the first check saw the backlog.
	var total int64
	for _, p := range []int32{0, 1} {
		lp, err := c.b.Partition("jobs", p)
		if err != nil {
			t.Fatal(err)
		}
		total += lp.Offsets().HighWatermark
	}
	consumed := int64(0)
	for consumed < total {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		consumed += int64(fs.NumRecords())
	}
	if written.Load() {
		t.Fatal("the waiting producer got through before the group caught up")
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waitErr:
		if err != nil {
			t.Fatalf("the waiting producer after the group caught up: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiting producer never got through after the group caught up")
	}
	if err := impatient.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("after the group caught up: %v", err)
	}
	if mfs, err := reg.Gather(); err != nil {
		t.Fatal(err)
	} else {
		found := false
		for _, mf := range mfs {
			found = found || mf.GetName() == "strata_produce_backlog_records"
		}
		if !found {
			t.Fatal("strata_produce_backlog_records not exported")
		}
	}
}

// The same with a share group: the backlog is the records not
// acknowledged; accepting them lets producers through again.
func TestProduceBacklogShareGroup(t *testing.T) {
	c := newBacklogCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	setGroupEarliest(t, c, "sharers")
	createBacklogTopic(t, c, "tasks", "sharers", 1, "5")
	prod := c.client(kgo.DefaultProduceTopic("tasks"))
	for i := 0; i < 8; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("task")}).FirstErr(); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	msg := waitRefused(t, c, prod, "tasks")
	if !strings.Contains(msg, "group sharers") {
		t.Fatalf("message %q", msg)
	}
	// Acquire without acknowledging: still backlog.
	member := c.client(kgo.ShareGroup("sharers"), kgo.ConsumeTopics("tasks"))
	var recs []*kgo.Record
	for len(recs) < 8 {
		fs := member.PollRecords(ctx, 100)
		if err := fs.Err0(); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		recs = append(recs, fs.Records()...)
	}
	if code, _ := produceRaw(t, c, prod, "tasks"); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("with the records acquired but not acknowledged: %v", kerr.ErrorForCode(code))
	}
	for _, r := range recs {
		r.Ack(kgo.AckAccept)
	}
	if !testwait.Until(30*time.Second, func() bool {
		// The acknowledgements go with the next poll.
		pollCtx, pollCancel := context.WithTimeout(ctx, 200*time.Millisecond)
		member.PollRecords(pollCtx, 100).EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept) })
		pollCancel()
		code, _ := produceRaw(t, c, prod, "tasks")
		return code == 0
	}) {
		t.Fatal("producing never resumed after the share group acknowledged its records")
	}
}

// setGroupEarliest sets share.auto.offset.reset=earliest on a group.
func setGroupEarliest(t *testing.T, c *testCluster, g string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	r.Configs = append(r.Configs, cfg)
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(testCtx(t), c.client())
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("group config of %s: %v %+v", g, err, resp)
	}
}

// BenchmarkProduceBacklog: the cost of the overflow rule on the produce
// path, side by side in one run: kgo produces 1 KiB records (as
// BenchmarkProduce) to a topic without the rule, and to one whose group
// may lag by more than it ever will (the batch looks the topic up in the
// published map; the backlog is recomputed every second, as by default).
// Compare records/s of the two sub-benchmarks.
func BenchmarkProduceBacklog(b *testing.B) {
	for _, guarded := range []bool{false, true} {
		name := "none"
		if guarded {
			name = "guarded-under-limit"
		}
		b.Run(name, func(b *testing.B) {
			var bk *replication.Broker
			s, addr := startServerWith(b, Config{BacklogCheckInterval: time.Second}, func(p int32) *replication.Broker {
				bk = testBroker(b, func(c *replication.BrokerConfig) { c.AdvertisedPort = p })
				return bk
			})
			c := &testCluster{t: b, b: bk, s: s, addr: addr, broker: bk}
			var cfgs map[string]*string
			if guarded {
				group, limit := "readers", "1000000000000"
				cfgs = map[string]*string{"strata.produce.backlog.group": &group, "strata.produce.backlog.max.records": &limit}
			}
			if r, err := c.admin().CreateTopic(context.Background(), 1, 1, cfgs, "bench"); err != nil || r.Err != nil {
				b.Fatal(err, r.Err)
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
