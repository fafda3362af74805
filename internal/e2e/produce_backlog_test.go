package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestProduceBacklogCluster: the overflow rule on three brokers. The
// topic's three partitions are led by different brokers, and the consumer
// group is coordinated by one of them, so the other leaders read its
// committed offsets from the coordinator and the other partitions' high
// watermarks over the network. Past the limit every partition refuses
// (NOT_ENOUGH_REPLICAS); once the group has consumed and committed, every
// partition takes records again. Not in -short.
func TestProduceBacklogCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three brokers: not in -short")
	}
	c := startChaosCluster(t, 3, 500*time.Millisecond, "--set", "strata.produce.backlog.check.interval.ms=100")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.client())
	if r, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{
		"strata.produce.backlog.group": kadm.StringPtr("workers"), "strata.produce.backlog.max.records": kadm.StringPtr("30"),
	}, "jobs"); err != nil || r.Err != nil {
		t.Fatalf("create jobs: %v %v", err, r.Err)
	}
	leaders := c.waitLeaders(ctx, adm, "jobs", 3, time.Minute)
	t.Logf("leaders of jobs: %v", leaders)
	// One try per record, so a refusal shows.
	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
		kgo.RecordDeliveryTimeout(5*time.Second))
	produce := func(p int32) error {
		return prod.ProduceSync(ctx, &kgo.Record{Topic: "jobs", Partition: p, Value: []byte("job")}).FirstErr()
	}
	for i := 0; i < 45; i++ {
		if err := produce(int32(i % 3)); err != nil && !errors.Is(err, kerr.NotEnoughReplicas) {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	for p := int32(0); p < 3; p++ {
		testwait.For(t, 30*time.Second, func() bool { return errors.Is(produce(p), kerr.NotEnoughReplicas) },
			"partition %d (leader %d) still takes records with the group 45 records behind a limit of 30", p, leaders[p][0])
	}
	// The group catches up and commits.
	offs, err := adm.ListEndOffsets(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	offs.Each(func(o kadm.ListedOffset) { total += o.Offset })
	cons := c.client(kgo.ConsumerGroup("workers"), kgo.ConsumeTopics("jobs"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	for consumed := int64(0); consumed < total; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		consumed += int64(fs.NumRecords())
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		var last error
		if !testwait.Until(30*time.Second, func() bool { last = produce(p); return last == nil }) {
			t.Fatalf("partition %d (leader %d) still refuses after the group caught up: %v", p, leaders[p][0], last)
		}
	}
	// No leader let producers through because it could not read the
	// backlog (10 failed checks in a row would, and hide a broken remote
	// read; single failures while the coordinator or a leader is being
	// chosen are expected).
	for id := int32(1); id <= 3; id++ {
		if log := fileTail(c.node(id).log, 1<<20); strings.Contains(log, "backlog could not be read") {
			t.Errorf("broker %d gave up reading the backlog", id)
		}
	}
}
