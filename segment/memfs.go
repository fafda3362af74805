package segment

import (
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Op names a MemFS operation for fault injection.
type Op string

// Operations FailNext can arm.
const (
	OpCreate   Op = "create"
	OpOpen     Op = "open"
	OpWrite    Op = "write" // WriteAt and Append
	OpTruncate Op = "truncate"
	OpSync     Op = "sync"
	OpRename   Op = "rename"
	OpRemove   Op = "remove" // Remove and RemoveAll
	OpSyncDir  Op = "syncdir"
	OpMkdir    Op = "mkdir"
	OpMap      Op = "map"
)

// MemFS is an in-memory FS with strict sync semantics, for crash tests:
// file contents become durable only at File.Sync and directory entries
// (creations, renames, removals) only at SyncDir of their parent.
// ResetToSyncedState simulates a crash: everything not yet durable is lost.
// FailNext arms a one-shot fault. Safe for concurrent use.
type MemFS struct {
	mu sync.Mutex
	// cur is the namespace as the running program sees it; synced is
	// what would survive a crash. A nil *memInode is a directory.
	cur    map[string]*memInode
	synced map[string]*memInode
	fail   map[Op]int // armed faults: op -> calls to let pass first
	// onSync, when set, runs at the start of every File.Sync with the
	// file's name (tests: a slow disk).
	onSync func(name string)
	// full makes what needs new space fail with ENOSPC (SetFull).
	full atomic.Bool
}

// SetFull makes the file system full (or not): while full, creating a
// file or directory, renaming, and writing past a file's end fail with
// syscall.ENOSPC (a write that runs past the end writes the part inside
// the file first, as a short write); writes inside a file's current size
// succeed, as on file systems that overwrite in place (ext4, xfs, tmpfs).
func (m *MemFS) SetFull(full bool) { m.full.Store(full) }

// noSpace is the ENOSPC error of op on name while the file system is full.
func (m *MemFS) noSpace(op, name string) error {
	if m.full.Load() {
		return &fs.PathError{Op: op, Path: name, Err: syscall.ENOSPC}
	}
	return nil
}

// OnSync installs fn to run at the start of every File.Sync (nil removes
// it): tests make a sync slow or block to see what waits behind it.
func (m *MemFS) OnSync(fn func(name string)) {
	m.mu.Lock()
	m.onSync = fn
	m.mu.Unlock()
}

// memInode is a file's contents. Open handles keep their inode after
// removal, as on Unix.
type memInode struct {
	mu     sync.Mutex
	data   []byte
	synced []byte
}

var _ FS = (*MemFS)(nil)

// NewMemFS returns an empty MemFS whose root ("/" and ".") always exists.
func NewMemFS() *MemFS {
	return &MemFS{cur: map[string]*memInode{}, synced: map[string]*memInode{}, fail: map[Op]int{}}
}

// FailNext makes the next call of op fail with ErrInjected. A failed write
// writes half of its bytes first, like a torn write.
func (m *MemFS) FailNext(op Op) { m.FailAfter(op, 0) }

// FailAfter lets n calls of op succeed, then fails the next one.
func (m *MemFS) FailAfter(op Op, n int) {
	m.mu.Lock()
	m.fail[op] = n
	m.mu.Unlock()
}

func (m *MemFS) shouldFail(op Op) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.fail[op]
	if !ok {
		return false
	}
	if n > 0 {
		m.fail[op] = n - 1
		return false
	}
	delete(m.fail, op)
	return true
}

// ResetToSyncedState drops every change not yet made durable: unsynced
// file contents and unsynced directory entries. Open handles from before
// the reset must not be used afterwards.
func (m *MemFS) ResetToSyncedState() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cur, m.synced = m.survivors()
	m.fail = map[Op]int{}
}

// Crash returns what a restarted program would find after a crash: a new
// MemFS holding only the durable state. m itself is left as it was, so a
// "crashed" component whose goroutines are still running (a test cannot
// kill them the way a SIGKILL would) goes on writing to m, where nobody
// looks, instead of racing the restarted one over the same files.
func (m *MemFS) Crash() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, synced := m.survivors()
	return &MemFS{cur: cur, synced: synced, fail: map[Op]int{}}
}

