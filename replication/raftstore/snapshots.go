package raftstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/segment"
)

// SnapshotStore is a raft.SnapshotStore over segment.FS for the metadata
// group (hashicorp's FileSnapshotStore writes to the OS directly, which
// would escape the MemFS of crash tests). In the snapshot directory each
// snapshot is two files:
//
//	<id>.data   the FSM's bytes (an image, replication's metadata_raft_fsm.go)
//	<id>.meta   one framed record (records.go framing): JSON of
//	            raft.SnapshotMeta plus the CRC-32C of the data file
//
// A snapshot exists once its .meta is renamed into place (after both files
// are fsync'd); the directory is fsync'd after. The newest retain
// snapshots are kept. A .meta that does not decode, or data whose size or
// CRC differ, is skipped by List or refused by Open.
type SnapshotStore struct {
	fsys   segment.FS
	dir    string
	retain int

	mu sync.Mutex // serializes Create/Close against reaping
}

var _ raft.SnapshotStore = (*SnapshotStore)(nil)

const maxSnapshotsListed = 64

// snapshotMetaJSON is the .meta body; field names are on disk.
type snapshotMetaJSON struct {
	Meta raft.SnapshotMeta `json:"meta"`
	CRC  uint32            `json:"crc"`
}

func OpenSnapshotStore(fsys segment.FS, dir string, retain int) (*SnapshotStore, error) {
	if retain < 1 {
		retain = 1
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("%w: create %s: %v", ErrStorage, dir, err)
	}
	if err := SyncDir(fsys, filepath.Dir(dir)); err != nil {
		return nil, err
	}
	return &SnapshotStore{fsys: fsys, dir: dir, retain: retain}, nil
}

func (s *SnapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("replication: snapshot version %d unsupported", version)
	}
	// Fixed-width numbers make names sort in (term, index) order.
	id := fmt.Sprintf("%020d-%020d", term, index)
	path := filepath.Join(s.dir, id+".data.tmp")
	f, err := s.fsys.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%w: create %s: %v", ErrStorage, path, err)
	}
	meta := raft.SnapshotMeta{Version: version, ID: id, Index: index, Term: term,
		Configuration: configuration, ConfigurationIndex: configurationIndex}
	if trans != nil {
		meta.Peers = encodePeers(configuration, trans)
	}
	return &snapshotSink{s: s, f: f, meta: meta}, nil
}

// encodePeers fills the deprecated Peers field as raft's stores do.
func encodePeers(c raft.Configuration, trans raft.Transport) []byte {
	var peers []string
	for _, srv := range c.Servers {
		peers = append(peers, string(trans.EncodePeer(srv.ID, srv.Address)))
	}
	b, _ := json.Marshal(peers)
	return b
}

func (s *SnapshotStore) List() ([]*raft.SnapshotMeta, error) {
	metas, err := s.list()
	if err != nil {
		return nil, err
	}
	out := make([]*raft.SnapshotMeta, 0, len(metas))
	for _, m := range metas {
		mm := m.Meta
		out = append(out, &mm)
	}
	return out, nil
}

// list returns the valid snapshots, newest first.
func (s *SnapshotStore) list() ([]snapshotMetaJSON, error) {
	ents, err := s.fsys.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("%w: list %s: %v", ErrStorage, s.dir, err)
	}
	var out []snapshotMetaJSON
	for _, e := range ents {
		if e.IsDir || !strings.HasSuffix(e.Name, ".meta") {
			continue
		}
		m, err := s.readMeta(strings.TrimSuffix(e.Name, ".meta"))
		if err != nil {
			continue
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Meta.ID > out[j].Meta.ID })
	if len(out) > maxSnapshotsListed {
		out = out[:maxSnapshotsListed]
	}
	return out, nil
}

func (s *SnapshotStore) readMeta(id string) (snapshotMetaJSON, error) {
	var m snapshotMetaJSON
	path := filepath.Join(s.dir, id+".meta")
	f, err := s.fsys.Open(path)
	if err != nil {
		return m, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return m, err
	}
	bodies, _, good, why := ReadFramedRecords(f, size)
	if good != size || len(bodies) != 1 {
		return m, fmt.Errorf("%w: %s: %s", ErrStorage, path, why)
	}
	if err := json.Unmarshal(bodies[0], &m); err != nil || m.Meta.ID != id {
		return m, fmt.Errorf("%w: %s does not decode", ErrStorage, path)
	}
	return m, nil
}

