package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/dlq"
	"github.com/strata-io/strata/internal/testwait"
)

// TestShareDLQDepthMetrics: a franz-go share consumer rejects three
// records; the broker's /metrics then show the group's dead-letter topic
// three letters deep with a positive oldest age
// (strata_share_dlq_depth, strata_share_dlq_oldest_age_seconds), and
// after a redrive of them both read 0.
func TestShareDLQDepthMetrics(t *testing.T) {
	b := startBroker(t, "", append(append([]string(nil), shareSettings...),
		"--set", "metrics.listener=127.0.0.1:0", "--set", "strata.share.dlq.depth.interval.ms=1000")...)
	st := shareTarget{seeds: []string{b.addr}, client: b.client, rf: 1}
	mon := stabMetricsAddr(t, b)
	createShareTopic(t, st, "deep", 1)
	createDLQTopic(t, st, "dlq.deep", true)
	admCl := st.client()
	setGroupConfigs(t, admCl, "deepg", "share.auto.offset.reset", "earliest",
		"errors.deadletterqueue.topic.name", "dlq.deep", "errors.deadletterqueue.copy.record.enable", "true")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i := range 3 {
		if err := admCl.ProduceSync(ctx, &kgo.Record{Topic: "deep", Value: []byte("bad" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ledger := newShareLedger()
	w := newShareWorker(t, "w", st.seeds, "deepg", "deep", ledger)
	w.decide = func(*kgo.Record) kgo.AckStatus { return kgo.AckReject }
	wctx, wcancel := context.WithCancel(context.Background())
	go w.run(wctx)
	readDLQ(t, st.seeds, "dlq.deep", 3, 60*time.Second)
	wcancel()

	depth := `strata_share_dlq_depth{group="deepg",topic="dlq.deep"}`
	age := `strata_share_dlq_oldest_age_seconds{group="deepg",topic="dlq.deep"}`
	var m map[string]float64
	testwait.For(t, 30*time.Second, func() bool {
		m = monScrape(t, mon)
		return m[depth] == 3 && m[age] > 0
	}, "the dead-letter topic 3 letters deep on /metrics")
	rep, err := dlq.Redrive(ctx, dlq.Options{Seeds: st.seeds, Group: "deepg", Execute: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moved != 3 {
		t.Fatalf("redrive moved %d, want 3: %+v", rep.Moved, rep)
	}
	testwait.For(t, 30*time.Second, func() bool {
		m = monScrape(t, mon)
		v, ok := m[depth]
		return ok && v == 0 && m[age] == 0
	}, "the dead-letter topic empty on /metrics after the redrive (depth %v, age %v)", m[depth], m[age])
}
