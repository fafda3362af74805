package raftstore

import (
	"errors"
	"io"
	"log/slog"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/segment"
)

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// memDir returns a MemFS with a durable directory "d".
func memDir(t *testing.T) *segment.MemFS {
	t.Helper()
	fsys := segment.NewMemFS()
	if err := fsys.MkdirAll("d"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir("."); err != nil {
		t.Fatal(err)
	}
	return fsys
}

func entries(from, to uint64, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte("cmd-" + strconv.FormatUint(i, 10))})
	}
	return out
}

func checkRange(t *testing.T, l *LogFile, first, last uint64) {
	t.Helper()
	f, _ := l.FirstIndex()
	la, _ := l.LastIndex()
	if f != first || la != last {
		t.Fatalf("range %d..%d, want %d..%d", f, la, first, last)
	}
	for i := first; i <= last && last != 0; i++ {
		var e raft.Log
		if err := l.GetLog(i, &e); err != nil || e.Index != i {
			t.Fatalf("entry %d: %+v %v", i, e, err)
		}
	}
}

func TestRaftLogFileAppendTruncateCompactReopen(t *testing.T) {
	fsys := memDir(t)
	l, err := OpenLogFile(fsys, "d", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	checkRange(t, l, 0, 0)
	if err := l.StoreLogs(entries(1, 10, 1)); err != nil {
		t.Fatal(err)
	}
	// Raft's conflict rule: a suffix goes, a new term's entries replace it.
	if err := l.DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs(entries(8, 12, 2)); err != nil {
		t.Fatal(err)
	}
	// Compaction after a snapshot.
	if err := l.DeleteRange(1, 5); err != nil {
		t.Fatal(err)
	}
	checkRange(t, l, 6, 12)
	if err := l.StoreLogs(entries(20, 21, 2)); err == nil {
		t.Fatal("a gap was accepted")
	}
	if err := l.DeleteRange(8, 9); err == nil {
		t.Fatal("a middle range was deleted")
	}
	l.Close()

	fsys.ResetToSyncedState() // a crash: everything acknowledged survives
	l, err = OpenLogFile(fsys, "d", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	checkRange(t, l, 6, 12)
	var e raft.Log
	l.GetLog(8, &e)
	if e.Term != 2 || string(e.Data) != "cmd-8" {
		t.Fatalf("entry 8 after reopen: %+v", e)
	}
	l.Close()
}

func TestRaftLogFileTornTailIsCut(t *testing.T) {
	fsys := memDir(t)
	l, err := OpenLogFile(fsys, "d", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs(entries(1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	size := l.size
	l.Close()
	f, _ := fsys.Open("d/" + LogFileName)
	f.WriteAt([]byte{0, 0, 0, 50, 1, 2, 3, 4, 9, 9}, size) // a record cut short
	f.Sync()
	f.Close()
	l, err = OpenLogFile(fsys, "d", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	checkRange(t, l, 1, 3)
	if err := l.StoreLogs(entries(4, 4, 1)); err != nil {
		t.Fatal(err)
	}
	l.Close()
}

func TestRaftLogFileFailedSyncSticks(t *testing.T) {
	fsys := memDir(t)
	l, err := OpenLogFile(fsys, "d", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	fsys.FailNext(segment.OpSync)
	if err := l.StoreLogs(entries(1, 1, 1)); !errors.Is(err, ErrStorage) {
		t.Fatalf("got %v", err)
	}
	if err := l.StoreLogs(entries(1, 1, 1)); !errors.Is(err, ErrStorage) {
		t.Fatalf("write after a failed fsync: %v", err)
	}
}

func TestRaftStableFile(t *testing.T) {
	fsys := memDir(t)
	s, err := OpenStableFile(fsys, "d")
	if err != nil {
		t.Fatal(err)
	}
	// hashicorp/raft tells a fresh store by this exact text.
	if _, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("fresh store: %v", err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	fsys.ResetToSyncedState()
	s, err = OpenStableFile(fsys, "d")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("term %d %v", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "2" {
		t.Fatalf("vote %q %v", v, err)
	}
	// Both slots damaged: corruption, not a torn write.
	f, _ := fsys.Open("d/" + StableFileName)
	f.WriteAt([]byte{0xff}, 20)
	f.WriteAt([]byte{0xff}, stableSlotBytes+20)
	f.Sync()
	f.Close()
	if _, err := OpenStableFile(fsys, "d"); !errors.Is(err, ErrStorage) {
		t.Fatalf("corrupt state file opened: %v", err)
	}
}

func TestSnapshotStoreOnMemFS(t *testing.T) {
	fsys := memDir(t)
	s, err := OpenSnapshotStore(fsys, "d/snaps", 2)
	if err != nil {
		t.Fatal(err)
	}
	cfg := raft.Configuration{Servers: []raft.Server{{ID: "1", Address: "a", Suffrage: raft.Voter}}}
	for i := uint64(1); i <= 3; i++ {
		sink, err := s.Create(1, i*10, 1, cfg, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		sink.Write([]byte("image-" + strconv.FormatUint(i, 10)))
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cancelled, _ := s.Create(1, 40, 1, cfg, 1, nil)
	cancelled.Write([]byte("never"))
	cancelled.Cancel()

	fsys.ResetToSyncedState()
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Index != 30 || list[1].Index != 20 {
		t.Fatalf("listed %d snapshots: %+v", len(list), list)
	}
	meta, rc, err := s.Open(list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(b) != "image-3" || meta.Size != 7 || len(meta.Configuration.Servers) != 1 {
		t.Fatalf("%q %v %+v", b, err, meta)
	}
	// A flipped byte in the data is caught at the end of the read.
	f, _ := fsys.Open("d/snaps/" + list[0].ID + ".data")
	f.WriteAt([]byte{'X'}, 0)
	f.Close()
	_, rc, _ = s.Open(list[0].ID)
	if _, err := io.ReadAll(rc); !errors.Is(err, ErrStorage) {
		t.Fatalf("corrupt data read: %v", err)
	}
	rc.Close()
	if _, _, err := s.Open("../x"); err == nil {
		t.Fatal("path in snapshot id accepted")
	}
}
