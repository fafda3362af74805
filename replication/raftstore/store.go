package raftstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"syscall"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/replication/transport"
	"github.com/strata-io/strata/segment"
)

// Raft's own storage (replication/doc.go, "Raft design"):
// LogFile is a raft.LogStore and StableFile a raft.StableStore,
// both over segment.FS so crash tests can run them on a MemFS.
// raft-boltdb is not an allowed dependency, and the metadata log is small
// (commands are rare and snapshots compact it), so a flat file of framed
// entries, held in memory too, is enough.
//
// raft log file (metadata-raft.log), records as in metadata.log:
//
//	+------------+------------+----------------------------------------+
//	| length u32 | crc32c u32 | entry: index, term, type, data, ext,   |
//	|            |            | appendedAt (transport.EncodeLog)       |
//	+------------+------------+----------------------------------------+
//
// Entries are consecutive by index. A torn or corrupt tail is truncated at
// open (an entry not fsync'd was never acknowledged to the leader). A
// suffix delete (raft's conflict rule) truncates the file; a prefix delete
// (after a snapshot) rewrites it (tmp, fsync, rename, dir fsync).
//
// stable file (metadata-raft.state; each partition group has one too):
// 4 KiB reserved at creation, two slots rewritten in place in turn, each
// a CRC'd JSON object of raft's keys (StableFile: a term save never
// needs disk space).

const (
	LogFileName    = "metadata-raft.log"
	StableFileName = "metadata-raft.state"
	// maxRaftLogEntries bounds the entries held; raft compacts long
	// before (SnapshotThreshold + TrailingLogs).
	maxRaftLogEntries = 1 << 20
)

// ErrNotFound must read "not found": hashicorp/raft compares the
// text (raft.go, "not found") to tell a fresh store from a broken one.
var ErrNotFound = errors.New("not found")

// LogFile is a raft.LogStore in one file. Safe for concurrent use:
// raft reads (GetLog) from its replication goroutines while its main
// goroutine writes.
type LogFile struct {
	fsys segment.FS
	dir  string
	path string
	// sparse allows gaps between indexes (a partition group's side log
	// holds only raft's own entries, replication/doc.go); indexes still only grow.
	// A sparse log is also written without fsync: its owner
	// (partitionStore) calls Sync, before any later batch reaches the
	// segments and as the partition's flush policy says.
	sparse bool
	// reserve is the space kept written (zeros) past the last record, so
	// that raft's own small entries (a new leader's no-op, configuration
	// changes, a leader report) are written inside the file on a full
	// disk instead of failing: hashicorp/raft steps a leader down when
	// its log cannot be written, and a single voter would then elect
	// itself and fail again, over and over, leaving the broker without a
	// controller (replication/partition_disk_space.go). Topped up to reserve when less than
	// half is left; a top-up that meets ENOSPC keeps what remains.
	reserve int64
	// onDemand (a sparse log) keeps no file open between operations:
	// each write, fsync or cut opens the file by path and closes it
	// again. A partition's side log is written only for raft's own
	// entries and side commands (a leader's no-op, configuration
	// changes, refusals, DeleteRecords, share-state changes), never for
	// a batch; held open, it was one descriptor per replica for nothing.
	// Its reads come from memory (entries), so only writes reopen it.
	onDemand bool

	mu      sync.RWMutex
	f       segment.File // protected by mu; nil between operations when onDemand
	closed  bool         // protected by mu
	entries []*raft.Log  // protected by mu; entries[i].Index == entries[0].Index+i
	pos     []int64      // protected by mu; file position of each entry's record
	size    int64        // protected by mu; bytes of whole records
	phys    int64        // protected by mu; the file's length: size and the zeros after it
	werr    error        // protected by mu; sticky write error
	dirty   bool         // protected by mu; written since the last fsync (sparse only)
}

