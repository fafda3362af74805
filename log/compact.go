package log

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/strata-io/strata/segment"
)

// Segment replacement for the log cleaner (compaction). The cleaner
// (package retention) reads a run of sealed segments, writes the records
// it keeps into a Cleaned segment, and swaps it in for the run. The swap
// is atomic across crashes:
//
//	1. write   <dir>/cleaned/<first>.log/.index/.timeindex, fsync them
//	           (Seal) and the cleaned/ directory
//	2. commit  write <dir>/cleaner-swap ("<first> <end> <crc>") through a
//	           tmp file, fsync, rename, fsync <dir>
//	3. swap    remove the run's files [first, end), rename the cleaned
//	           files into <dir>, fsync <dir>
//	4. done    remove cleaner-swap, fsync <dir>, remove cleaned/
//
// Opening a partition finishes a swap whose marker exists (step 3 is
// idempotent: files still in cleaned/ are moved, originals in (first, end)
// removed) and otherwise discards cleaned/, so a crash at any point leaves
// either the old run or the cleaned one, never a mix. Offsets never
// change: a cleaned segment has the first segment's base offset, and its
// batches keep their offsets (with gaps where records went).

const (
	cleanedDir     = "cleaned"
	swapMarker     = "cleaner-swap"
	swapMarkerTemp = "cleaner-swap.tmp"
)

// ErrCompactionConflict is returned by SwapCleaned when the run it was
// built from changed meanwhile (DeleteRecords or retention deleted some of
// it, or the range is not a run of sealed segments); the cleaned segment
// is discarded and the cleaner tries again later.
var ErrCompactionConflict = errors.New("log: segments changed during compaction")

// Cleaned is a segment being written by the cleaner to replace the run of
// sealed segments [First, End). One goroutine uses it; Abort or
// SwapCleaned ends it.
type Cleaned struct {
	p          *Partition
	first, end int64
	seg        *segment.Segment
	next       int64 // offsets of appended batches must be >= next
	done       bool
}

