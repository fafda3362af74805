package replication

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

// TestPartitionSideLogCrashLeavesNoHole: the side log (share state,
// delete-records, raft's own entries) is written without fsync, so a
// crash may lose its tail, but never a side entry before a batch that
// survives: the store syncs the side log before a batch follows it. Here
// the segments are flushed (as flush.ms or a roll would) while side
// entries sit between the batches; after a crash (MemFS keeps only what
// was fsync'd) every entry the reopened store holds is the one stored at
// that index.
func TestPartitionSideLogCrashLeavesNoHole(t *testing.T) {
	mem := segment.NewMemFS()
	const dir = "/raft"
	open := func(fsys *segment.MemFS) (*log.Manager, *log.Partition, *partitionStore) {
		t.Helper()
		m, err := log.OpenManager(log.ManagerOptions{Dir: "/data", FS: fsys, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		p, err := m.Open(log.TopicPartition{Topic: "t", Partition: 0}, log.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := fsys.MkdirAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := fsys.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		st, err := openPartitionStore(fsys, dir, p, 0, 0, quietLogger())
		if err != nil {
			t.Fatal(err)
		}
		return m, p, st
	}
	m, p, st := open(mem)
	var stored []raft.Log
	for i := uint64(1); i <= 12; i++ {
		e := raft.Log{Index: i, Term: 1, Type: raft.LogCommand}
		if i%3 == 0 {
			e.Data, e.Extensions = batch(1, -1, -1, -1), []byte{extUnstamped}
		} else {
			e.Data, e.Extensions = []byte{byte(i), 's'}, []byte{extShareState}
		}
		if err := st.StoreLogs([]*raft.Log{&e}); err != nil {
			t.Fatal(err)
		}
		var back raft.Log
		if err := st.GetLog(i, &back); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, back)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	crashed := mem.Crash() // m and st are abandoned, as a killed process's
	_ = m
	_, p2, st2 := open(crashed)
	t.Logf("before: %+v; after the crash: %+v, side entries %d", p.Offsets(), p2.Offsets(), len(st2.side.EntriesFrom(0)))
	last, _ := st2.LastIndex()
	if last < 9 {
		t.Fatalf("after the crash the store ends at %d; the batch at index 9 was flushed with every side entry before it", last)
	}
	for i := uint64(1); i <= last; i++ {
		var got raft.Log
		if err := st2.GetLog(i, &got); err != nil {
			t.Fatalf("index %d: %v", i, err)
		}
		w := stored[i-1]
		if got.Term != w.Term || got.Type != w.Type || !bytes.Equal(got.Data, w.Data) {
			t.Fatalf("index %d after the crash holds %q, stored %q (a hole in the raft log)", i, got.Data, w.Data)
		}
	}
	t.Logf("stored 12 entries, %d survived the crash", last)
}