const (
	// metadataLogReserve is the metadata raft log's reserve (one file
	// per broker).
	metadataLogReserve = 1 << 20
	// sideLogReserve is a partition group's side log's (one per
	// partition): a few hundred of raft's own entries.
	sideLogReserve = 16 << 10
	// maxReserveTail bounds the zero tail taken for a reserve at open;
	// longer runs of zeros are damage, cut as before.
	maxReserveTail = 4 << 20
)

var _ raft.LogStore = (*LogFile)(nil)

func OpenLogFile(fsys segment.FS, dir string, logger *slog.Logger) (*LogFile, error) {
	return OpenLogFileNamed(fsys, dir, LogFileName, false, logger)
}

func OpenLogFileNamed(fsys segment.FS, dir, name string, sparse bool, logger *slog.Logger) (*LogFile, error) {
	path := filepath.Join(dir, name)
	f, err := openOrCreate(fsys, dir, path)
	if err != nil {
		return nil, err
	}
	l := &LogFile{fsys: fsys, dir: dir, path: path, f: f, sparse: sparse, onDemand: sparse, reserve: metadataLogReserve}
	if sparse {
		l.reserve = sideLogReserve
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: size of %s: %v", ErrStorage, path, err)
	}
	bodies, positions, good, why := ReadFramedRecords(f, size)
	for i, body := range bodies {
		e, err := transport.DecodeLog(body)
		if err != nil {
			good, why = positions[i], "undecodable entry: "+err.Error()
			break
		}
		if n := len(l.entries); n > 0 && !l.next(l.entries[n-1].Index, e.Index) {
			good, why = positions[i], fmt.Sprintf("entry %d after %d", e.Index, l.entries[n-1].Index)
			break
		}
		l.entries = append(l.entries, e)
		l.pos = append(l.pos, positions[i])
	}
	l.size, l.phys = good, good
	switch {
	case good < size && zeroTail(f, good, size):
		l.phys = size // the reserve, kept as it is
	case good < size:
		logger.Warn("metadata raft log: truncating torn or corrupt tail", "path", path,
			"position", good, "dropped_bytes", size-good, "reason", why)
		if err := f.Truncate(good); err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: truncate %s: %v", ErrStorage, path, err)
		}
	}
	l.topUpLocked(f)
	if l.onDemand {
		l.f = nil
		f.Close()
	}
	return l, nil
}

// fileLocked returns the open file: the one held, or (onDemand) the file
// opened again by path, which releaseLocked closes. An fsync through a
// descriptor opened later covers what was written through an earlier one
// (it syncs the file, and Linux reports a write-back error not yet seen
// to a descriptor opened after it).
func (l *LogFile) fileLocked() (segment.File, error) {
	if l.f != nil {
		return l.f, nil
	}
	if l.closed {
		return nil, fmt.Errorf("%w: %s closed", ErrStorage, l.path)
	}
	f, err := l.fsys.Open(l.path)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", ErrStorage, l.path, err)
	}
	return f, nil
}

// releaseLocked closes f when fileLocked opened it for one operation. Its
// error is not the operation's: durability is the fsync's.
func (l *LogFile) releaseLocked(f segment.File) {
	if f != l.f {
		f.Close()
	}
}

// zeroTail reports whether f's bytes [from, to) are all zero and at most
// maxReserveTail long: a reserve, not damage.
func zeroTail(f segment.File, from, to int64) bool {
	if to-from > maxReserveTail {
		return false
	}
	buf := make([]byte, min(to-from, 64<<10))
	for off := from; off < to; {
		n := min(int64(len(buf)), to-off)
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return false
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false
			}
		}
		off += n
	}
	return true
}

// topUpLocked writes zeros past the last record until reserve bytes
// follow it, when less than half of that is left. On a full disk it
// keeps what remains (the partial write cut).
func (l *LogFile) topUpLocked(f segment.File) {
	if l.reserve == 0 || l.werr != nil || l.phys-l.size >= l.reserve/2 {
		return
	}
	want := l.size + l.reserve
	if _, err := f.WriteAt(make([]byte, want-l.phys), l.phys); err != nil {
		_ = f.Truncate(l.phys)
		return
	}
	l.phys = want
}

