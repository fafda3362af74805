package segment

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"sync/atomic"
	"syscall"
)

// ErrStorage wraps every I/O failure; once a write or fsync fails the
// segment keeps returning it (the write error sticks) until it is reopened.
var ErrStorage = errors.New("segment: storage error")

// File name extensions (on-disk format, as Kafka's).
const (
	LogExt       = ".log"
	IndexExt     = ".index"
	TimeIndexExt = ".timeindex"
)

// Defaults for Options fields left zero (Kafka's defaults).
const (
	DefaultIndexBytes    = 10 << 20
	DefaultIndexInterval = 4096
)

// FileName is the Kafka-style name of a segment file: the base offset
// zero-padded to 20 digits plus the extension.
func FileName(base int64, ext string) string { return fmt.Sprintf("%020d%s", base, ext) }

// Options tune a segment.
type Options struct {
	IndexBytes    int // segment.index.bytes: preallocated size of each index file
	IndexInterval int // index.interval.bytes: bytes between sparse index entries
}

func (o Options) withDefaults() Options {
	if o.IndexBytes <= 0 {
		o.IndexBytes = DefaultIndexBytes
	}
	if o.IndexBytes < 4*timeEntrySize {
		o.IndexBytes = 4 * timeEntrySize
	}
	if o.IndexInterval <= 0 {
		o.IndexInterval = DefaultIndexInterval
	}
	return o
}

// BatchInfo describes one batch inside a buffer passed to Append.
type BatchInfo struct {
	Pos          int   // start within the buffer
	Len          int   // whole batch size
	LastOffset   int64 // absolute offset of the batch's last record
	MaxTimestamp int64
}

// Segment is one segment: the .log file and its two indexes.
//
// Concurrency: one owner goroutine at a time calls the mutating methods and
// the index lookups (the log package holds its partition lock for that).
// ReadAt may be called without that lock by a reader holding a reference
// (Acquire/Release): the log file stays open until the last reference is
// released, even after Close or Remove.
type Segment struct {
	fs   FS
	dir  string
	base int64
	opts Options

	log  File
	oix  *index // offset index
	tix  *index // time index
	refs atomic.Int32

	// The fields below are owned by the segment's owner.
	size       int64 // bytes of whole batches in the log; Invariant: file size == size unless werr != nil
	next       int64 // offset after the last batch (base when empty)
	maxTs      int64 // largest batch max timestamp, -1 when none
	maxTsOff   int64 // last offset of the batch holding maxTs
	sinceIndex int64 // bytes appended since the last offset index entry
	lastTixTs  int64 // timestamp of the last time index entry, -1 when none
	werr       error // sticky write error
	sealed     bool  // indexes trimmed; appends need Reactivate
	closed     bool
}

func (s *Segment) path(ext string) string { return filepath.Join(s.dir, FileName(s.base, ext)) }

// Base is the segment's base offset.
func (s *Segment) Base() int64 { return s.base }

// Size is the byte size of the whole batches in the segment.
func (s *Segment) Size() int64 { return s.size }

// NextOffset is the offset after the segment's last batch.
func (s *Segment) NextOffset() int64 { return s.next }

// Empty reports a segment with no batches.
func (s *Segment) Empty() bool { return s.size == 0 }

// MaxTimestamp is the largest batch timestamp and the last offset of its
// batch; (-1, -1) when the segment is empty.
func (s *Segment) MaxTimestamp() (ts, offset int64) {
	if s.maxTs < 0 {
		return -1, -1
	}
	return s.maxTs, s.maxTsOff
}

// Err returns the sticky write error, if any.
func (s *Segment) Err() error { return s.werr }

// Create makes a new empty segment at base, replacing stale files, and
// syncs the directory so the new files' names are durable.
func Create(fsys FS, dir string, base int64, opts Options) (*Segment, error) {
	s := &Segment{fs: fsys, dir: dir, base: base, opts: opts.withDefaults(), next: base, maxTs: -1, maxTsOff: -1, lastTixTs: -1}
	for _, ext := range []string{IndexExt, TimeIndexExt} {
		if err := fsys.Remove(s.path(ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %v", ErrStorage, err)
		}
	}
	f, err := fsys.Create(s.path(LogExt))
	if err != nil {
		return nil, fmt.Errorf("%w: create %s: %v", ErrStorage, s.path(LogExt), err)
	}
	s.log = f
	if err := s.openIndexes(true); err != nil {
		f.Close()
		return nil, err
	}
	if err := fsys.SyncDir(dir); err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("%w: sync dir %s: %v", ErrStorage, dir, err)
	}
	s.refs.Store(1)
	return s, nil
}

