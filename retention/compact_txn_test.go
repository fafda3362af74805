package retention

import (
	"encoding/binary"
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
		binary.BigEndian.PutUint64(b[43:], uint64(pid))
		binary.BigEndian.PutUint16(b[51:], 0)
		binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|segment.AttrTransactional)
		binary.BigEndian.PutUint32(b[17:], segment.ComputeCRC(b))
		return b
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