func openOrCreate(fsys segment.FS, dir, path string) (segment.File, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = fsys.Create(path)
		if err == nil {
			if err = fsys.SyncDir(dir); err != nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", ErrStorage, path, err)
	}
	return f, nil
}

// ReadFramedRecords reads length+CRC framed records (replication/metadata_log.go's
// framing without its version byte) and returns their bodies, where each
// starts, the length of the valid prefix and why the rest was rejected.
func ReadFramedRecords(f segment.File, size int64) (bodies [][]byte, positions []int64, good int64, why string) {
	var hdr [HeaderBytes]byte
	for good < size {
		if size-good < HeaderBytes {
			return bodies, positions, good, "partial header"
		}
		if _, err := f.ReadAt(hdr[:], good); err != nil {
			return bodies, positions, good, "read header: " + err.Error()
		}
		n := int64(binary.BigEndian.Uint32(hdr[0:4]))
		if n < 1 || n > MaxRecordBytes {
			return bodies, positions, good, fmt.Sprintf("record length %d out of range", n)
		}
		if size-good-HeaderBytes < n {
			return bodies, positions, good, fmt.Sprintf("record of %d bytes runs past the end", n)
		}
		body := make([]byte, n)
		if _, err := f.ReadAt(body, good+HeaderBytes); err != nil {
			return bodies, positions, good, "read record: " + err.Error()
		}
		if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(hdr[4:8]) {
			return bodies, positions, good, "crc mismatch"
		}
		if len(bodies) >= maxRaftLogEntries {
			return bodies, positions, good, "too many records"
		}
		bodies = append(bodies, body)
		positions = append(positions, good)
		good += HeaderBytes + n
	}
	return bodies, positions, good, ""
}

// FrameRecord appends one framed record holding body to b.
func FrameRecord(b, body []byte) ([]byte, error) {
	if len(body) == 0 || len(body) > MaxRecordBytes {
		return b, fmt.Errorf("replication: raft record of %d bytes (1..%d)", len(body), MaxRecordBytes)
	}
	var hdr [HeaderBytes]byte
	binary.BigEndian.PutUint32(hdr[0:4], uint32(len(body)))
	binary.BigEndian.PutUint32(hdr[4:8], crc32.Checksum(body, crcTable))
	b = append(b, hdr[:]...)
	return append(b, body...), nil
}

// next reports whether index may follow last.
func (l *LogFile) next(last, index uint64) bool {
	if l.sparse {
		return index > last
	}
	return index == last+1
}

// search returns the position of the first entry with Index >= index.
func (l *LogFile) search(index uint64) int {
	return sort.Search(len(l.entries), func(i int) bool { return l.entries[i].Index >= index })
}

// EntriesFrom returns the entries held from index on (those a partition
// group's side log holds between its segments' batches: replication's
// partition_store.go). The slice is the file's own: read it, never write.
func (l *LogFile) EntriesFrom(index uint64) []*raft.Log {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.entries[l.search(index):]
}

func (l *LogFile) FirstIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.entries) == 0 {
		return 0, nil
	}
	return l.entries[0].Index, nil
}

func (l *LogFile) LastIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.entries) == 0 {
		return 0, nil
	}
	return l.entries[len(l.entries)-1].Index, nil
}

func (l *LogFile) GetLog(index uint64, out *raft.Log) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	i := l.search(index)
	if i == len(l.entries) || l.entries[i].Index != index {
		return raft.ErrLogNotFound
	}
	*out = *l.entries[i]
	return nil
}

func (l *LogFile) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