// NewCleaned starts a cleaned segment for the run [first, end): first must
// be the base offset of a segment and end the base of a later one (the
// run never includes the active segment). Stale cleaner files are removed.
func (p *Partition) NewCleaned(first, end int64) (*Cleaned, error) {
	p.mu.RLock()
	err := p.checkRunLocked(first, end)
	p.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	cdir := filepath.Join(p.dir, cleanedDir)
	if err := p.fs.RemoveAll(cdir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := p.fs.MkdirAll(cdir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	cfg := p.cfg.Load()
	s, err := segment.Create(p.fs, cdir, first, segOpts(cfg))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return &Cleaned{p: p, first: first, end: end, seg: s, next: first}, nil
}

// checkRunLocked checks that [first, end) is a run of whole sealed
// segments. Caller holds mu.
func (p *Partition) checkRunLocked(first, end int64) error {
	if p.closed {
		return ErrClosed
	}
	i := p.segmentIndexLocked(first)
	if p.segs[i].Base() != first || first >= end {
		return fmt.Errorf("%w: %d is not a segment base", ErrCompactionConflict, first)
	}
	for ; i < len(p.segs) && p.segs[i].Base() < end; i++ {
	}
	if i >= len(p.segs) || p.segs[i].Base() != end {
		return fmt.Errorf("%w: %d is not the base of a later segment", ErrCompactionConflict, end)
	}
	return nil
}

// CleanerPoint is the log cleaner's first dirty offset (everything below
// it was compacted), -1 when unknown; the manager checkpoints it in
// cleaner-offset-checkpoint.
func (p *Partition) CleanerPoint() int64 { return p.cleanerPoint.Load() }

// SetCleanerPoint records the cleaner's first dirty offset after a
// compaction (set it only once the cleaned segments were swapped in).
func (p *Partition) SetCleanerPoint(offset int64) { p.cleanerPoint.Store(offset) }

// First and End are the run the cleaned segment replaces.
func (c *Cleaned) First() int64 { return c.first }
func (c *Cleaned) End() int64   { return c.end }

// Size is the bytes appended so far.
func (c *Cleaned) Size() int64 { return c.seg.Size() }

// Append adds one whole, valid batch (the cleaner's filtered copy of a
// batch of the run). Its offsets must lie in [First, End) and follow the
// previous batch's.
func (c *Cleaned) Append(batch []byte) error {
	if c.done {
		return fmt.Errorf("%w: cleaned segment already finished", ErrStorage)
	}
	h, err := segment.ValidateStoredBatch(batch)
	if err != nil {
		return mapSegmentErr(err)
	}
	if h.BaseOffset < c.next || h.LastOffset() >= c.end {
		return fmt.Errorf("%w: cleaned batch [%d, %d] outside [%d, %d)", ErrInvalidRecord, h.BaseOffset, h.LastOffset(), c.next, c.end)
	}
	if !c.seg.CanHold(int64(len(batch)), h.LastOffset()) {
		return fmt.Errorf("%w: cleaned segment full", ErrStorage)
	}
	info := segment.BatchInfo{Pos: 0, Len: len(batch), LastOffset: h.LastOffset(), MaxTimestamp: h.MaxTimestamp}
	if err := c.seg.Append(batch, []segment.BatchInfo{info}); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	c.next = h.LastOffset() + 1
	return nil
}

// Abort discards the cleaned segment.
func (c *Cleaned) Abort() {
	if c.done {
		return
	}
	c.done = true
	c.seg.Remove()
	c.p.fs.RemoveAll(filepath.Join(c.p.dir, cleanedDir))
}

// SwapCleaned replaces the run [First, End) by the cleaned segment,
// crash-safely (see the top of this file). Readers holding references to
// the old segments finish reading them. ErrCompactionConflict when the
// run changed meanwhile (the cleaned segment is then discarded).
func (p *Partition) SwapCleaned(c *Cleaned) error {
	if c.done {
		return fmt.Errorf("%w: cleaned segment already finished", ErrStorage)
	}
	// 1. The cleaned files are durable before anything refers to them.
	if err := c.seg.Seal(); err != nil {
		c.Abort()
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := c.seg.Close(); err != nil {
		c.Abort()
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	cdir := filepath.Join(p.dir, cleanedDir)
	if err := p.fs.SyncDir(cdir); err != nil {
		c.Abort()
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkRunLocked(c.first, c.end); err != nil {
		c.done = true
		p.fs.RemoveAll(cdir)
		return err
	}
	if p.werr != nil {
		c.done = true
		p.fs.RemoveAll(cdir)
		return fmt.Errorf("%w: %v", ErrStorage, p.werr)
	}
	c.done = true
	// 2. Commit point.
	if err := writeSwapMarker(p.fs, p.dir, c.first, c.end); err != nil {
		p.fs.RemoveAll(cdir)
		return err
	}
	// 3. Swap on disk, then in memory.
	i := p.segmentIndexLocked(c.first)
	j := i
	for j < len(p.segs) && p.segs[j].Base() < c.end {
		j++
	}
	old := append([]*segment.Segment(nil), p.segs[i:j]...)
	for _, s := range old {
		if err := s.Remove(); err != nil {
			// The marker makes the next open finish the swap.
			p.werr = err
			return fmt.Errorf("%w: swap: %v", ErrStorage, err)
		}
	}
	// Readers wait on mu until the new segment is in the list; those
	// that took a reference on an old segment before finish on its
	// still-open file.
	p.segs = append(p.segs[:i], p.segs[j:]...)
	if err := finishSwap(p.fs, p.dir, c.first, c.end); err != nil {
		p.werr = err
		return err
	}
	s, _, err := segment.OpenFrom(p.fs, p.dir, c.first, segOpts(p.cfg.Load()), false, -1)
	if err != nil {
		p.werr = err
		return fmt.Errorf("%w: open cleaned segment %d: %v", ErrStorage, c.first, err)
	}
	p.segs = append(p.segs[:i], append([]*segment.Segment{s}, p.segs[i:]...)...)
	// The run's aborted-transaction entries now belong to the one cleaned
	// segment (the old segments' files went with them in finishSwap).
	if err := p.writeTxnIndexLocked(c.first, c.end, true); err != nil {
		p.logger.Warn("cannot write transaction index of cleaned segment", "base", c.first, "err", err)
	}
	return nil
}

// finishSwap does steps 3 and 4 on disk: idempotent, so recovery can run
// it after a crash at any point.
func finishSwap(fsys segment.FS, dir string, first, end int64) error {
	cdir := filepath.Join(dir, cleanedDir)
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	for _, e := range ents {
		if e.IsDir {
			continue
		}
		if b, ok := segmentFileBase(e.Name); ok && b > first && b < end {
			if err := fsys.Remove(filepath.Join(dir, e.Name)); err != nil && !isNotExist(err) {
				return fmt.Errorf("%w: swap: %v", ErrStorage, err)
			}
		}
	}
	for _, ext := range []string{segment.LogExt, segment.IndexExt, segment.TimeIndexExt} {
		name := segment.FileName(first, ext)
		if _, err := fsys.Stat(filepath.Join(cdir, name)); err != nil {
			continue // already moved
		}
		if err := fsys.Rename(filepath.Join(cdir, name), filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("%w: swap: %v", ErrStorage, err)
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := fsys.Remove(filepath.Join(dir, swapMarker)); err != nil && !isNotExist(err) {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := fsys.RemoveAll(cdir); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return nil
}

// segmentFileBase parses the base offset of any segment file name
// (.log, .index, .timeindex).
func segmentFileBase(name string) (int64, bool) {
	for _, ext := range []string{segment.LogExt, segment.IndexExt, segment.TimeIndexExt, txnIndexExt} {
		if strings.HasSuffix(name, ext) {
			return parseSegmentBase(strings.TrimSuffix(name, ext) + segment.LogExt)
		}
	}
	return 0, false
}

// writeSwapMarker durably records the swap of [first, end).
func writeSwapMarker(fsys segment.FS, dir string, first, end int64) error {
	body := strconv.FormatInt(first, 10) + " " + strconv.FormatInt(end, 10)
	line := body + " " + strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10) + "\n"
	if err := segment.ReplaceFile(fsys, filepath.Join(dir, swapMarker), []byte(line)); err != nil {
		return fmt.Errorf("%w: swap marker: %v", ErrStorage, err)
	}
	return nil
}

// maxSwapMarkerBytes bounds the marker file read at open.
const maxSwapMarkerBytes = 128

// recoverSwap runs at partition open, before the segments are listed: it
// completes a committed swap or discards an uncommitted cleaned segment.
func recoverSwap(fsys segment.FS, dir string) (recovered bool, err error) {
	marker := filepath.Join(dir, swapMarker)
	size, serr := fsys.Stat(marker)
	if serr == nil {
		first, end, ok := readSwapMarker(fsys, marker, size)
		if ok {
			if err := finishSwap(fsys, dir, first, end); err != nil {
				return false, err
			}
			return true, nil
		}
		// A marker that does not parse was never completely written
		// (it is renamed into place only after its fsync): ignore it.
		if err := fsys.Remove(marker); err != nil {
			return false, fmt.Errorf("%w: %v", ErrStorage, err)
		}
	}
	fsys.Remove(filepath.Join(dir, swapMarkerTemp))
	if _, err := fsys.ReadDir(filepath.Join(dir, cleanedDir)); err == nil {
		if err := fsys.RemoveAll(filepath.Join(dir, cleanedDir)); err != nil {
			return false, fmt.Errorf("%w: %v", ErrStorage, err)
		}
	}
	return false, nil
}

func readSwapMarker(fsys segment.FS, path string, size int64) (first, end int64, ok bool) {
	if size <= 0 || size > maxSwapMarkerBytes {
		return 0, 0, false
	}
	f, err := fsys.Open(path)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	buf := make([]byte, size)
	if n, err := f.ReadAt(buf, 0); err != nil && !(err == io.EOF && n == len(buf)) {
		return 0, 0, false
	}
	fields := strings.Fields(string(buf))
	if len(fields) != 3 {
		return 0, 0, false
	}
	body := fields[0] + " " + fields[1]
	crc, err1 := strconv.ParseUint(fields[2], 10, 32)
	first, err2 := strconv.ParseInt(fields[0], 10, 64)
	end, err3 := strconv.ParseInt(fields[1], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || uint32(crc) != crc32.ChecksumIEEE([]byte(body)) || first < 0 || end <= first {
		return 0, 0, false
	}
	return first, end, true
}
