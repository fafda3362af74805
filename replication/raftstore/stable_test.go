package raftstore

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/segment"
)

// The stable file's space is reserved when it opens: on a full disk every
// Set (hundreds of terms and votes) succeeds and is durable, the file
// never grows, and a crash finds the last state.
func TestRaftStableFileNeedsNoSpace(t *testing.T) {
	fsys := memDir(t)
	mem := fsys
	s, err := OpenStableFile(fsys, "d")
	if err != nil {
		t.Fatal(err)
	}
	fsys.SetFull(true)
	path := "d/" + StableFileName
	for term := uint64(1); term <= 300; term++ {
		if err := s.SetUint64([]byte(keyCurrentTerm), term); err != nil {
			t.Fatalf("term %d on a full disk: %v", term, err)
		}
		if err := s.Set([]byte("LastVoteCand"), []byte(fmt.Sprint(term%3))); err != nil {
			t.Fatalf("vote %d on a full disk: %v", term, err)
		}
		if size, err := mem.Stat(path); err != nil || size != stableFileBytes {
			t.Fatalf("term %d: stable file of %d bytes (%v), want %d", term, size, err, stableFileBytes)
		}
	}
	mem.ResetToSyncedState() // a crash: every Set returned, so every one is durable
	check := func(wantTerm uint64, wantVote string) {
		t.Helper()
		s, err = OpenStableFile(fsys, "d")
		if err != nil {
			t.Fatal(err)
		}
		if v, err := s.GetUint64([]byte(keyCurrentTerm)); err != nil || v != wantTerm {
			t.Fatalf("term %d %v, want %d", v, err, wantTerm)
		}
		if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != wantVote {
			t.Fatalf("vote %q %v, want %q", v, err, wantVote)
		}
	}
	check(300, "0")

	// A torn write (half a slot, its Set never returned) keeps the last
	// acknowledged state.
	mem.FailNext(segment.OpWrite)
	if err := s.SetUint64([]byte(keyCurrentTerm), 301); err == nil {
		t.Fatal("injected write failure not reported")
	}
	mem.ResetToSyncedState()
	check(300, "0")
	if err := s.SetUint64([]byte(keyCurrentTerm), 301); err != nil {
		t.Fatal(err)
	}
	check(301, "0")

	// A new store on a full disk cannot reserve its space: an error at
	// open (the group does not start), not at raft's term save.
	fsys.SetFull(false)
	if err := mem.MkdirAll("e"); err != nil {
		t.Fatal(err)
	}
	fsys.SetFull(true)
	if _, err := OpenStableFile(fsys, "e"); !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("open on a full disk: %v", err)
	}
}

// A stable file of the older format (appended framed records) opens with
// its last state and is rewritten reserved.
func TestRaftStableFileReadsLegacyFormat(t *testing.T) {
	fsys := memDir(t)
	var b []byte
	for _, body := range []string{`{"CurrentTerm":"AAAAAAAAAAU="}`, `{"CurrentTerm":"AAAAAAAAAAc=","LastVoteCand":"Mg=="}`} {
		var err error
		if b, err = FrameRecord(b, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	b = append(b, 0, 0, 0, 40, 1, 2) // a torn append
	if err := segment.WriteSynced(fsys, "d/"+StableFileName, b); err != nil {
		t.Fatal(err)
	}
	s, err := OpenStableFile(fsys, "d")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetUint64([]byte(keyCurrentTerm)); err != nil || v != 7 {
		t.Fatalf("term %d %v", v, err)
	}
	if size, _ := fsys.Stat("d/" + StableFileName); size != stableFileBytes {
		t.Fatalf("legacy file not rewritten reserved: %d bytes", size)
	}
	fsys.ResetToSyncedState()
	s, err = OpenStableFile(fsys, "d")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "2" {
		t.Fatalf("vote %q %v", v, err)
	}
}

// A failed save of raft's current term calls onFatal (the broker stops
// cleanly instead of raft's panic); the error sticks. A failed vote is
// only returned (raft does not vote).
func TestRaftStableFileFatalTermSave(t *testing.T) {
	fsys := memDir(t)
	s, err := OpenStableFile(fsys, "d")
	if err != nil {
		t.Fatal(err)
	}
	var fatal []error
	s.onFatal = func(err error) { fatal = append(fatal, err) }
	fsys.FailNext(segment.OpSync)
	if err := s.Set([]byte("LastVoteCand"), []byte("1")); err == nil {
		t.Fatal("failed fsync not reported")
	}
	if len(fatal) != 0 {
		t.Fatalf("a failed vote save was fatal: %v", fatal)
	}
	if err := s.SetUint64([]byte(keyCurrentTerm), 2); !errors.Is(err, ErrStorage) {
		t.Fatalf("term save after a failed write: %v", err)
	}
	if len(fatal) != 1 || !errors.Is(fatal[0], ErrStorage) {
		t.Fatalf("onFatal got %v", fatal)
	}
}

// The metadata log keeps a reserve written past its last record: on a
// full disk raft's small entries still go in; an append larger than what
// is left meets ENOSPC and fails alone (the file is cut back, no sticky
// error), and appends work again once space returns. The reserve's zeros
// survive a reopen as a reserve, not as a torn tail. Another write error
// sticks.
func TestRaftLogFileFullDiskRecovers(t *testing.T) {
	fsys := memDir(t)
	l, err := OpenLogFile(fsys, "d", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs(entries(1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	fsys.SetFull(true)
	if err := l.StoreLogs(entries(4, 100, 1)); err != nil {
		t.Fatalf("small entries on a full disk, inside the reserve: %v", err)
	}
	big := &raft.Log{Index: 101, Term: 1, Type: raft.LogCommand, Data: make([]byte, 2*metadataLogReserve)}
	if err := l.StoreLogs([]*raft.Log{big}); !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append past the reserve on a full disk: %v", err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("ENOSPC stuck: %v", err)
	}
	checkRange(t, l, 1, 100)
	fsys.SetFull(false)
	if err := l.StoreLogs([]*raft.Log{big}); err != nil {
		t.Fatalf("append once space returned: %v", err)
	}
	if err := l.StoreLogs(entries(102, 102, 1)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	fsys.ResetToSyncedState()
	l, err = OpenLogFile(fsys, "d", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	checkRange(t, l, 1, 102)
	if size, _ := fsys.Stat("d/" + LogFileName); size < l.size+metadataLogReserve/2 {
		t.Fatalf("reserve not kept: file of %d bytes, records %d", size, l.size)
	}
	// A suffix delete and a prefix rewrite keep a reserve too.
	if err := l.DeleteRange(100, 102); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteRange(1, 50); err != nil {
		t.Fatal(err)
	}
	fsys.SetFull(true)
	if err := l.StoreLogs(entries(100, 120, 2)); err != nil {
		t.Fatalf("entries after deletes on a full disk: %v", err)
	}
	fsys.SetFull(false)
	l.Close()
	fsys.ResetToSyncedState()
	l, err = OpenLogFile(fsys, "d", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	checkRange(t, l, 51, 120)
	fsys.FailNext(segment.OpWrite)
	if err := l.StoreLogs(entries(121, 121, 2)); err == nil {
		t.Fatal("injected write failure not reported")
	}
	if err := l.Err(); !errors.Is(err, ErrStorage) {
		t.Fatalf("a write error other than ENOSPC did not stick: %v", err)
	}
	l.Close()
}
