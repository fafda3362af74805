package raftstore

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/strata-io/strata/segment"
)

// fdsUnder counts this process's descriptors open on files under dir.
func fdsUnder(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}

// TestSparseLogHoldsNoFD: a partition's side log (sparse) keeps no
// descriptor open between operations, and what it wrote and synced
// through descriptors opened for each operation is all there at reopen.
func TestSparseLogHoldsNoFD(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts /proc/self/fd")
	}
	dir := t.TempDir()
	l, err := OpenLogFileNamed(segment.OSFS{}, dir, "side.log", true, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	held := func(when string) {
		t.Helper()
		if n := fdsUnder(t, dir); n != 0 {
			t.Fatalf("%s: %d descriptors open, want 0", when, n)
		}
	}
	held("open")
	if err := l.StoreLogs(entries(1, 5, 1)); err != nil {
		t.Fatal(err)
	}
	held("store")
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	held("sync")
	if err := l.DeleteRange(5, 5); err != nil { // suffix: cut in place
		t.Fatal(err)
	}
	held("suffix cut")
	if err := l.DeleteRange(1, 1); err != nil { // prefix: rewrite
		t.Fatal(err)
	}
	held("prefix rewrite")
	if err := l.StoreLogs(entries(7, 8, 2)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	held("close")
	l2, err := OpenLogFileNamed(segment.OSFS{}, dir, "side.log", true, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	got := l2.EntriesFrom(0)
	want := []uint64{2, 3, 4, 7, 8}
	if len(got) != len(want) {
		t.Fatalf("reopened: %d entries, want %d", len(got), len(want))
	}
	for i, e := range got {
		if e.Index != want[i] {
			t.Fatalf("entry %d is index %d, want %d", i, e.Index, want[i])
		}
	}
}

// TestSparseLogSyncAfterReopenIsDurable: entries written through one
// short-lived handle and synced through another survive a crash; entries
// never synced do not (MemFS keeps only what was synced).
func TestSparseLogSyncAfterReopenIsDurable(t *testing.T) {
	fsys := memDir(t)
	l, err := OpenLogFileNamed(fsys, "d", "side.log", true, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs(entries(1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs(entries(4, 4, 1)); err != nil { // never synced
		t.Fatal(err)
	}
	l2, err := OpenLogFileNamed(fsys.Crash(), "d", "side.log", true, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	checkRange(t, l2, 1, 3)
	// A failed open is this operation's error, not a sticky one.
	fsys.FailNext(segment.OpOpen)
	if err := l.StoreLogs(entries(5, 5, 1)); err == nil {
		t.Fatal("store with the open failing: no error")
	}
	if err := l.StoreLogs(entries(5, 5, 1)); err != nil {
		t.Fatalf("store after a failed open: %v", err)
	}
	l.Close()
}
