package segment

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

func TestMemFSStrictSync(t *testing.T) {
	m := NewMemFS()
	if err := m.MkdirAll("/a/b"); err != nil {
		t.Fatal(err)
	}
	f, _ := m.Create("/a/b/x")
	f.Append([]byte("hello"))
	m.ResetToSyncedState()
	if _, err := m.Stat("/a/b/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unsynced directory entry survived: %v", err)
	}
	// Entries need every parent synced.
	m.MkdirAll("/a/b")
	m.SyncDir("/")
	m.SyncDir("/a")
	m.SyncDir("/a/b")
	f, _ = m.Create("/a/b/x")
	m.SyncDir("/a/b")
	f.Append([]byte("hello"))
	f.Sync()
	f.Append([]byte(" world"))
	m.ResetToSyncedState()
	f, err := m.Open("/a/b/x")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := f.Size(); n != 5 {
		t.Fatalf("size after reset %d", n)
	}
	// Rename is durable only after SyncDir.
	m.Rename("/a/b/x", "/a/b/y")
	m.ResetToSyncedState()
	if _, err := m.Stat("/a/b/x"); err != nil {
		t.Fatal("unsynced rename kept")
	}
	m.Rename("/a/b/x", "/a/b/y")
	m.SyncDir("/a/b")
	m.ResetToSyncedState()
	if _, err := m.Stat("/a/b/y"); err != nil {
		t.Fatal("synced rename lost")
	}
	// Removal keeps open handles readable.
	f, _ = m.Open("/a/b/y")
	m.Remove("/a/b/y")
	buf := make([]byte, 5)
	if n, _ := f.ReadAt(buf, 0); n != 5 || string(buf) != "hello" {
		t.Fatalf("read after remove: %q", buf[:n])
	}
	ents, _ := m.ReadDir("/a/b")
	if len(ents) != 0 {
		t.Fatalf("entries %v", ents)
	}
}

func TestMemFSFailNext(t *testing.T) {
	m := NewMemFS()
	f, _ := m.Create("/x")
	m.FailNext(OpWrite)
	n, err := f.Append([]byte("abcdef"))
	if !errors.Is(err, ErrInjected) || n != 3 {
		t.Fatalf("torn write: %d %v", n, err)
	}
	if _, err := f.Append([]byte("g")); err != nil {
		t.Fatal("fault not one-shot")
	}
	m.FailAfter(OpSync, 1)
	if f.Sync() != nil || !errors.Is(f.Sync(), ErrInjected) || f.Sync() != nil {
		t.Fatal("FailAfter")
	}
}

func TestFSImplementations(t *testing.T) {
	for name, fsys := range map[string]FS{"os": OSFS{}, "mem": NewMemFS()} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			if err := fsys.MkdirAll(dir); err != nil {
				t.Fatal(err)
			}
			f, err := fsys.Create(filepath.Join(dir, "f"))
			if err != nil {
				t.Fatal(err)
			}
			f.Append([]byte("0123456789"))
			f.WriteAt([]byte("AB"), 2)
			if err := f.Truncate(64); err != nil {
				t.Fatal(err)
			}
			mp, err := f.Map(64)
			if err != nil {
				t.Fatal(err)
			}
			mp.Bytes()[20] = 'Z'
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 21)
			if _, err := f.ReadAt(buf, 0); err != nil {
				t.Fatal(err)
			}
			if string(buf[:10]) != "01AB456789" || buf[20] != 'Z' {
				t.Fatalf("contents %q", buf)
			}
			mp.Close()
			if n, _ := f.Size(); n != 64 {
				t.Fatalf("size %d", n)
			}
			f.Close()
			if err := fsys.Rename(filepath.Join(dir, "f"), filepath.Join(dir, "g")); err != nil {
				t.Fatal(err)
			}
			if err := fsys.SyncDir(dir); err != nil {
				t.Fatal(err)
			}
			ents, err := fsys.ReadDir(dir)
			if err != nil || len(ents) != 1 || ents[0].Name != "g" || ents[0].IsDir {
				t.Fatalf("readdir %v %v", ents, err)
			}
			if _, err := fsys.Open(filepath.Join(dir, "f")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("open missing: %v", err)
			}
			if err := fsys.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if _, err := fsys.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("stat removed: %v", err)
			}
		})
	}
}

func TestSegmentFailedSyncSticks(t *testing.T) {
	m := NewMemFS()
	m.MkdirAll("/d")
	s, _ := Create(m, "/d", 0, Options{IndexBytes: 1024})
	appendN(t, s, 2, 1, 10, 1)
	m.FailNext(OpSync)
	if err := s.Sync(); !errors.Is(err, ErrStorage) {
		t.Fatalf("sync: %v", err)
	}
	b := buildBatch(1, 1, 1)
	SetBaseOffset(b, s.NextOffset())
	if err := s.Append(b, []BatchInfo{{Len: len(b), LastOffset: s.NextOffset()}}); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after failed sync: %v", err)
	}
	if err := s.Sync(); !errors.Is(err, ErrStorage) {
		t.Fatal("error did not stick")
	}
	s.Close()
	s, _, err := Open(m, "/d", 0, Options{IndexBytes: 1024}, true)
	if err != nil || s.NextOffset() != 2 || s.Err() != nil {
		t.Fatalf("reopen: %v %d", err, s.NextOffset())
	}
	s.Close()
}

// Crash leaves the original MemFS alone: a writer still running against it
// cannot disturb what the restarted program finds.
func TestMemFSCrashForks(t *testing.T) {
	m := NewMemFS()
	if err := m.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	m.SyncDir("/")
	f, _ := m.Create("/d/a")
	f.Append([]byte("kept"))
	f.Sync()
	m.SyncDir("/d")
	f.Append([]byte("lost"))
	tmp, _ := m.Create("/d/a.tmp")
	tmp.Append([]byte("x"))

	after := m.Crash()
	// The zombie keeps writing to m.
	f.Append([]byte("more"))
	f.Sync()
	tmp.Sync()
	if err := m.Rename("/d/a.tmp", "/d/b"); err != nil {
		t.Fatalf("zombie rename in the old FS: %v", err)
	}
	if _, err := after.Stat("/d/b"); err == nil {
		t.Fatal("zombie's rename reached the crashed copy")
	}
	if _, err := after.Stat("/d/a.tmp"); err == nil {
		t.Fatal("unsynced entry survived the crash")
	}
	g, err := after.Open("/d/a")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, _ := g.ReadAt(buf, 0)
	if string(buf[:n]) != "kept" {
		t.Fatalf("after crash: %q", buf[:n])
	}
}
