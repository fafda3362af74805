package e2e

import (
	"context"
	"strconv"
	"strings"
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

// TestShareRecordHeaders: a record's own strata.ttl.ms and
// strata.deliver.after.ms headers, in uncompressed and compressed batches,
// with a franz-go share consumer: a record past its own TTL goes to the
// dead-letter topic (ttl-expired) and so does one whose TTL ends before
// its delivery time; a delayed record is not delivered before its time
// (the broker's clock is this process's); the others are delivered at once.
func TestShareRecordHeaders(t *testing.T) {
	st := shareSingle(t)
	createShareTopic(t, st, "timed", 1)
	createDLQTopic(t, st, "dlq.timed", true)
	admCl := st.client()
	setGroupConfigs(t, admCl, "timers", "share.auto.offset.reset", "earliest",
		"errors.deadletterqueue.topic.name", "dlq.timed", "errors.deadletterqueue.copy.record.enable", "true")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now()
	after := now.Add(3 * time.Second).UnixMilli()
	ms := func(v int64) []byte { return []byte(strconv.FormatInt(v, 10)) }
	hdr := func(kv ...string) []kgo.RecordHeader {
		var hs []kgo.RecordHeader
		for i := 0; i+1 < len(kv); i += 2 {
			hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return hs
	}
	// One batch, uncompressed.
	recs := []*kgo.Record{
		{Topic: "timed", Value: []byte("plain")},
		{Topic: "timed", Value: []byte("stale"), Timestamp: now.Add(-time.Hour), Headers: hdr("strata.ttl.ms", "1000")},
		{Topic: "timed", Value: []byte("later"), Headers: []kgo.RecordHeader{{Key: "strata.deliver.after.ms", Value: ms(after)}}},
		{Topic: "timed", Value: []byte("too-late"), Headers: []kgo.RecordHeader{{Key: "strata.deliver.after.ms", Value: ms(after)}, {Key: "strata.ttl.ms", Value: []byte("500")}}},
		{Topic: "timed", Value: []byte("long-ttl"), Timestamp: now.Add(-time.Minute), Headers: hdr("strata.ttl.ms", "3600000")},
	}
	if err := admCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// One batch, compressed.
	zcl := st.client(kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	if err := zcl.ProduceSync(ctx,
		&kgo.Record{Topic: "timed", Value: []byte("later-lz4"), Headers: []kgo.RecordHeader{{Key: "strata.deliver.after.ms", Value: ms(after)}}},
		&kgo.Record{Topic: "timed", Value: []byte("plain-lz4")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ledger := newShareLedger()
	w := newShareWorker(t, "w", st.seeds, "timers", "timed", ledger)
	var mu sync.Mutex
	got := map[string]time.Time{}
	w.decide = func(r *kgo.Record) kgo.AckStatus {
		mu.Lock()
		got[string(r.Value)] = time.Now()
		mu.Unlock()
		return kgo.AckAccept
	}
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	go w.run(wctx)
	waitShareDone(t, kadm.NewClient(admCl), "timers", "timed", 1, 60*time.Second)
	letters := readDLQ(t, st.seeds, "dlq.timed", 2, 60*time.Second)
	wcancel()
	if len(letters) != 2 {
		t.Fatalf("%d letters, want 2: %+v", len(letters), letters)
	}
	for i, want := range []string{"stale", "too-late"} {
		if l := letters[i]; l.value != want || l.headers["strata.dlq.reason"] != "ttl-expired" || l.headers["__dlq.errors.delivery.count"] != "0" {
			t.Errorf("letter %d: value %q headers %v, want %s ttl-expired", i, l.value, l.headers, want)
		}
	}
	ledger.check(t)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 5 {
		t.Errorf("delivered %v, want plain, later, long-ttl, later-lz4, plain-lz4", got)
	}
	for _, v := range []string{"plain", "long-ttl", "later", "later-lz4", "plain-lz4"} {
		at, ok := got[v]
		switch {
		case !ok:
			t.Errorf("%s not delivered", v)
		case strings.HasPrefix(v, "later") && at.UnixMilli() < after:
			t.Errorf("%s delivered %v before its strata.deliver.after.ms", v, time.UnixMilli(after).Sub(at))
		}
	}
}