// StoreLogs appends entries with one write and one fsync (a sparse log's
// fsync is its owner's: Sync). Raft only appends after the last entry (it
// deletes a conflicting suffix first); anything else is refused.
func (l *LogFile) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.werr != nil {
		return l.werr
	}
	if len(l.entries)+len(logs) > maxRaftLogEntries {
		return fmt.Errorf("%w: more than %d raft entries held", ErrStorage, maxRaftLogEntries)
	}
	var buf []byte
	pos := make([]int64, 0, len(logs))
	last, have := uint64(0), len(l.entries) > 0
	if have {
		last = l.entries[len(l.entries)-1].Index
	}
	for _, e := range logs {
		if have && !l.next(last, e.Index) {
			return fmt.Errorf("%w: raft entry %d stored after %d", ErrStorage, e.Index, last)
		}
		last, have = e.Index, true
		pos = append(pos, l.size+int64(len(buf)))
		var err error
		if buf, err = FrameRecord(buf, transport.EncodeLog(nil, e)); err != nil {
			return err
		}
	}
	f, err := l.fileLocked()
	if err != nil {
		return err
	}
	defer l.releaseLocked(f)
	if _, err := f.WriteAt(buf, l.size); err != nil {
		if errors.Is(err, syscall.ENOSPC) && f.Truncate(l.size) == nil {
			l.phys = l.size
			// The disk is full: nothing past l.size was acknowledged, and
			// with the partial write cut the file is as before. Only this
			// append fails (raft steps down or answers its leader so);
			// appends work again once space returns.
			return fmt.Errorf("%w: write %s: %w", ErrStorage, l.path, err)
		}
		l.werr = fmt.Errorf("%w: write %s: %v", ErrStorage, l.path, err)
		return l.werr
	}
	if l.sparse {
		l.dirty = true
	} else if err := f.Sync(); err != nil {
		l.werr = fmt.Errorf("%w: fsync %s: %v", ErrStorage, l.path, err)
		return l.werr
	}
	l.size += int64(len(buf))
	l.phys = max(l.phys, l.size)
	l.topUpLocked(f)
	for _, e := range logs {
		c := *e
		c.Data = append([]byte(nil), e.Data...)
		c.Extensions = append([]byte(nil), e.Extensions...)
		l.entries = append(l.entries, &c)
	}
	l.pos = append(l.pos, pos...)
	return nil
}

// DeleteRange removes entries min..max inclusive: a suffix (conflict) or
// a prefix (compaction after a snapshot), never a middle.
func (l *LogFile) DeleteRange(min, max uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.werr != nil {
		return l.werr
	}
	n := len(l.entries)
	if n == 0 || min > max {
		return nil
	}
	lo, hi := l.search(min), l.search(max)
	if hi < n && l.entries[hi].Index == max {
		hi++
	}
	// Entries [lo, hi) go.
	switch {
	case lo >= hi:
		return nil
	case hi == n: // suffix (possibly everything)
		cut := l.pos[lo]
		f, err := l.fileLocked()
		if err != nil {
			return err
		}
		defer l.releaseLocked(f)
		err = f.Truncate(cut)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			l.werr = fmt.Errorf("%w: truncate %s: %v", ErrStorage, l.path, err)
			return l.werr
		}
		l.entries, l.pos, l.size, l.phys, l.dirty = l.entries[:lo], l.pos[:lo], cut, cut, false
		l.topUpLocked(f)
		return nil
	case lo == 0: // prefix: rewrite what is left
		return l.rewriteLocked(l.entries[hi:])
	}
	return fmt.Errorf("%w: cannot delete raft entries %d..%d from the middle of %d..%d", ErrStorage, min, max, l.entries[0].Index, l.entries[n-1].Index)
}