// survivors builds the namespace a crash would leave, with fresh inodes
// (so handles opened before it cannot touch it), and its synced twin.
// Caller holds mu.
func (m *MemFS) survivors() (cur, synced map[string]*memInode) {
	cur = map[string]*memInode{}
	// An entry survives only if its parent directory survives too.
	names := make([]string, 0, len(m.synced))
	for n := range m.synced {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return strings.Count(names[i], "/") < strings.Count(names[j], "/") })
	for _, n := range names {
		parent := filepath.Dir(n)
		if _, ok := cur[parent]; !ok && !isRoot(parent) {
			continue
		}
		ino := m.synced[n]
		if ino != nil {
			ino.mu.Lock()
			nd := &memInode{data: append([]byte(nil), ino.synced...), synced: append([]byte(nil), ino.synced...)}
			ino.mu.Unlock()
			cur[n] = nd
		} else {
			cur[n] = nil
		}
	}
	synced = make(map[string]*memInode, len(cur))
	for n, ino := range cur {
		synced[n] = ino
	}
	return cur, synced
}

func isRoot(p string) bool { return p == "/" || p == "." }

func clean(name string) string { return filepath.Clean(name) }

func notExist(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

func injected(op Op, name string) error {
	return fmt.Errorf("memfs %s %s: %w", op, name, ErrInjected)
}

// parentOK reports whether name's parent directory exists. Caller holds mu.
func (m *MemFS) parentOK(name string) bool {
	p := filepath.Dir(name)
	if isRoot(p) {
		return true
	}
	ino, ok := m.cur[p]
	return ok && ino == nil
}

func (m *MemFS) Create(name string) (File, error) {
	name = clean(name)
	if m.shouldFail(OpCreate) {
		return nil, injected(OpCreate, name)
	}
	if err := m.noSpace("create", name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.parentOK(name) {
		return nil, notExist("create", name)
	}
	if ino, ok := m.cur[name]; ok && ino == nil {
		return nil, fmt.Errorf("memfs: create %s: is a directory", name)
	}
	ino := &memInode{}
	m.cur[name] = ino
	return &memFile{fs: m, name: name, ino: ino}, nil
}

func (m *MemFS) Open(name string) (File, error) {
	name = clean(name)
	if m.shouldFail(OpOpen) {
		return nil, injected(OpOpen, name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.cur[name]
	if !ok {
		return nil, notExist("open", name)
	}
	if ino == nil {
		return nil, fmt.Errorf("memfs: open %s: is a directory", name)
	}
	return &memFile{fs: m, name: name, ino: ino}, nil
}

func (m *MemFS) Stat(name string) (int64, error) {
	name = clean(name)
	m.mu.Lock()
	ino, ok := m.cur[name]
	m.mu.Unlock()
	if !ok {
		return 0, notExist("stat", name)
	}
	if ino == nil {
		return 0, nil
	}
	ino.mu.Lock()
	defer ino.mu.Unlock()
	return int64(len(ino.data)), nil
}

func (m *MemFS) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	if m.shouldFail(OpRename) {
		return injected(OpRename, oldname)
	}
	if err := m.noSpace("rename", oldname); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.cur[oldname]
	if !ok {
		return notExist("rename", oldname)
	}
	if !m.parentOK(newname) {
		return notExist("rename", newname)
	}
	if ino == nil {
		// Directory rename: move the whole subtree.
		prefix := oldname + "/"
		for n, c := range m.cur {
			if strings.HasPrefix(n, prefix) {
				delete(m.cur, n)
				m.cur[newname+"/"+n[len(prefix):]] = c
			}
		}
	}
	delete(m.cur, oldname)
	m.cur[newname] = ino
	return nil
}

func (m *MemFS) Remove(name string) error {
	name = clean(name)
	if m.shouldFail(OpRemove) {
		return injected(OpRemove, name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, ok := m.cur[name]
	if !ok {
		return notExist("remove", name)
	}
	if ino == nil {
		prefix := name + "/"
		for n := range m.cur {
			if strings.HasPrefix(n, prefix) {
				return fmt.Errorf("memfs: remove %s: directory not empty", name)
			}
		}
	}
	delete(m.cur, name)
	return nil
}

func (m *MemFS) RemoveAll(name string) error {
	name = clean(name)
	if m.shouldFail(OpRemove) {
		return injected(OpRemove, name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := name + "/"
	for n := range m.cur {
		if n == name || strings.HasPrefix(n, prefix) {
			delete(m.cur, n)
		}
	}
	return nil
}

func (m *MemFS) MkdirAll(name string) error {
	name = clean(name)
	if m.shouldFail(OpMkdir) {
		return injected(OpMkdir, name)
	}
	if err := m.noSpace("mkdir", name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := name; !isRoot(p); p = filepath.Dir(p) {
		if ino, ok := m.cur[p]; ok {
			if ino != nil {
				return fmt.Errorf("memfs: mkdir %s: not a directory", p)
			}
			continue
		}
		m.cur[p] = nil
	}
	return nil
}

func (m *MemFS) ReadDir(name string) ([]DirEntry, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !isRoot(name) {
		if ino, ok := m.cur[name]; !ok || ino != nil {
			return nil, notExist("readdir", name)
		}
	}
	var out []DirEntry
	for n, ino := range m.cur {
		if filepath.Dir(n) == name && n != name {
			out = append(out, DirEntry{Name: filepath.Base(n), IsDir: ino == nil})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (m *MemFS) SyncDir(name string) error {
	name = clean(name)
	if m.shouldFail(OpSyncDir) {
		return injected(OpSyncDir, name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !isRoot(name) {
		if ino, ok := m.cur[name]; !ok || ino != nil {
			return notExist("syncdir", name)
		}
	}
	for n := range m.synced {
		if filepath.Dir(n) == name && n != name {
			delete(m.synced, n)
		}
	}
	for n, ino := range m.cur {
		if filepath.Dir(n) == name && n != name {
			m.synced[n] = ino
		}
	}
	return nil
}

// memFile is an open handle on an inode.
type memFile struct {
	fs     *MemFS
	name   string
	ino    *memInode
	closed bool
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("memfs: negative offset")
	}
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("memfs: negative offset")
	}
	fail := f.fs.shouldFail(OpWrite)
	if fail {
		p = p[:len(p)/2]
	}
	f.ino.mu.Lock()
	var nospc error
	if size := int64(len(f.ino.data)); off+int64(len(p)) > size {
		if nospc = f.fs.noSpace("write", f.name); nospc != nil {
			if off >= size {
				f.ino.mu.Unlock()
				return 0, nospc
			}
			p = p[:size-off]
		}
	}
	end := off + int64(len(p))
	if end > int64(len(f.ino.data)) {
		if end > int64(cap(f.ino.data)) {
			nd := make([]byte, end, 2*end)
			copy(nd, f.ino.data)
			f.ino.data = nd
		} else {
			f.ino.data = f.ino.data[:end]
		}
	}
	copy(f.ino.data[off:], p)
	f.ino.mu.Unlock()
	if fail {
		return len(p), injected(OpWrite, f.name)
	}
	if nospc != nil {
		return len(p), nospc
	}
	return len(p), nil
}

func (f *memFile) Append(p []byte) (int, error) {
	f.ino.mu.Lock()
	off := int64(len(f.ino.data))
	f.ino.mu.Unlock()
	return f.WriteAt(p, off)
}

func (f *memFile) Truncate(size int64) error {
	if f.fs.shouldFail(OpTruncate) {
		return injected(OpTruncate, f.name)
	}
	if size < 0 {
		return fmt.Errorf("memfs: negative size")
	}
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	if size <= int64(len(f.ino.data)) {
		// Copy so a live mapping of the old bytes (closed first by
		// contract) never aliases the shortened file.
		f.ino.data = append([]byte(nil), f.ino.data[:size]...)
		return nil
	}
	nd := make([]byte, size)
	copy(nd, f.ino.data)
	f.ino.data = nd
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	hook := f.fs.onSync
	f.fs.mu.Unlock()
	if hook != nil {
		hook(f.name)
	}
	if f.fs.shouldFail(OpSync) {
		return injected(OpSync, f.name)
	}
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	f.ino.synced = append(f.ino.synced[:0:0], f.ino.data...)
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	return int64(len(f.ino.data)), nil
}

// Map shares the inode's bytes, as MAP_SHARED does: writes through the
// mapping are file contents at once and become durable at Sync.
func (f *memFile) Map(size int) (Mapping, error) {
	if f.fs.shouldFail(OpMap) {
		return nil, injected(OpMap, f.name)
	}
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	if size < 0 || size > len(f.ino.data) {
		return nil, fmt.Errorf("memfs: map %d bytes of a %d-byte file", size, len(f.ino.data))
	}
	// Pin the backing array: later appends must not reallocate under
	// the mapping, so give data a capacity equal to its length.
	f.ino.data = f.ino.data[:len(f.ino.data):len(f.ino.data)]
	return &memMapping{b: f.ino.data[:size:size], f: &memFile{fs: f.fs, name: f.name, ino: f.ino}}, nil
}

func (f *memFile) Close() error {
	f.closed = true
	return nil
}

// memMapping is Detached, as a Linux mapping: it keeps a handle of its
// own on the inode, and its Sync is that handle's (same faults, same
// OnSync hook as File.Sync).
type memMapping struct {
	b []byte
	f *memFile
}

func (m *memMapping) Bytes() []byte  { return m.b }
func (m *memMapping) Detached() bool { return true }
func (m *memMapping) Sync() error    { return m.f.Sync() }
func (m *memMapping) Close() error   { m.b = nil; return nil }
