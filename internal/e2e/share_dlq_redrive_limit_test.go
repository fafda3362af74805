package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareDLQRedriveLimit: a record that strata dlq redrive has brought
// back as often as the group's strata.share.dlq.redrive.limit (its
// strata.redrive.count header) and that is dead-lettered again gets the
// reason redrive-limit, with or without copies of the records; below the
// limit, or with another group's higher limit, it keeps its own reason.
func TestShareDLQRedriveLimit(t *testing.T) {
	st := shareSingle(t)
	createShareTopic(t, st, "jobs", 1)
	createDLQTopic(t, st, "dlq.jobs", true)
	adm := st.client()
	// "low": the default limit (3), no copies; "high": a limit of 5.
	setGroupConfigs(t, adm, "low", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.jobs")
	setGroupConfigs(t, adm, "high", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.jobs",
		"errors.deadletterqueue.copy.record.enable", "true", "strata.share.dlq.redrive.limit", "5")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range []*kgo.Record{
		{Topic: "jobs", Value: []byte("fresh")},
		{Topic: "jobs", Value: []byte("twice"), Headers: []kgo.RecordHeader{{Key: "strata.redrive.count", Value: []byte("2")}}},
		{Topic: "jobs", Value: []byte("thrice"), Headers: []kgo.RecordHeader{{Key: "strata.redrive.count", Value: []byte("3")}}},
	} {
		if err := adm.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	for _, g := range []string{"low", "high"} {
		w := newShareWorker(t, "w-"+g, st.seeds, g, "jobs", newShareLedger())
		w.decide = func(*kgo.Record) kgo.AckStatus { return kgo.AckReject }
		go w.run(wctx)
		waitShareDone(t, kadm.NewClient(adm), g, "jobs", 1, 60*time.Second)
	}
	letters := readDLQ(t, st.seeds, "dlq.jobs", 6, 60*time.Second)
	if len(letters) != 6 {
		t.Fatalf("%d dead letters, want 6: %+v", len(letters), letters)
	}
	want := map[string]string{ // group/offset -> reason
		"low/0": "rejected", "low/1": "rejected", "low/2": "redrive-limit",
		"high/0": "rejected", "high/1": "rejected", "high/2": "rejected",
	}
	for _, l := range letters {
		h := l.headers
		k := h["__dlq.errors.group"] + "/" + h["__dlq.errors.offset"]
		r, ok := want[k]
		if !ok {
			t.Fatalf("unexpected letter %s: %v", k, h)
		}
		delete(want, k)
		if h["strata.dlq.reason"] != r {
			t.Errorf("letter %s: reason %q, want %q (%v)", k, h["strata.dlq.reason"], r, h)
		}
		if r == "redrive-limit" && !strings.Contains(h["__dlq.errors.message"], "redriven 3 times") {
			t.Errorf("letter %s: message %q", k, h["__dlq.errors.message"])
		}
		if strings.HasPrefix(k, "low/") && l.value != "" {
			t.Errorf("letter %s copies the record without errors.deadletterqueue.copy.record.enable: %q", k, l.value)
		}
		if k == "high/2" && (l.value != "thrice" || h["strata.redrive.count"] != "3") {
			t.Errorf("letter %s: copy %q, headers %v", k, l.value, h)
		}
	}
	if len(want) != 0 {
		t.Fatalf("letters missing: %v", want)
	}
}