func (s *SnapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if strings.ContainsAny(id, `/\`) || id == "" {
		return nil, nil, fmt.Errorf("replication: bad snapshot id %q", id)
	}
	m, err := s.readMeta(id)
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(s.dir, id+".data")
	f, err := s.fsys.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: open %s: %v", ErrStorage, path, err)
	}
	size, err := f.Size()
	if err != nil || size != m.Meta.Size {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s is %d bytes, meta says %d", ErrStorage, path, size, m.Meta.Size)
	}
	meta := m.Meta
	return &meta, &crcReader{r: io.NewSectionReader(f, 0, size), f: f, want: m.CRC, path: path}, nil
}

// crcReader checks the data's CRC when it reaches the end: a reader that
// consumes a corrupt snapshot gets an error instead of EOF.
type crcReader struct {
	r    io.Reader
	f    segment.File
	crc  uint32
	want uint32
	path string
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.crc = crc32.Update(c.crc, crcTable, p[:n])
	if errors.Is(err, io.EOF) && c.crc != c.want {
		return n, fmt.Errorf("%w: %s: crc mismatch", ErrStorage, c.path)
	}
	return n, err
}

func (c *crcReader) Close() error { return c.f.Close() }

// reap removes all but the newest retain snapshots and stray temp files.
func (s *SnapshotStore) reap() error {
	metas, err := s.list()
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for i, m := range metas {
		if i < s.retain {
			keep[m.Meta.ID] = true
		}
	}
	ents, err := s.fsys.ReadDir(s.dir)
	if err != nil {
		return err
	}
	removed := false
	for _, e := range ents {
		id := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(e.Name, ".tmp"), ".data"), ".meta")
		if keep[id] && !strings.HasSuffix(e.Name, ".tmp") {
			continue
		}
		if err := s.fsys.Remove(filepath.Join(s.dir, e.Name)); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		return SyncDir(s.fsys, s.dir)
	}
	return nil
}

// snapshotSink writes one snapshot. Used by one goroutine (raft's).
type snapshotSink struct {
	s    *SnapshotStore
	f    segment.File
	meta raft.SnapshotMeta
	crc  uint32
	done bool
}

func (k *snapshotSink) ID() string { return k.meta.ID }

func (k *snapshotSink) Write(p []byte) (int, error) {
	if k.done {
		return 0, errors.New("replication: write to a closed snapshot")
	}
	n, err := k.f.Append(p)
	k.crc = crc32.Update(k.crc, crcTable, p[:n])
	k.meta.Size += int64(n)
	if err != nil {
		return n, fmt.Errorf("%w: write snapshot %s: %v", ErrStorage, k.meta.ID, err)
	}
	return n, nil
}

func (k *snapshotSink) Cancel() error {
	if k.done {
		return nil
	}
	k.done = true
	k.f.Close()
	return k.s.fsys.Remove(filepath.Join(k.s.dir, k.meta.ID+".data.tmp"))
}

func (k *snapshotSink) Close() error {
	if k.done {
		return nil
	}
	k.done = true
	s := k.s
	s.mu.Lock()
	defer s.mu.Unlock()
	base := filepath.Join(s.dir, k.meta.ID)
	err := k.f.Sync()
	if cerr := k.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: sync snapshot %s: %v", ErrStorage, k.meta.ID, err)
	}
	body, err := json.Marshal(snapshotMetaJSON{Meta: k.meta, CRC: k.crc})
	if err != nil {
		return err
	}
	rec, err := FrameRecord(nil, body)
	if err != nil {
		return err
	}
	err = segment.WriteSynced(s.fsys, base+".meta.tmp", rec)
	if err == nil {
		err = s.fsys.Rename(base+".data.tmp", base+".data")
	}
	if err == nil {
		err = s.fsys.Rename(base+".meta.tmp", base+".meta")
	}
	if err == nil {
		err = s.fsys.SyncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("%w: finish snapshot %s: %v", ErrStorage, k.meta.ID, err)
	}
	return s.reap()
}

// RemoveAll removes every snapshot (an interrupted install leaves the
// replica empty: replication's partition_snapshots.go) and fsyncs the
// directory.
func (s *SnapshotStore) RemoveAll() error {
	metas, err := s.list()
	if err != nil {
		return err
	}
	for _, m := range metas {
		base := filepath.Join(s.dir, m.Meta.ID)
		s.fsys.Remove(base + ".meta")
		s.fsys.Remove(base + ".data")
	}
	return SyncDir(s.fsys, s.dir)
}
