package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
)

// Index entry sizes (on-disk format, as Kafka's .index and .timeindex).
const (
	offsetEntrySize = 8  // relative offset uint32 + position uint32
	timeEntrySize   = 12 // timestamp int64 + relative offset uint32
)

// errIndexCorrupt marks an index whose entries are inconsistent; the
// segment then rebuilds it from the log.
var errIndexCorrupt = errors.New("segment: corrupt index")

// index is one preallocated, memory-mapped index file of fixed-size
// entries. The used prefix holds n entries; the rest is zero.
// Not safe for concurrent use: the segment's owner serializes access.
//
// The index holds no file descriptor when its mapping is Detached (Linux,
// MemFS): entries are made durable by the mapping's Sync (msync), and the
// file is opened again by path, through fs, only to cut it to its used
// size (trim at roll and close). Idle, a partition then holds one
// descriptor per segment (its .log) instead of three. The durability of
// index entries is unchanged (see unixMapping.Sync); and the index stays
// a hint either way: recovery validates it against the log and rebuilds
// what it cannot trust (recover.go).
type index struct {
	fs        FS
	path      string
	f         File // nil when m is Detached
	m         Mapping
	b         []byte // m.Bytes()
	n         int    // entries in use
	entrySize int
}

// openIndex opens (creating if missing) an index file and maps maxBytes of
// it (or its current size when larger and not writable). created reports
// that the file did not exist, so its contents must be rebuilt.
func openIndex(fsys FS, path string, entrySize int, maxBytes int) (ix *index, created bool, err error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = fsys.Create(path)
		created = true
	}
	if err != nil {
		return nil, false, err
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, false, err
	}
	ix = &index{fs: fsys, path: path, f: f, entrySize: entrySize}
	// The used entries are the prefix before the first all-zero entry
	// (position 0 is never indexed, timestamp entries are never all zero
	// in practice; a stray one only makes us rebuild a little more).
	mapSize := maxBytes - maxBytes%entrySize
	if int64(mapSize) < size {
		mapSize = int(size - size%int64(entrySize))
	}
	if size < int64(mapSize) {
		if err := f.Truncate(int64(mapSize)); err != nil {
			f.Close()
			return nil, false, err
		}
	}
	m, err := f.Map(mapSize)
	if err != nil {
		f.Close()
		return nil, false, err
	}
	ix.m = m
	ix.b = m.Bytes()
	if m.Detached() {
		ix.f = nil
		if err := f.Close(); err != nil {
			m.Close()
			return nil, false, err
		}
	}
	ix.n = 0
	// Only the file's old length can hold entries: what Truncate added
	// above reads as zero. A file just created (every new segment) is
	// therefore not scanned at all. That matters: reading a page of the
	// fresh mapping faults it in (with read-around), which made creating
	// 1,000 partitions take ~30 s of CPU, nearly all of it here.
	limit := int(size / int64(entrySize))
	limit = min(limit, len(ix.b)/entrySize)
	for ix.n < limit && !allZero(ix.b[ix.n*entrySize:(ix.n+1)*entrySize]) {
		ix.n++
	}
	return ix, created, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (ix *index) full() bool { return (ix.n+1)*ix.entrySize > len(ix.b) }

// truncateEntries forgets entries from i on, zeroing them so a later open
// does not count them.
func (ix *index) truncateEntries(i int) {
	if i >= ix.n {
		return
	}
	clear(ix.b[i*ix.entrySize : ix.n*ix.entrySize])
	ix.n = i
}

// sync makes the entries written so far durable: msync of a Detached
// mapping, fsync of the open file otherwise.
func (ix *index) sync() error {
	if ix.f == nil {
		return ix.m.Sync()
	}
	return ix.f.Sync()
}

// file returns the index's open file, or opens it again by path when the
// index holds none (a Detached mapping); release closes what file opened.
func (ix *index) file() (File, error) {
	if ix.f != nil {
		return ix.f, nil
	}
	return ix.fs.Open(ix.path)
}

func (ix *index) release(f File) error {
	if f == ix.f {
		return nil
	}
	return f.Close()
}