// openIndexes opens both indexes, preallocated for appends when writable.
// It reports whether either was missing.
func (s *Segment) openIndexes(writable bool) error {
	max := 0
	if writable {
		max = s.opts.IndexBytes
	}
	oix, _, err := openIndex(s.fs, s.path(IndexExt), offsetEntrySize, max)
	if err != nil {
		return fmt.Errorf("%w: index %s: %v", ErrStorage, s.path(IndexExt), err)
	}
	tix, _, err := openIndex(s.fs, s.path(TimeIndexExt), timeEntrySize, max)
	if err != nil {
		oix.closeNoTrim()
		return fmt.Errorf("%w: index %s: %v", ErrStorage, s.path(TimeIndexExt), err)
	}
	s.oix, s.tix = oix, tix
	return nil
}

func (s *Segment) closeFiles() {
	if s.oix != nil {
		s.oix.closeNoTrim()
	}
	if s.tix != nil {
		s.tix.closeNoTrim()
	}
	if s.log != nil {
		s.log.Close()
	}
}

// IndexFull reports that an index has no room for another entry (the
// time index keeps one slot for the entry written at seal, as Kafka does).
func (s *Segment) IndexFull() bool {
	return s.oix.full() || (s.tix.n+2)*timeEntrySize > len(s.tix.b)
}

// CanHold reports whether a batch ending at lastOffset can go in this
// segment: relative offsets must fit in the index's uint32 and positions
// in uint32 (the caller rolls otherwise).
func (s *Segment) CanHold(bytes int64, lastOffset int64) bool {
	return lastOffset-s.base <= math.MaxUint32 && s.size+bytes <= math.MaxUint32 && !s.IndexFull()
}

// Append writes buf, which holds whole batches described by batches, with
// one write call, then indexes them. Offsets must continue from
// NextOffset; the caller checked CanHold.
func (s *Segment) Append(buf []byte, batches []BatchInfo) error {
	if s.werr != nil {
		return s.werr
	}
	if s.closed || s.sealed {
		return fmt.Errorf("%w: append to a sealed or closed segment %d", ErrStorage, s.base)
	}
	if _, err := s.log.Append(buf); err != nil {
		if errors.Is(err, syscall.ENOSPC) && s.log.Truncate(s.size) == nil {
			// The disk is full: the partial write is cut, the segment is
			// as before, and only this append fails (Err stays nil):
			// appends work again once space returns.
			return fmt.Errorf("%w: write %s: %w", ErrStorage, s.path(LogExt), err)
		}
		s.werr = fmt.Errorf("%w: write %s: %v", ErrStorage, s.path(LogExt), err)
		return s.werr
	}
	start := s.size
	for _, b := range batches {
		s.indexBatch(start+int64(b.Pos), int64(b.Len), b.LastOffset, b.MaxTimestamp)
	}
	s.size += int64(len(buf))
	return nil
}

// indexBatch updates the segment's bookkeeping for one batch at pos, the
// same way for appends and for recovery scans (so a rebuilt index equals
// the original).
func (s *Segment) indexBatch(pos, size, lastOffset, maxTs int64) {
	if maxTs > s.maxTs {
		s.maxTs, s.maxTsOff = maxTs, lastOffset
	}
	if s.sinceIndex > int64(s.opts.IndexInterval) && !s.IndexFull() {
		s.oix.appendOffset(uint32(lastOffset-s.base), uint32(pos))
		if s.maxTs > s.lastTixTs {
			s.tix.appendTime(s.maxTs, uint32(s.maxTsOff-s.base))
			s.lastTixTs = s.maxTs
		}
		s.sinceIndex = 0
	}
	s.sinceIndex += size
	s.next = lastOffset + 1
}

// SyncLog makes the log's appended batches durable, not the indexes.
// Enough for a flush policy's per-batch fsync: the indexes are hints that
// recovery checks and re-derives (see "Invariants and recovery" in
// doc.go), and every zeroing of index entries (TruncateTo, recovery at
// open) is followed by a full Sync by the log package, so an index entry
// that reaches the disk without a sync is one written for the current
// log.
func (s *Segment) SyncLog() error {
	if s.werr != nil {
		return s.werr
	}
	if err := s.log.Sync(); err != nil {
		s.werr = fmt.Errorf("%w: fsync %s: %v", ErrStorage, s.path(LogExt), err)
		return s.werr
	}
	return nil
}

// SyncLogFile fsyncs the log file alone, touching no other state: safe
// without the owner's lock while holding a reference (as ReadAt), so that
// readers go on during the fsync. A failure is the caller's to record
// (FailWrite, under the lock).
func (s *Segment) SyncLogFile() error {
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("%w: fsync %s: %v", ErrStorage, s.path(LogExt), err)
	}
	return nil
}

