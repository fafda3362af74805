package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestShareDLQTopicDeleted: on 3 brokers, a share group's records in
// flight when their topic is deleted reach its dead-letter topic with
// reason topic-deleted, each once, and nothing else does: 15 records
// accepted before, then a franz-go worker holds (never acknowledges) what
// it polls of 15 more; DeleteTopics (answered by the controller, the
// partitions led by all three brokers) dead-letters every record it held,
// none accepted, none twice.
func TestShareDLQTopicDeleted(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: skipped under -short")
	}
	c := startChaosCluster(t, 3, 2*time.Second, shareSettings...)
	st := shareTarget{seeds: c.bootstrap(), client: c.client, rf: 3}
	createShareTopic(t, st, "doomed", 3)
	createDLQTopic(t, st, "dlq.doomed", true)
	admCl := st.client()
	setGroupConfigs(t, admCl, "doomers", "share.auto.offset.reset", "earliest",
		"errors.deadletterqueue.topic.name", "dlq.doomed", "errors.deadletterqueue.copy.record.enable", "true")
	produce := func(prefix string, n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: "doomed", Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
		}
		if err := admCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce("early", 15)
	ledger := newShareLedger()
	a := newShareWorker(t, "a", st.seeds, "doomers", "doomed", ledger)
	actx, acancel := context.WithCancel(context.Background())
	go a.run(actx)
	testwait.For(t, 60*time.Second, func() bool { _, confirmed := ledger.counts(); return confirmed == 15 }, "the 15 early records accepted")
	acancel()
	a.cl.Close()

	produce("late", 15)
	held := map[string]bool{}
	hl := newShareLedger()
	b := newShareWorker(t, "b", st.seeds, "doomers", "doomed", hl)
	b.hold.Store(true)
	bctx, bcancel := context.WithCancel(context.Background())
	defer bcancel()
	go b.run(bctx)
	testwait.For(t, 60*time.Second, func() bool { return b.got.Load() > 0 }, "worker b holding records")
	hl.mu.Lock()
	for k := range hl.deliveries {
		held[fmt.Sprintf("%d/%d", k.partition, k.offset)] = true
	}
	hl.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(admCl).DeleteTopics(ctx, "doomed")
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	letters := readDLQ(t, st.seeds, "dlq.doomed", len(held), 60*time.Second)
	seen := map[string]bool{}
	for _, l := range letters {
		h := l.headers
		k := h["__dlq.errors.partition"] + "/" + h["__dlq.errors.offset"]
		switch {
		case h["strata.dlq.reason"] != "topic-deleted" || h["__dlq.errors.topic"] != "doomed" || h["__dlq.errors.group"] != "doomers":
			t.Errorf("letter %s: headers %v", k, h)
		case seen[k]:
			t.Errorf("letter %s twice", k)
		case len(l.value) < 5 || l.value[:5] != "late-":
			t.Errorf("letter %s is %q: not a record in flight", k, l.value)
		case h["__dlq.errors.delivery.count"] != "1":
			t.Errorf("letter %s: delivery count %s, want 1", k, h["__dlq.errors.delivery.count"])
		}
		seen[k] = true
	}
	for k := range held {
		if !seen[k] {
			t.Errorf("record %s held by worker b at the deletion: no dead letter", k)
		}
	}
	if len(letters) > 15 {
		t.Errorf("%d letters, more than the 15 records that could be in flight", len(letters))
	}
	t.Logf("worker b held %d records; %d dead letters (records acquired into its client's buffer count too)", len(held), len(letters))
}