// rewriteLocked replaces the file with keep (tmp, fsync, rename, dir fsync).
func (l *LogFile) rewriteLocked(keep []*raft.Log) error {
	var buf []byte
	pos := make([]int64, 0, len(keep))
	for _, e := range keep {
		pos = append(pos, int64(len(buf)))
		var err error
		if buf, err = FrameRecord(buf, transport.EncodeLog(nil, e)); err != nil {
			return err
		}
	}
	tmp := l.path + ".tmp"
	f, err := l.fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("%w: create %s: %v", ErrStorage, tmp, err)
	}
	_, err = f.WriteAt(buf, 0)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("%w: write %s: %v", ErrStorage, tmp, err)
	}
	if err := l.fsys.Rename(tmp, l.path); err != nil {
		f.Close()
		return fmt.Errorf("%w: rename %s: %v", ErrStorage, tmp, err)
	}
	if err := SyncDir(l.fsys, l.dir); err != nil {
		// The rename may or may not survive a crash; both files are valid
		// logs, so only further writes must stop.
		f.Close()
		l.werr = err
		return err
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.dirty = f, false
	l.entries = append([]*raft.Log(nil), keep...)
	l.pos, l.size = pos, int64(len(buf))
	l.phys = l.size
	l.topUpLocked(f)
	if l.onDemand {
		l.f = nil
		f.Close()
	}
	return nil
}

// Err is the sticky write error, if any: after it the log takes no more
// entries until the broker restarts.
func (l *LogFile) Err() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil
	}
	return l.werr
}

// Sync makes every entry stored so far durable (a no-op when nothing was
// written since the last fsync).
func (l *LogFile) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.syncLocked()
}

func (l *LogFile) syncLocked() error {
	if l.werr != nil {
		return l.werr
	}
	if !l.dirty {
		return nil
	}
	f, err := l.fileLocked()
	if err != nil {
		return err // not sticky: nothing failed to reach the disk yet
	}
	defer l.releaseLocked(f)
	if err := f.Sync(); err != nil {
		l.werr = fmt.Errorf("%w: fsync %s: %v", ErrStorage, l.path, err)
		return l.werr
	}
	l.dirty = false
	return nil
}

// Dirty reports whether entries were stored since the last fsync.
func (l *LogFile) Dirty() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.dirty
}

func (l *LogFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	wasDirty := l.dirty && l.werr == nil
	serr := l.syncLocked()
	var err error
	if l.f != nil {
		err = l.f.Close()
	}
	if err == nil && wasDirty {
		err = serr
	}
	l.f, l.closed = nil, true
	if l.werr == nil {
		l.werr = fmt.Errorf("%w: closed", ErrStorage)
	}
	return err
}

// StableFile is a raft.StableStore: a handful of keys (current term,
// last vote). Safe for concurrent use.
//
// Its space is reserved ahead, so that saving a term never needs a new
// block of the disk: hashicorp/raft panics when it cannot save its current
// term, and a full disk must not take the broker down. The file is
// stableFileBytes long from its creation (written out, not sparse) and
// holds two slots; a Set writes the new state into the slot that does not
// hold the current one, in place, and fsyncs it: one write within the
// file's allocated blocks and one fsync, no rename, no growth, so ENOSPC
// cannot happen on file systems that overwrite in place (ext4, xfs,
// tmpfs; copy-on-write ones such as btrfs and zfs may still need space).
// Each slot:
//
//	+-------------+------------+------------+---------+------------------+
//	| "SST1" (4)  | length u32 | crc32c u32 | seq u64 | JSON of the keys |
//	+-------------+------------+------------+---------+------------------+
//
// length counts seq and the JSON; the CRC covers them. The slot with the
// higher seq whose CRC holds is the state. A crash mid-write tears only
// the slot being written, whose Set never returned; the other slot still
// holds the last acknowledged state. Both slots unreadable is corruption,
// and raft must not start with a forgotten vote (it could vote twice in
// one term). The older format (a log of framed records, each the whole
// key map, compacted by replacing the file) is read and rewritten in this
// one at open.
//
// A failed write sticks (werr): the vote may not be durable, so the store
// refuses every later Set. When the failed Set is raft's current term,
// onFatal is called first (Broker.openRaftStable: log and exit the
// process): raft would panic on the error.
type StableFile struct {
	fsys segment.FS
	dir  string
	path string
	// onFatal, when set, is called with the error of a failed save of
	// raft's current term, before Set returns it to raft (which panics).
	onFatal func(error)

	mu   sync.Mutex
	kv   map[string][]byte // protected by mu
	seq  uint64            // protected by mu; seq of the current state's slot
	werr error             // protected by mu
}

