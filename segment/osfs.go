package segment

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
)

// OSFS is the operating system's filesystem.
type OSFS struct{}

var _ FS = OSFS{}

func (OSFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

func (OSFS) Open(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	of := &osFile{f: f}
	of.size.Store(st.Size())
	return of, nil
}

func (OSFS) Stat(name string) (int64, error) {
	st, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (OSFS) Rename(o, n string) error    { return os.Rename(o, n) }
func (OSFS) Remove(name string) error    { return os.Remove(name) }
func (OSFS) RemoveAll(name string) error { return os.RemoveAll(name) }
func (OSFS) MkdirAll(name string) error  { return os.MkdirAll(name, 0o755) }

func (OSFS) ReadDir(name string) ([]DirEntry, error) {
	ents, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, 0, len(ents))
	for _, e := range ents {
		out = append(out, DirEntry{Name: e.Name(), IsDir: e.IsDir()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (OSFS) SyncDir(name string) error {
	d, err := os.Open(filepath.Clean(name))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// osFile tracks its size itself so Append needs no seek or stat: the file
// has one writer (the segment, under its owner's lock).
type osFile struct {
	f    *os.File
	size atomic.Int64
}

func (o *osFile) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }

func (o *osFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := o.f.WriteAt(p, off)
	if end := off + int64(n); end > o.size.Load() {
		o.size.Store(end)
	}
	return n, err
}

func (o *osFile) Append(p []byte) (int, error) {
	return o.WriteAt(p, o.size.Load())
}

func (o *osFile) Truncate(size int64) error {
	if err := o.f.Truncate(size); err != nil {
		return err
	}
	o.size.Store(size)
	return nil
}

func (o *osFile) Sync() error          { return o.f.Sync() }
func (o *osFile) Size() (int64, error) { return o.size.Load(), nil }
func (o *osFile) Close() error         { return o.f.Close() }
func (o *osFile) Map(size int) (Mapping, error) {
	if size < 0 || int64(size) > o.size.Load() {
		return nil, fmt.Errorf("segment: map %d bytes of a %d-byte file", size, o.size.Load())
	}
	return mmapFile(o.f, size)
}