// FailWrite records err as the segment's sticky write error (the owner's
// lock held), as a failed write or sync does; it returns the sticky error.
func (s *Segment) FailWrite(err error) error {
	if s.werr == nil {
		s.werr = err
	}
	return s.werr
}

// Sync makes everything appended durable (log then indexes).
func (s *Segment) Sync() error {
	if s.werr != nil {
		return s.werr
	}
	if err := s.log.Sync(); err != nil {
		s.werr = fmt.Errorf("%w: fsync %s: %v", ErrStorage, s.path(LogExt), err)
		return s.werr
	}
	if err := s.oix.sync(); err != nil {
		s.werr = fmt.Errorf("%w: fsync index: %v", ErrStorage, err)
		return s.werr
	}
	if err := s.tix.sync(); err != nil {
		s.werr = fmt.Errorf("%w: fsync time index: %v", ErrStorage, err)
		return s.werr
	}
	return nil
}

// Seal makes the segment inactive at roll: a last time index entry, the
// indexes trimmed to their used size, and everything fsync'd, so that
// only the active segment ever needs recovery.
func (s *Segment) Seal() error {
	if s.werr != nil {
		return s.werr
	}
	if s.sealed {
		return nil
	}
	if s.maxTs > s.lastTixTs && (s.tix.n+1)*timeEntrySize <= len(s.tix.b) {
		s.tix.appendTime(s.maxTs, uint32(s.maxTsOff-s.base))
		s.lastTixTs = s.maxTs
	}
	if err := s.log.Sync(); err != nil {
		s.werr = fmt.Errorf("%w: fsync %s: %v", ErrStorage, s.path(LogExt), err)
		return s.werr
	}
	for _, ix := range []*index{s.oix, s.tix} {
		if err := ix.trim(); err != nil {
			s.werr = fmt.Errorf("%w: trim %s: %v", ErrStorage, ix.path, err)
			return s.werr
		}
	}
	s.sealed = true
	return nil
}

// Reactivate makes a sealed segment writable again (after TruncateTo
// removed the segments after it): its indexes are preallocated again.
func (s *Segment) Reactivate() error {
	if !s.sealed {
		return nil
	}
	if s.werr != nil {
		return s.werr
	}
	s.oix.closeNoTrim()
	s.tix.closeNoTrim()
	if err := s.openIndexes(true); err != nil {
		s.werr = err
		return err
	}
	s.sealed = false
	return nil
}

// Acquire takes a read reference; false when the segment is already
// fully released.
func (s *Segment) Acquire() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release drops a reference; the last one closes the log file.
func (s *Segment) Release() {
	if s.refs.Add(-1) == 0 {
		s.log.Close()
	}
}

// ReadAt reads stored bytes. Safe without the owner's lock while holding a
// reference.
func (s *Segment) ReadAt(p []byte, off int64) (int, error) {
	n, err := s.log.ReadAt(p, off)
	if err == io.EOF && n == len(p) {
		err = nil
	}
	return n, err
}

// Close trims the indexes (as Kafka does on shutdown), closes them and
// drops the owner's reference; the log file closes once readers are done.
func (s *Segment) Close() error { return s.close(true) }

func (s *Segment) close(trim bool) error {
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	for _, ix := range []*index{s.oix, s.tix} {
		var e error
		if trim && s.werr == nil {
			e = ix.trimAndClose(true)
		} else {
			e = ix.closeNoTrim()
		}
		if err == nil && e != nil {
			err = fmt.Errorf("%w: close %s: %v", ErrStorage, ix.path, e)
		}
	}
	s.Release()
	return err
}

// Remove closes the segment and deletes its files. The caller syncs the
// directory.
func (s *Segment) Remove() error {
	cerr := s.close(false) // the files are going away: no trim, no fsync
	var err error
	for _, ext := range []string{LogExt, IndexExt, TimeIndexExt} {
		if e := s.fs.Remove(s.path(ext)); e != nil && !errors.Is(e, fs.ErrNotExist) && err == nil {
			err = fmt.Errorf("%w: remove: %v", ErrStorage, e)
		}
	}
	if err == nil {
		err = cerr
	}
	return err
}

// trim cuts the index file to its used entries and remaps that prefix
// (the file opened again by path for it when the index holds none).
func (ix *index) trim() error {
	if err := ix.m.Close(); err != nil {
		return err
	}
	ix.b = nil
	f, err := ix.file()
	if err != nil {
		return err
	}
	used := ix.n * ix.entrySize
	err = f.Truncate(int64(used))
	if err == nil {
		err = f.Sync()
	}
	var m Mapping
	if err == nil {
		m, err = f.Map(used)
	}
	if err != nil {
		ix.release(f)
		return err
	}
	ix.m, ix.b = m, m.Bytes()
	if f != ix.f {
		// A Detached mapping of the reopened file replaces it.
		return f.Close()
	}
	return nil
}