var _ raft.StableStore = (*StableFile)(nil)

const (
	// maxStableKeys bounds the store; raft uses three keys, partition
	// groups two more.
	maxStableKeys = 64
	// stableFileBytes is the stable file's reserved size: two slots.
	stableFileBytes = 4096
	stableSlotBytes = stableFileBytes / 2
	// stableSlotHeader is magic, length and CRC.
	stableSlotHeader = 12
	// maxStableRecordBytes bounds one state (seq and JSON) in a slot.
	maxStableRecordBytes = stableSlotBytes - stableSlotHeader
	// legacyStableRecordBytes bounds a record of the older, appended
	// format; a torn tail is shorter.
	legacyStableRecordBytes = 4 << 10
	// keyCurrentTerm is hashicorp/raft's key for its current term.
	keyCurrentTerm = "CurrentTerm"
)

var stableMagic = []byte("SST1")

func OpenStableFile(fsys segment.FS, dir string) (*StableFile, error) {
	s := &StableFile{fsys: fsys, dir: dir, path: filepath.Join(dir, StableFileName), kv: map[string][]byte{}}
	f, err := fsys.Open(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		// Reserve the file's space now, while a failure is an error
		// opening the group rather than raft's panic.
		return s, s.rewrite()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", ErrStorage, s.path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("%w: size of %s: %v", ErrStorage, s.path, err)
	}
	if size == stableFileBytes {
		var buf [stableFileBytes]byte
		if _, err := f.ReadAt(buf[:], 0); err != nil {
			return nil, fmt.Errorf("%w: read %s: %v", ErrStorage, s.path, err)
		}
		if bytes.Equal(buf[:4], stableMagic) || bytes.Equal(buf[stableSlotBytes:stableSlotBytes+4], stableMagic) {
			found := false
			for slot := 0; slot < 2; slot++ {
				seq, kv, ok := decodeStableSlot(buf[slot*stableSlotBytes : (slot+1)*stableSlotBytes])
				if ok && (!found || seq > s.seq) {
					s.seq, s.kv, found = seq, kv, true
				}
			}
			if !found {
				return nil, fmt.Errorf("%w: %s is corrupt (neither slot decodes)", ErrStorage, s.path)
			}
			return s, nil
		}
	}
	// The older format: a log of framed records; the last whole one is
	// the state. Rewritten in the reserved format.
	bodies, _, good, why := ReadFramedRecords(f, size)
	if len(bodies) == 0 || size-good >= legacyStableRecordBytes {
		return nil, fmt.Errorf("%w: %s is corrupt (%d whole records, %d bytes after them: %s)", ErrStorage, s.path, len(bodies), size-good, why)
	}
	last := bodies[len(bodies)-1]
	if len(last) > legacyStableRecordBytes {
		return nil, fmt.Errorf("%w: %s holds a record of %d bytes", ErrStorage, s.path, len(last))
	}
	if err := json.Unmarshal(last, &s.kv); err != nil || len(s.kv) > maxStableKeys {
		return nil, fmt.Errorf("%w: %s does not decode: %v", ErrStorage, s.path, err)
	}
	return s, s.rewrite()
}

