package e2e

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestProduceBacklogJavaProducerWaits: what the overflow rule's error
// (NOT_ENOUGH_REPLICAS) does to Kafka's own producer. kafka-console-producer
// (the Java client, with the Java producer's default retries and
// delivery.timeout.ms) sends a
// record while the group is over its limit: it is refused, retries with
// its backoff instead of failing, and is written once the group has
// consumed and committed. Skipped without Java and Kafka's jars.
func TestProduceBacklogJavaProducerWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM")
	}
	r := startToolRunner(t)
	metrics := freeAddr(t)
	b := startBroker(t, "", "--set", "strata.produce.backlog.check.interval.ms=100", "--set", "metrics.listener="+metrics)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(b.client())
	if res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"strata.produce.backlog.group": kadm.StringPtr("workers"), "strata.produce.backlog.max.records": kadm.StringPtr("2"),
	}, "jobs"); err != nil || res.Err != nil {
		t.Fatalf("create jobs: %v %v", err, res.Err)
	}
	prod := b.client(kgo.DefaultProduceTopic("jobs"))
	for i := 0; i < 3; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("early")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	probe := b.client(kgo.DefaultProduceTopic("jobs"), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(5*time.Second))
	testwait.For(t, 30*time.Second, func() bool {
		return errors.Is(probe.ProduceSync(ctx, &kgo.Record{Value: []byte("probe")}).FirstErr(), kerr.NotEnoughReplicas)
	}, "produce never refused over the limit")
	refusals := func() float64 {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, `strata_produce_backlog_refusals_total{topic="jobs"}`) {
				v, _ := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndexByte(line, ' '):]), 64)
				return v
			}
		}
		return -1
	}
	base := refusals()
	if base < 1 {
		t.Fatalf("strata_produce_backlog_refusals_total{topic=jobs} = %v after a refusal", base)
	}
	// Once the Java producer has been refused twice (it is retrying),
	// the group catches up.
	caughtUp := make(chan error, 1)
	go func() {
		if !testwait.Until(2*time.Minute, func() bool { return refusals() >= base+2 }) {
			caughtUp <- errors.New("the Java producer was never refused")
			return
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup("workers"), kgo.ConsumeTopics("jobs"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
		if err != nil {
			caughtUp <- err
			return
		}
		defer cl.Close()
		end, err := adm.ListEndOffsets(ctx, "jobs")
		if err != nil {
			caughtUp <- err
			return
		}
		var total int64
		end.Each(func(o kadm.ListedOffset) { total += o.Offset })
		for consumed := int64(0); consumed < total; {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				caughtUp <- err
				return
			}
			consumed += int64(fs.NumRecords())
		}
		caughtUp <- cl.CommitUncommittedOffsets(ctx)
	}()
	start := time.Now()
	// The console producer caps retries at 3 (--message-send-max-retries);
	// the Java producer's own default is unlimited, bounded by
	// delivery.timeout.ms (2 minutes).
	r.okIn("late\n", "kafka-console-producer", "--bootstrap-server", b.addr, "--topic", "jobs",
		"--producer-property", "retries=2147483647", "--producer-property", "delivery.timeout.ms=120000")
	t.Logf("kafka-console-producer returned after %v", time.Since(start))
	if err := <-caughtUp; err != nil {
		t.Fatal(err)
	}
	if n := refusals(); n < base+2 {
		t.Fatalf("the Java producer was refused %v times", n-base)
	}
	// Its record was written after the refusals, not dropped.
	reader := b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"jobs": {0: kgo.NewOffset().AtStart()}}))
	found := false
	testwait.For(t, 30*time.Second, func() bool {
		fctx, fcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		reader.PollFetches(fctx).EachRecord(func(r *kgo.Record) { found = found || string(r.Value) == "late" })
		fcancel()
		return found
	}, "the Java producer's record never arrived")
}
