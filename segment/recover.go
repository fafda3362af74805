package segment

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
)

// maxIndexRetries bounds how many index entries recovery steps back over
// when the last ones do not point at a batch boundary before giving up and
// rebuilding from the start.
const maxIndexRetries = 8

// RecoveryInfo says what Open did to a segment.
type RecoveryInfo struct {
	TruncatedBytes int64 // bytes cut from the log's tail (a torn or corrupt tail)
	Rebuilt        bool  // the indexes were rebuilt from the start
}

// Open opens an existing segment. When active is true (the partition's last
// segment) its tail is recovered: scanned from the last valid index entry,
// every batch checked (length, CRC-32C, offsets), the log truncated at the
// first bad one and the indexes rebuilt for that range. A sealed segment
// is trusted (it was fsync'd at roll) unless an index is missing or
// corrupt, in which case it is rescanned and checked in full.
func Open(fsys FS, dir string, base int64, opts Options, active bool) (*Segment, RecoveryInfo, error) {
	return OpenFrom(fsys, dir, base, opts, active, -1)
}

// OpenFrom is Open with a recovery point for the active segment: every
// batch holding an offset at or above verifyFrom is read and checked
// even when an index entry lies beyond it (the index may have reached the
// disk before the log data it points at). verifyFrom < 0 means no bound.
func OpenFrom(fsys FS, dir string, base int64, opts Options, active bool, verifyFrom int64) (*Segment, RecoveryInfo, error) {
	var info RecoveryInfo
	s := &Segment{fs: fsys, dir: dir, base: base, opts: opts.withDefaults(), next: base, maxTs: -1, maxTsOff: -1, lastTixTs: -1}
	_, oerr := fsys.Stat(s.path(IndexExt))
	_, terr := fsys.Stat(s.path(TimeIndexExt))
	missing := oerr != nil || terr != nil
	f, err := fsys.Open(s.path(LogExt))
	if err != nil {
		return nil, info, fmt.Errorf("%w: open %s: %v", ErrStorage, s.path(LogExt), err)
	}
	s.log = f
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, info, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := s.openIndexes(active); err != nil {
		f.Close()
		return nil, info, err
	}
	s.sealed = !active
	s.refs.Store(1)

	// Validate what the indexes claim against the log.
	// A torn tail can leave active-segment entries past the log's end;
	// a sealed segment was fsync'd whole, so any bad entry means its
	// index (or log) is damaged and everything is rechecked.
	nOff, cerr1 := s.oix.validateOffsets(size)
	if cerr1 != nil || missing || (!active && nOff < s.oix.n) {
		info.Rebuilt = true
		nOff = 0
	}
	if active {
		s.oix.truncateEntries(nOff)
	}

	// Pick where to start scanning: the last offset entry that points at a
	// batch whose last offset matches the entry.
	start := -1 // entry index to start from; -1 = the beginning
	cand := nOff
	if active && verifyFrom >= 0 {
		// Only entries whose batch ends before the recovery point.
		for cand > 0 {
			rel, _ := s.oix.offsetEntry(cand - 1)
			if s.base+int64(rel) < verifyFrom {
				break
			}
			cand--
		}
	}
	for i, tries := cand-1, 0; i >= 0 && tries < maxIndexRetries; i, tries = i-1, tries+1 {
		rel, pos := s.oix.offsetEntry(i)
		h, err := s.readHeader(int64(pos), size)
		if err == nil && h.LastOffset() == s.base+int64(rel) {
			start = i
			break
		}
	}
	if start < 0 && cand > 0 {
		info.Rebuilt = true
	}
	if !active && !info.Rebuilt {
		// A sealed segment with sane indexes: find its end by a header
		// walk from the last entry, touching no index.
		if nT, terr := s.tix.validateTimes(math.MaxUint32 + 1); terr == nil && nT == s.tix.n {
			if err := s.findEnd(start, size); err == nil {
				return s, info, nil
			}
		}
		info.Rebuilt = true
	}
	if !active {
		// Rebuilding a sealed segment's indexes needs them writable;
		// they are trimmed again by Seal below.
		s.oix.closeNoTrim()
		s.tix.closeNoTrim()
		if err := s.openIndexes(true); err != nil {
			s.log.Close()
			return nil, info, err
		}
		s.sealed = false
	}
	if info.Rebuilt {
		start = -1
	}
	if err := s.rebuildFrom(start, size, true, &info); err != nil {
		s.closeFiles()
		return nil, info, err
	}
	if !active {
		if err := s.Seal(); err != nil {
			s.closeFiles()
			return nil, info, err
		}
	}
	return s, info, nil
}