// decodeStableSlot decodes one slot; ok is false for an empty, torn or
// corrupt one.
func decodeStableSlot(b []byte) (seq uint64, kv map[string][]byte, ok bool) {
	if !bytes.Equal(b[:4], stableMagic) {
		return 0, nil, false
	}
	n := int(binary.BigEndian.Uint32(b[4:8]))
	if n < 8 || n > maxStableRecordBytes {
		return 0, nil, false
	}
	rec := b[stableSlotHeader : stableSlotHeader+n]
	if crc32.Checksum(rec, crcTable) != binary.BigEndian.Uint32(b[8:12]) {
		return 0, nil, false
	}
	kv = map[string][]byte{}
	if err := json.Unmarshal(rec[8:], &kv); err != nil || len(kv) > maxStableKeys {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(rec[:8]), kv, true
}

// encodeStableSlot is the slot holding kv at seq.
func encodeStableSlot(seq uint64, kv map[string][]byte) ([]byte, error) {
	body, err := json.Marshal(kv)
	if err != nil {
		return nil, fmt.Errorf("replication: encode raft state: %w", err)
	}
	n := 8 + len(body)
	if n > maxStableRecordBytes {
		return nil, fmt.Errorf("%w: raft state of %d bytes (at most %d)", ErrStorage, len(body), maxStableRecordBytes-8)
	}
	b := make([]byte, stableSlotHeader+n)
	copy(b, stableMagic)
	binary.BigEndian.PutUint32(b[4:8], uint32(n))
	binary.BigEndian.PutUint64(b[stableSlotHeader:], seq)
	copy(b[stableSlotHeader+8:], body)
	binary.BigEndian.PutUint32(b[8:12], crc32.Checksum(b[stableSlotHeader:], crcTable))
	return b, nil
}

// rewrite replaces the file by a reserved one holding the current state
// in its slot (seq's parity; a temporary, fsync'd, renamed, the directory
// fsync'd): at open only, where the disk may still refuse.
func (s *StableFile) rewrite() error {
	s.seq++
	slot, err := encodeStableSlot(s.seq, s.kv)
	if err != nil {
		return err
	}
	buf := make([]byte, stableFileBytes)
	copy(buf[(s.seq%2)*stableSlotBytes:], slot)
	if err := segment.ReplaceFile(s.fsys, s.path, buf); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// SetOnFatal sets the function called with the error of a failed save
// of raft's current term (above); call it before raft starts.
func (s *StableFile) SetOnFatal(fn func(error)) { s.onFatal = fn }

func (s *StableFile) Set(key []byte, val []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.setLocked(key, val)
	if err != nil && s.onFatal != nil && string(key) == keyCurrentTerm {
		s.onFatal(fmt.Errorf("save raft's current term in %s: %w", s.path, err))
	}
	return err
}

func (s *StableFile) setLocked(key []byte, val []byte) error {
	if s.werr != nil {
		return s.werr
	}
	if _, ok := s.kv[string(key)]; !ok && len(s.kv) >= maxStableKeys {
		return fmt.Errorf("%w: more than %d stable keys", ErrStorage, maxStableKeys)
	}
	next := make(map[string][]byte, len(s.kv)+1)
	for k, v := range s.kv {
		next[k] = v
	}
	next[string(key)] = append([]byte(nil), val...)
	slot, err := encodeStableSlot(s.seq+1, next)
	if err != nil {
		return err
	}
	// The current state is in slot seq%2; the next goes in the other.
	if err := s.writeSlot(slot, int64((s.seq+1)%2)*stableSlotBytes); err != nil {
		s.werr = err // the vote may not be durable: stop voting
		return err
	}
	s.seq++
	s.kv = next
	return nil
}

// writeSlot writes slot at off, inside the reserved file, and fsyncs it.
func (s *StableFile) writeSlot(slot []byte, off int64) error {
	f, err := s.fsys.Open(s.path)
	if err != nil {
		return fmt.Errorf("%w: open %s: %v", ErrStorage, s.path, err)
	}
	_, err = f.WriteAt(slot, off)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: write %s: %w", ErrStorage, s.path, err)
	}
	return nil
}

func (s *StableFile) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kv[string(key)]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]byte(nil), v...), nil
}

func (s *StableFile) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

func (s *StableFile) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stable key %q holds %d bytes, not a uint64", ErrStorage, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