// trimAndClose unmaps, cuts the file to its used size (as Kafka does when
// a segment becomes inactive) and closes it. sync makes the trim durable.
func (ix *index) trimAndClose(sync bool) error {
	err := ix.m.Close()
	ix.b = nil
	var f File
	if err == nil {
		f, err = ix.file()
	}
	if err == nil {
		err = f.Truncate(int64(ix.n * ix.entrySize))
		if err == nil && sync {
			err = f.Sync()
		}
		if cerr := ix.release(f); err == nil {
			err = cerr
		}
	}
	if ix.f != nil {
		if cerr := ix.f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// closeNoTrim unmaps and closes, leaving the file as is.
func (ix *index) closeNoTrim() error {
	err := ix.m.Close()
	ix.b = nil
	if ix.f != nil {
		if cerr := ix.f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// --- offset index ---

func (ix *index) offsetEntry(i int) (rel uint32, pos uint32) {
	e := ix.b[i*offsetEntrySize:]
	return binary.BigEndian.Uint32(e), binary.BigEndian.Uint32(e[4:])
}

func (ix *index) appendOffset(rel uint32, pos uint32) {
	e := ix.b[ix.n*offsetEntrySize:]
	binary.BigEndian.PutUint32(e, rel)
	binary.BigEndian.PutUint32(e[4:], pos)
	ix.n++
}

// lookupOffset returns the last entry with relative offset <= rel (the
// entry's batch starts at or before the wanted offset), or position 0.
func (ix *index) lookupOffset(rel uint32) (pos uint32) {
	lo, hi := 0, ix.n // find first entry with offset > rel
	for lo < hi {
		mid := (lo + hi) / 2
		r, _ := ix.offsetEntry(mid)
		if r <= rel {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return 0
	}
	_, p := ix.offsetEntry(lo - 1)
	return p
}

// validateOffsets checks the offset index against a log of logSize bytes:
// entries strictly increasing in both fields and inside the log. It
// returns the count of the valid prefix, and errIndexCorrupt if an entry
// is out of order (which a torn write cannot explain).
func (ix *index) validateOffsets(logSize int64) (int, error) {
	var prevRel, prevPos uint32
	for i := 0; i < ix.n; i++ {
		r, p := ix.offsetEntry(i)
		if p == 0 || int64(p) >= logSize {
			return i, nil
		}
		if i > 0 && (r <= prevRel || p <= prevPos) {
			return i, errIndexCorrupt
		}
		prevRel, prevPos = r, p
	}
	return ix.n, nil
}

// --- time index ---

func (ix *index) timeEntry(i int) (ts int64, rel uint32) {
	e := ix.b[i*timeEntrySize:]
	return int64(binary.BigEndian.Uint64(e)), binary.BigEndian.Uint32(e[8:])
}

func (ix *index) appendTime(ts int64, rel uint32) {
	e := ix.b[ix.n*timeEntrySize:]
	binary.BigEndian.PutUint64(e, uint64(ts))
	binary.BigEndian.PutUint32(e[8:], rel)
	ix.n++
}

// lookupTime returns the relative offset of the last entry with timestamp
// < ts (the scan for the first batch reaching ts starts there), ok false
// when ts is at or below the first entry.
func (ix *index) lookupTime(ts int64) (rel uint32, ok bool) {
	lo, hi := 0, ix.n // first entry with timestamp >= ts
	for lo < hi {
		mid := (lo + hi) / 2
		t, _ := ix.timeEntry(mid)
		if t < ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return 0, false
	}
	_, r := ix.timeEntry(lo - 1)
	return r, true
}

// validateTimes keeps the prefix whose timestamps strictly increase and
// whose offsets are below maxRel (exclusive).
func (ix *index) validateTimes(maxRel int64) (int, error) {
	var prevTs int64
	var prevRel uint32
	for i := 0; i < ix.n; i++ {
		t, r := ix.timeEntry(i)
		if int64(r) >= maxRel {
			return i, nil
		}
		if i > 0 && (t <= prevTs || r < prevRel) {
			return i, fmt.Errorf("%w: time entry %d out of order", errIndexCorrupt, i)
		}
		prevTs, prevRel = t, r
	}
	return ix.n, nil
}

// lastPositionAtOrBelow returns the position of the last entry at or
// below pos (batch boundaries), or -1 when none is.
func (ix *index) lastPositionAtOrBelow(pos int64) int64 {
	lo, hi := 0, ix.n // first entry with position > pos
	for lo < hi {
		mid := (lo + hi) / 2
		_, p := ix.offsetEntry(mid)
		if int64(p) <= pos {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return -1
	}
	_, p := ix.offsetEntry(lo - 1)
	return int64(p)
}