// findEnd sets a trusted sealed segment's end and max timestamp from its
// indexes and a header walk from offset index entry i.
func (s *Segment) findEnd(i int, size int64) error {
	var pos int64
	if i >= 0 {
		_, p := s.oix.offsetEntry(i)
		pos = int64(p)
	}
	if s.tix.n > 0 {
		ts, rel := s.tix.timeEntry(s.tix.n - 1)
		s.maxTs, s.maxTsOff = ts, s.base+int64(rel)
	}
	for pos < size {
		h, err := s.readHeader(pos, size)
		if err != nil {
			return err
		}
		if h.MaxTimestamp > s.maxTs {
			s.maxTs, s.maxTsOff = h.MaxTimestamp, h.LastOffset()
		}
		s.next = h.LastOffset() + 1
		pos += h.Size()
	}
	s.lastTixTs = s.maxTs
	s.size = size
	return nil
}

// rebuildFrom rescans the log from offset index entry i (-1 = from the
// start) to size, re-deriving the index entries after it, the time index
// and the segment's end. With verify, each batch is read whole and
// checked, and the log is truncated at the first bad batch.
func (s *Segment) rebuildFrom(i int, size int64, verify bool, info *RecoveryInfo) error {
	var pos int64
	if i >= 0 {
		_, p := s.oix.offsetEntry(i)
		pos = int64(p)
	}
	// Offset entries from i on are re-derived by the scan (the entry at
	// i itself is dropped: the byte counter restarts at pos).
	keep := i
	if keep < 0 {
		keep = 0
		if info.Rebuilt {
			// Junk past the used entries of a corrupt index must not
			// be counted at the next open. Only then: clearing a whole
			// preallocated index dirties all of it (10 MiB by default,
			// each way), which the open's fsync then writes out -- at
			// every restart, for every partition whose active segment
			// has no index entry yet (under index.interval.bytes).
			clear(s.oix.b)
			clear(s.tix.b)
			s.oix.n, s.tix.n = 0, 0
		}
	}
	s.oix.truncateEntries(keep)
	s.sinceIndex = 0
	s.next = s.base
	s.maxTs, s.maxTsOff, s.lastTixTs = -1, -1, -1
	if pos > 0 {
		h, err := s.readHeader(pos, size)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
		// A first batch claiming to start before the segment fails the
		// continuity check below and is cut.
		s.next = max(h.BaseOffset, s.base)
	}
	// Keep time entries for batches wholly before pos.
	nT, _ := s.tix.validateTimes(s.next - s.base)
	s.tix.truncateEntries(nT)
	if s.tix.n > 0 {
		ts, rel := s.tix.timeEntry(s.tix.n - 1)
		s.maxTs, s.maxTsOff, s.lastTixTs = ts, s.base+int64(rel), ts
	}
	var buf []byte
	for pos < size {
		h, err := s.readHeader(pos, size)
		if err == nil && (h.BaseOffset < s.next || h.LastOffset()-s.base > math.MaxUint32) {
			err = fmt.Errorf("%w: offset %d after %d", ErrCorrupt, h.BaseOffset, s.next)
		}
		if err == nil && pos+h.Size() > math.MaxUint32 {
			// Index positions are uint32: a segment never grows past it.
			err = fmt.Errorf("%w: segment longer than 4 GiB", ErrCorrupt)
		}
		if err == nil && verify {
			n := int(h.Size())
			if cap(buf) < n {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			if _, rerr := s.ReadAt(buf, pos); rerr != nil {
				err = fmt.Errorf("%w: %v", ErrCorrupt, rerr)
			} else {
				_, err = ValidateStoredBatch(buf) // compaction thins batches
			}
		}
		if err != nil {
			if !verify {
				return fmt.Errorf("%w: sealed segment %d at %d: %v", ErrStorage, s.base, pos, err)
			}
			break
		}
		s.indexBatch(pos, h.Size(), h.LastOffset(), h.MaxTimestamp)
		pos += h.Size()
	}
	if pos < size {
		if err := s.log.Truncate(pos); err != nil {
			return fmt.Errorf("%w: truncate %s: %v", ErrStorage, s.path(LogExt), err)
		}
		if err := s.log.Sync(); err != nil {
			return fmt.Errorf("%w: fsync %s: %v", ErrStorage, s.path(LogExt), err)
		}
		info.TruncatedBytes += size - pos
	}
	s.size = pos
	return nil
}

// readHeader reads and parses the batch header at pos, checking that the
// whole batch lies within size.
func (s *Segment) readHeader(pos, size int64) (Header, error) {
	var b [HeaderSize]byte
	if size-pos < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes left at %d", ErrCorrupt, size-pos, pos)
	}
	if _, err := s.ReadAt(b[:], pos); err != nil {
		return Header{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	h, err := ParseHeader(b[:])
	if err != nil {
		return h, err
	}
	if h.Size() > size-pos {
		return h, fmt.Errorf("%w: batch of %d bytes at %d overruns %d", ErrCorrupt, h.Size(), pos, size)
	}
	return h, nil
}

// ReadHeader reads the header of the batch at pos, which must end at or
// before limit. Safe with a reference held.
func (s *Segment) ReadHeader(pos, limit int64) (Header, error) { return s.readHeader(pos, limit) }

// Find returns the position and header of the first batch whose last
// offset is >= offset, scanning headers from the index's floor entry and
// never past limit. found is false when no such batch lies below limit.
func (s *Segment) Find(offset, limit int64) (pos int64, h Header, found bool, err error) {
	if limit > s.size {
		limit = s.size
	}
	if offset > s.base {
		rel := offset - s.base
		if rel > math.MaxUint32 {
			rel = math.MaxUint32
		}
		pos = int64(s.oix.lookupOffset(uint32(rel)))
	}
	return s.scanFor(pos, limit, func(h *Header) bool { return h.LastOffset() >= offset })
}

// scanFor walks headers from pos until match; bounded by limit (each step
// advances by a checked, positive batch size).
func (s *Segment) scanFor(pos, limit int64, match func(*Header) bool) (int64, Header, bool, error) {
	// Headers are read through a small chunk buffer: a scan over many
	// small batches then costs one read per chunk, not one per batch.
	cb := chunkPool.Get().(*[scanChunk]byte)
	defer chunkPool.Put(cb)
	var chunkPos int64 = -1
	chunkLen := 0
	for pos < limit {
		if limit-pos < HeaderSize {
			return pos, Header{}, false, fmt.Errorf("%w: segment %d at %d: %d bytes left", ErrStorage, s.base, pos, limit-pos)
		}
		if chunkPos < 0 || pos < chunkPos || pos+HeaderSize > chunkPos+int64(chunkLen) {
			n := int64(len(cb))
			if limit-pos < n {
				n = limit - pos
			}
			if _, err := s.ReadAt(cb[:n], pos); err != nil {
				return pos, Header{}, false, fmt.Errorf("%w: segment %d at %d: %v", ErrStorage, s.base, pos, err)
			}
			chunkPos, chunkLen = pos, int(n)
		}
		h, err := ParseHeader(cb[pos-chunkPos : chunkLen])
		if err == nil && h.Size() > limit-pos {
			err = fmt.Errorf("%w: batch of %d bytes at %d overruns %d", ErrCorrupt, h.Size(), pos, limit)
		}
		if err != nil {
			return pos, h, false, fmt.Errorf("%w: segment %d at %d: %v", ErrStorage, s.base, pos, err)
		}
		if match(&h) {
			return pos, h, true, nil
		}
		pos += h.Size()
	}
	return pos, Header{}, false, nil
}

// scanChunk is the read size of header scans: a few small batches' worth.
const scanChunk = 4096

var chunkPool = sync.Pool{New: func() any { return new([scanChunk]byte) }}

// FindTimestamp returns the first batch below limit whose max timestamp
// is >= ts, using the time index to skip ahead.
func (s *Segment) FindTimestamp(ts, limit int64) (pos int64, h Header, found bool, err error) {
	if limit > s.size {
		limit = s.size
	}
	if s.maxTs >= 0 && s.maxTs < ts && limit == s.size {
		return 0, Header{}, false, nil
	}
	if rel, ok := s.tix.lookupTime(ts); ok {
		pos = int64(s.oix.lookupOffset(rel))
	}
	return s.scanFor(pos, limit, func(h *Header) bool { return h.MaxTimestamp >= ts })
}

// ScanHeaders calls fn for each batch header from pos up to limit, in
// order, stopping when fn returns false.
func (s *Segment) ScanHeaders(pos, limit int64, fn func(pos int64, h *Header) bool) error {
	if limit > s.size {
		limit = s.size
	}
	_, _, _, err := s.scanFor(pos, limit, func(h *Header) bool {
		ok := !fn(pos, h)
		pos += h.Size()
		return ok
	})
	return err
}

// TruncateTo removes every batch whose last offset is >= offset (a batch
// straddling offset goes whole) and returns the new next offset. The
// indexes are cut and the tail re-derived from headers.
func (s *Segment) TruncateTo(offset int64) (int64, error) {
	if s.werr != nil {
		return s.next, s.werr
	}
	pos, _, found, err := s.Find(offset, s.size)
	if err != nil {
		return s.next, err
	}
	if !found {
		return s.next, nil
	}
	if err := s.log.Truncate(pos); err != nil {
		s.werr = fmt.Errorf("%w: truncate %s: %v", ErrStorage, s.path(LogExt), err)
		return s.next, s.werr
	}
	// Drop index entries at or past the cut, then re-derive from the
	// last remaining entry.
	n := 0
	for n < s.oix.n {
		if _, p := s.oix.offsetEntry(n); int64(p) >= pos {
			break
		}
		n++
	}
	s.oix.truncateEntries(n)
	var info RecoveryInfo
	if err := s.rebuildFrom(n-1, pos, false, &info); err != nil {
		s.werr = err
		return s.next, err
	}
	return s.next, nil
}

// WholeBatchesEnd returns the end of the run of whole batches that starts
// at pos (a batch boundary) and ends at or before end: pos itself when the
// first batch does not fit. It jumps to the offset index's last entry
// below end and reads the few headers after it, so sizing a large read
// costs a handful of small reads, not the data. The owner's lock must keep
// the index from changing (as for Find).
func (s *Segment) WholeBatchesEnd(pos, end int64) (int64, error) {
	if end > s.size {
		end = s.size
	}
	cur := pos
	if s.oix != nil {
		if p := s.oix.lastPositionAtOrBelow(end); p > cur {
			cur = p
		}
	}
	var b [12]byte
	for cur+12 <= end {
		if _, err := s.ReadAt(b[:], cur); err != nil {
			return pos, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		n := int64(int32(binary.BigEndian.Uint32(b[8:12])))
		if n < HeaderSize-12 {
			return pos, fmt.Errorf("%w: batch length %d at %d", ErrCorrupt, n, cur)
		}
		if cur+12+n > end {
			break
		}
		cur += 12 + n
	}
	return cur, nil
}
