package e2e

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareRecordTTL: with strata.share.record.ttl.ms, records older than
// the TTL before their first delivery never reach a franz-go share
// consumer; they arrive in the dead-letter topic with reason ttl-expired
// (their key, value and headers copied), the young ones are delivered.
func TestShareRecordTTL(t *testing.T) {
	st := shareSingle(t)
	createShareTopic(t, st, "stale", 1)
	createDLQTopic(t, st, "dlq.stale", true)
	admCl := st.client()
	setGroupConfigs(t, admCl, "fresh", "share.auto.offset.reset", "earliest", "strata.share.record.ttl.ms", "60000",
		"errors.deadletterqueue.topic.name", "dlq.stale", "errors.deadletterqueue.copy.record.enable", "true")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old := time.Now().Add(-time.Hour)
	var recs []*kgo.Record
	for i := range 4 {
		recs = append(recs, &kgo.Record{Topic: "stale", Key: []byte("k" + strconv.Itoa(i)), Value: []byte("old" + strconv.Itoa(i)), Timestamp: old,
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t" + strconv.Itoa(i))}}})
	}
	if err := admCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := admCl.ProduceSync(ctx, &kgo.Record{Topic: "stale", Value: []byte("new")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ledger := newShareLedger()
	w := newShareWorker(t, "w", st.seeds, "fresh", "stale", ledger)
	var mu sync.Mutex
	var got []string
	w.decide = func(r *kgo.Record) kgo.AckStatus {
		mu.Lock()
		got = append(got, string(r.Value))
		mu.Unlock()
		return kgo.AckAccept
	}
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	go w.run(wctx)
	waitShareDone(t, kadm.NewClient(admCl), "fresh", "stale", 1, 60*time.Second)
	letters := readDLQ(t, st.seeds, "dlq.stale", 4, 60*time.Second)
	wcancel()
	if len(letters) != 4 {
		t.Fatalf("%d letters, want 4: %+v", len(letters), letters)
	}
	for i, l := range letters {
		h := l.headers
		if h["strata.dlq.reason"] != "ttl-expired" || h["__dlq.errors.delivery.count"] != "0" || h["__dlq.errors.offset"] != strconv.Itoa(i) ||
			l.value != "old"+strconv.Itoa(i) || l.key != "k"+strconv.Itoa(i) || h["trace"] != "t"+strconv.Itoa(i) {
			t.Errorf("letter %d: key %q value %q headers %v", i, l.key, l.value, h)
		}
	}
	ledger.check(t)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "new" {
		t.Fatalf("delivered %q, want only the young record", got)
	}
}
