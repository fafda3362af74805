package segment

import (
	"errors"
	"io"
	"testing"
)

func readAllFS(t *testing.T, fsys FS, name string) string {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer f.Close()
	size, _ := f.Size()
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return string(b)
}

// TestReplaceFileAtomic: a crash at any point leaves the old content or
// the new one; a failing step is reported and leaves the old content.
func TestReplaceFileAtomic(t *testing.T) {
	setup := func() *MemFS {
		m := NewMemFS()
		m.MkdirAll("/d")
		m.SyncDir("/")
		if err := ReplaceFile(m, "/d/f", []byte("old")); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := setup()
	if err := ReplaceFile(m, "/d/f", []byte("new content")); err != nil {
		t.Fatal(err)
	}
	m.ResetToSyncedState()
	if got := readAllFS(t, m, "/d/f"); got != "new content" {
		t.Fatalf("after replace and crash: %q", got)
	}
	for _, op := range []Op{OpCreate, OpWrite, OpSync, OpRename, OpSyncDir} {
		m := setup()
		m.FailNext(op)
		err := ReplaceFile(m, "/d/f", []byte("new content"))
		if !errors.Is(err, ErrInjected) {
			t.Fatalf("%s: err %v", op, err)
		}
		m.ResetToSyncedState()
		if got := readAllFS(t, m, "/d/f"); got != "old" {
			t.Fatalf("%s failed, after crash: %q", op, got)
		}
	}
}
