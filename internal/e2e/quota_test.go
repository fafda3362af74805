package e2e

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestQuotasEndToEnd: the strata binary with quota.window.num=2 (a burst
// of one second's quota before the first throttle); producer_byte_rate
// on a client ID and consumer_byte_rate on the PLAINTEXT user ANONYMOUS,
// set with kadm. A franz-go producer and then a consumer going as fast as
// they can are given throttle_time_ms > 0, and what they get through in
// the 8 s after their first throttle is at most 1.2x the quota (bounded
// from above only: a loaded machine may be slower). Not in -short.
func TestQuotasEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker and measures rates for seconds")
	}
	const rate = 256 << 10
	b := startBroker(t, "", "--set", "quota.window.num=2", "--set", "quota.window.size.seconds=1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(b.client())
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "e2e-quota"); err != nil {
		t.Fatal(err)
	}
	producer, anon := "e2e-producer", "ANONYMOUS"
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &producer}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: rate}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &anon}, {Type: "client-id", Name: nil}}, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: rate}}},
	})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("AlterClientQuotas: %v %+v", err, res)
	}

	// Produce as fast as franz-go goes, 8 KiB incompressible records.
	var prodThrottle atomic.Int64
	var acked atomic.Int64
	p := b.client(kgo.ClientID(producer), kgo.DefaultProduceTopic("e2e-quota"), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(64<<10), kgo.MaxBufferedRecords(64), kgo.WithHooks(firstThrottle{&prodThrottle}))
	pctx, pstop := context.WithCancel(ctx)
	pdone := make(chan struct{})
	go func() {
		defer close(pdone)
		for pctx.Err() == nil {
			v := make([]byte, 8<<10)
			rand.Read(v)
			p.Produce(pctx, &kgo.Record{Value: v}, func(r *kgo.Record, err error) {
				if err == nil {
					acked.Add(int64(len(r.Value)))
				}
			})
		}
	}()
	got := rateAfterThrottle(t, &prodThrottle, &acked, int64(8*rate)) // about 8 s at the quota
	pstop()
	<-pdone
	t.Logf("produce: %.0f B/s against producer_byte_rate=%d (%.2fx)", got, rate, got/rate)
	if got > 1.2*rate {
		t.Fatalf("produce rate %.0f B/s is above 1.2x the quota %d", got, rate)
	}

	// Consume the backlog (at least 2 MiB by now) as fast as franz-go goes.
	testwait.For(t, time.Minute, func() bool { return acked.Load() >= 2<<20 }, "less than 2 MiB produced")
	var consThrottle atomic.Int64
	var read atomic.Int64
	c := b.client(kgo.ClientID("e2e-consumer"), kgo.ConsumeTopics("e2e-quota"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.WithHooks(firstThrottle{&consThrottle}))
	cctx, cstop := context.WithCancel(ctx)
	cdone := make(chan struct{})
	go func() {
		defer close(cdone)
		for cctx.Err() == nil {
			c.PollFetches(cctx).EachRecord(func(r *kgo.Record) { read.Add(int64(len(r.Value))) })
		}
	}()
	got = rateAfterThrottle(t, &consThrottle, &read, int64(8*rate))
	cstop()
	<-cdone
	t.Logf("fetch: %.0f B/s against consumer_byte_rate=%d (%.2fx)", got, rate, got/rate)
	if got > 1.2*rate {
		t.Fatalf("fetch rate %.0f B/s is above 1.2x the quota %d", got, rate)
	}
}

// firstThrottle records the largest throttle time a client is given.
type firstThrottle struct{ ms *atomic.Int64 }

func (h firstThrottle) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d.Milliseconds() > h.ms.Load() {
		h.ms.Store(d.Milliseconds())
	}
}

// rateAfterThrottle waits for the first throttle, then until n more
// bytes moved (bytes counts them), failing when either never comes, and
// returns the rate per second they moved at.
func rateAfterThrottle(t *testing.T, throttle, bytes *atomic.Int64, n int64) float64 {
	t.Helper()
	testwait.For(t, time.Minute, func() bool { return throttle.Load() > 0 }, "never given throttle_time_ms > 0")
	b0, t0 := bytes.Load(), time.Now()
	testwait.For(t, 2*time.Minute, func() bool { return bytes.Load()-b0 >= n }, "%d bytes not moved after the first throttle", n)
	return float64(bytes.Load()-b0) / time.Since(t0).Seconds()
}
