package segment

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// openFDsUnder counts this process's descriptors open on files under dir
// (Linux: /proc/self/fd), -1 where that cannot be read.
func openFDsUnder(t testing.TB, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
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

// TestIndexSyncedThroughMapping: index entries written through the
// mapping and made durable by the index's sync (msync, the descriptor
// closed since the open) are in the file when it is opened again, on the
// real file system; on MemFS, whose crash keeps only what was synced, the
// mapping's Sync is what makes them survive.
func TestIndexSyncedThroughMapping(t *testing.T) {
	check := func(t *testing.T, fsys FS, path string, reopen func() FS) {
		ix, _, err := openIndex(fsys, path, offsetEntrySize, 1024)
		if err != nil {
			t.Fatal(err)
		}
		if runtime.GOOS == "linux" && ix.f != nil {
			t.Fatal("the index holds its file open; want a detached mapping")
		}
		for i := 1; i <= 10; i++ {
			ix.appendOffset(uint32(i*3), uint32(i*100))
		}
		if err := ix.sync(); err != nil {
			t.Fatal(err)
		}
		// No trim, no close: what a crash after the sync leaves.
		fs2 := reopen()
		ix2, _, err := openIndex(fs2, path, offsetEntrySize, 1024)
		if err != nil {
			t.Fatal(err)
		}
		if ix2.n != 10 {
			t.Fatalf("reopened index has %d entries, want 10", ix2.n)
		}
		for i := 1; i <= 10; i++ {
			if r, p := ix2.offsetEntry(i - 1); r != uint32(i*3) || p != uint32(i*100) {
				t.Fatalf("entry %d: (%d, %d), want (%d, %d)", i-1, r, p, i*3, i*100)
			}
		}
		if err := ix2.trimAndClose(true); err != nil {
			t.Fatal(err)
		}
		ix.closeNoTrim()
		if size, err := fs2.Stat(path); err != nil || size != 10*offsetEntrySize {
			t.Fatalf("trimmed index: %d bytes (%v), want %d", size, err, 10*offsetEntrySize)
		}
	}
	t.Run("osfs", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, FileName(0, IndexExt))
		check(t, OSFS{}, path, func() FS { return OSFS{} })
		if n := openFDsUnder(t, dir); n > 0 {
			t.Fatalf("%d descriptors left open under %s", n, dir)
		}
	})
	t.Run("memfs crash", func(t *testing.T) {
		fsys := NewMemFS()
		fsys.MkdirAll("/d")
		fsys.SyncDir("/")
		path := "/d/" + FileName(0, IndexExt)
		check(t, fsys, path, func() FS {
			fsys.SyncDir("/d") // the file's name; its bytes only if synced
			return fsys.Crash()
		})
	})
	t.Run("memfs unsynced is lost", func(t *testing.T) {
		fsys := NewMemFS()
		fsys.MkdirAll("/d")
		path := "/d/" + FileName(0, IndexExt)
		ix, _, err := openIndex(fsys, path, offsetEntrySize, 1024)
		if err != nil {
			t.Fatal(err)
		}
		ix.appendOffset(3, 100)
		fsys.SyncDir("/")
		fsys.SyncDir("/d")
		ix2, _, err := openIndex(fsys.Crash(), path, offsetEntrySize, 1024)
		if err != nil {
			t.Fatal(err)
		}
		if ix2.n != 0 {
			t.Fatalf("an entry never synced survived the crash: %d entries", ix2.n)
		}
	})
}

// TestSegmentHoldsOnlyLogFD: an open segment, active or sealed, keeps one
// descriptor (its .log); the indexes keep only their mappings.
func TestSegmentHoldsOnlyLogFD(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("detached index mappings are Linux's")
	}
	dir := t.TempDir()
	opts := Options{IndexBytes: 1024, IndexInterval: 100}
	s, err := Create(OSFS{}, dir, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, s, 20, 2, 50, 1000)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := openFDsUnder(t, dir); n != 1 {
		t.Fatalf("active segment: %d descriptors open, want 1", n)
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if n := openFDsUnder(t, dir); n != 1 {
		t.Fatalf("sealed segment: %d descriptors open, want 1", n)
	}
	if _, _, found, err := s.Find(s.NextOffset()-1, s.Size()); err != nil || !found {
		t.Fatalf("find after seal: found %v, %v", found, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openFDsUnder(t, dir); n != 0 {
		t.Fatalf("closed segment: %d descriptors open, want 0", n)
	}
}
