package retention

import (
	"fmt"
	"testing"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

// TestCompactAbortedTransactions: compaction drops the records of an
// aborted transaction, and a later aborted write of a key does not erase
// the committed one (Kafka's cleaner does the same); nothing at or above
// the last stable offset is cleaned.
func TestCompactAbortedTransactions(t *testing.T) {
	c := newClock(testNow)
	m := openManager(t, segment.NewMemFS(), "/data", c)
	p, err := m.Open(log.TopicPartition{Topic: "c", Partition: 0}, compactCfg())
	if err != nil {
		t.Fatal(err)
	}
	txnl := func(b []byte, pid int64) []byte {
		h, err := segment.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		h.ProducerID, h.ProducerEpoch, h.Attributes = pid, 0, h.Attributes|segment.AttrTransactional
		return segment.AppendBatch(nil, h, b[segment.HeaderSize:])
	}
	appendCommit(t, p, makeBatch(t, testNow, 0, rec{key: []byte("k1"), value: []byte("committed")}))
	appendCommit(t, p, txnl(makeBatch(t, testNow, 0, rec{key: []byte("k1"), value: []byte("aborted")}), 7))
	appendCommit(t, p, log.MarkerBatch(7, 0, false, 0, testNow))
	for i := 0; i < 40; i++ {
		appendCommit(t, p, makeBatch(t, testNow, 0, rec{key: []byte(fmt.Sprintf("f%d", i%5)), value: []byte(fmt.Sprintf("filler %d", i))}))
	}
	// An open transaction late in the log: not cleaned.
	appendCommit(t, p, txnl(makeBatch(t, testNow, 0, rec{key: []byte("f0"), value: []byte("open")}), 8))
	for i := 0; i < 20; i++ {
		appendCommit(t, p, makeBatch(t, testNow, 0, rec{key: []byte("f1"), value: []byte(fmt.Sprintf("late %d", i))}))
	}
	cl := newTestCleaner(t, m, c)
	if n := cl.CompactOnce(); n != 1 {
		t.Fatalf("CompactOnce compacted %d partitions", n)
	}
	vals := map[string]bool{}
	for _, r := range readAll(t, p) {
		if r.value != nil {
			vals[*r.value] = true
		}
	}
	if !vals["committed"] || vals["aborted"] {
		t.Fatalf("after compaction: committed %v, aborted %v", vals["committed"], vals["aborted"])
	}
	if !vals["open"] {
		t.Fatal("a record of an open transaction was cleaned")
	}
	if got := p.AbortedTransactions(0, 1<<40); len(got) != 1 || got[0].ProducerID != 7 {
		t.Fatalf("aborted index after compaction: %+v", got)
	}
}

// TestCompactRemovesOldMarkers: a commit marker stays while a record of
// its transaction does, and goes once they are all cleaned away and the
// marker is older than delete.retention.ms; the marker of a transaction
// whose record survives stays.
func TestCompactRemovesOldMarkers(t *testing.T) {
	c := newClock(testNow)
	m := openManager(t, segment.NewMemFS(), "/data", c)
	p, err := m.Open(log.TopicPartition{Topic: "m", Partition: 0}, compactCfg())
	if err != nil {
		t.Fatal(err)
	}
	txnl := func(b []byte, pid int64) []byte {
		h, err := segment.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		h.ProducerID, h.ProducerEpoch, h.Attributes = pid, 0, h.Attributes|segment.AttrTransactional
		return segment.AppendBatch(nil, h, b[segment.HeaderSize:])
	}
	// pid 9 writes k1 in a committed transaction, later overwritten; pid
	// 10 writes k2, never overwritten.
	appendCommit(t, p, txnl(makeBatch(t, testNow, 0, rec{key: []byte("k1"), value: []byte("old")}), 9))
	appendCommit(t, p, log.MarkerBatch(9, 0, true, 0, testNow))
	appendCommit(t, p, txnl(makeBatch(t, testNow, 0, rec{key: []byte("k2"), value: []byte("kept")}), 10))
	appendCommit(t, p, log.MarkerBatch(10, 0, true, 0, testNow))
	appendCommit(t, p, makeBatch(t, testNow, 0, rec{key: []byte("k1"), value: []byte("new")}))
	for i := 0; i < 40; i++ {
		appendCommit(t, p, makeBatch(t, testNow, 0, rec{key: []byte(fmt.Sprintf("f%d", i%5)), value: []byte(fmt.Sprintf("filler %d", i))}))
	}
	markers := func() map[int64]bool {
		out := map[int64]bool{}
		off := p.LogStartOffset()
		for {
			rr, err := p.Read(off, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if len(rr.Records) == 0 {
				return out
			}
			for len(rr.Records) > 0 {
				h, err := segment.ParseHeader(rr.Records)
				if err != nil {
					t.Fatal(err)
				}
				if h.IsControl() {
					out[h.ProducerID] = true
				}
				rr.Records = rr.Records[h.Size():]
				off = h.LastOffset() + 1
			}
		}
	}
	cl := newTestCleaner(t, m, c)
	cl.CompactOnce()
	if got := markers(); !got[9] || !got[10] {
		t.Fatalf("young markers after compaction: %v, want both", got)
	}
	c.set(testNow + 120_000) // past delete.retention.ms (60 s)
	for i := 0; i < 20; i++ {
		appendCommit(t, p, makeBatch(t, testNow+120_000, 0, rec{key: []byte(fmt.Sprintf("f%d", i%5)), value: []byte(fmt.Sprintf("more %d", i))}))
	}
	cl.CompactOnce()
	if got := markers(); got[9] || !got[10] {
		t.Fatalf("markers after delete.retention.ms: %v, want only producer 10's (its record is kept)", got)
	}
}
