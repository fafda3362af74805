package replication

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

// The memo returns what was put for an index and nothing else, forgets
// what is dropped, swept or pushed out of its slot, and accounts every
// byte it holds in memoBytes.
func TestBatchMemo(t *testing.T) {
	start := memoBytes.Load()
	var m batchMemo
	batch := func(i uint64) []byte { return bytes.Repeat([]byte{byte(i)}, 100+int(i)) }
	for i := uint64(1); i <= 10; i++ {
		m.put(i, batch(i))
	}
	for i := uint64(1); i <= 10; i++ {
		if got := m.get(i); !bytes.Equal(got, batch(i)) {
			t.Fatalf("entry %d: got %d bytes", i, len(got))
		}
	}
	if m.get(11) != nil || m.get(1+memoSlots) != nil {
		t.Fatal("an index never put is found")
	}
	// A later index in the same slot replaces the earlier one.
	m.put(1+memoSlots, batch(1+memoSlots))
	if m.get(1) != nil || !bytes.Equal(m.get(1+memoSlots), batch(1+memoSlots)) {
		t.Fatal("slot reuse: the old entry is still there or the new one is not")
	}
	// A truncated tail is forgotten.
	m.drop(func(i uint64) bool { return i >= 8 })
	if m.get(8) != nil || m.get(10) != nil || m.get(7) == nil {
		t.Fatal("drop")
	}
	// Entries older than the cutoff are swept.
	m.sweep(time.Now().Add(time.Second).UnixNano())
	for i := uint64(1); i <= 1+memoSlots; i++ {
		if m.get(i) != nil {
			t.Fatalf("entry %d survived the sweep", i)
		}
	}
	if got := memoBytes.Load(); got != start {
		t.Fatalf("memoBytes %d after everything left, want %d", got, start)
	}
	// Nothing is kept past the budget.
	memoBytes.Add(memoBudget)
	m.put(1, batch(1))
	memoBytes.Add(-memoBudget)
	if m.get(1) != nil || memoBytes.Load() != start {
		t.Fatal("an entry was kept past the budget")
	}
}

// A leader's store hands followers the stamped batch it appended even
// after the producer's buffer is reused, and after its tail is truncated
// and rewritten it hands out the new batches, never the remembered old
// ones.
func TestPartitionStoreMemoFollowsTheLog(t *testing.T) {
	dir := t.TempDir()
	m, err := log.OpenManager(log.ManagerOptions{Dir: dir, Logger: quietLogger(), UseHighWatermarkCheckpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	p, err := m.Open(log.TopicPartition{Topic: "t", Partition: 0}, log.Config{SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	fsys, rdir := segment.OSFS{}, filepath.Join(dir, "__raft")
	if err := fsys.MkdirAll(rdir); err != nil {
		t.Fatal(err)
	}
	s, err := openPartitionStore(fsys, rdir, p, 0, 0, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check := func(index uint64) []byte {
		t.Helper()
		var e raft.Log
		if err := s.GetLog(index, &e); err != nil {
			t.Fatal(err)
		}
		loc, _ := s.loc(index)
		disk, err := p.BatchAt(loc.offset)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e.Data, disk) || e.Term != loc.term {
			t.Fatalf("entry %d: GetLog gives %d bytes (term %d), the segment holds %d (term %d)", index, len(e.Data), e.Term, len(disk), loc.term)
		}
		return e.Data
	}
	for i := uint64(1); i <= 3; i++ {
		buf := batch(2, -1, -1, -1)
		if err := s.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: buf, Extensions: []byte{extUnstamped}}}); err != nil {
			t.Fatal(err)
		}
		clear(buf) // the producer's pooled buffer is reused
		if s.memo.get(i) == nil {
			t.Fatalf("entry %d not remembered", i)
		}
		check(i)
	}
	// A new leader's entries replace 2 and 3 (term 2, three records each).
	if err := s.DeleteRange(2, 3); err != nil {
		t.Fatal(err)
	}
	for i := uint64(2); i <= 3; i++ {
		b := batch(3, -1, -1, -1)
		segment.SetBaseOffset(b, p.Offsets().LogEnd)
		segment.SetLeaderEpoch(b, 2)
		if err := s.StoreLogs([]*raft.Log{{Index: i, Term: 2, Type: raft.LogCommand, Data: b}}); err != nil {
			t.Fatal(err)
		}
		if h, _ := segment.ParseHeader(check(i)); h.NumRecords != 3 || h.LeaderEpoch != 2 {
			t.Fatalf("entry %d after the truncation: %+v", i, h)
		}
	}
	check(1)
}
