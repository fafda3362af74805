package log

import (
	"fmt"
	"slices"
	"sync"
	"syscall"

	"github.com/strata-io/strata/segment"
)

// Region is a run of whole committed batches in one segment file, held
// readable (the segment's reference) until Release: Fetch sends it to the
// socket with sendfile instead of copying it into a buffer (Read).
type Region struct {
	seg  *segment.Segment
	Pos  int64
	Len  int64
	once sync.Once
}

// Release drops the segment reference. Safe to call more than once; a
// nil or empty region is fine.
func (r *Region) Release() {
	if r == nil || r.seg == nil {
		return
	}
	r.once.Do(r.seg.Release)
}

// SendTo writes the region to the socket behind rc with sendfile(2); ok
// false means it cannot (then nothing was written: use Bytes).
func (r *Region) SendTo(rc syscall.RawConn) (int64, bool, error) {
	return r.seg.SendTo(rc, r.Pos, r.Len)
}

// AppendTo appends the region's bytes to dst, read from the segment file
// straight into dst's spare capacity (grown if short): Fetch frames small
// record sets this way, one copy from the page cache into the buffer the
// response is written from.
func (r *Region) AppendTo(dst []byte) ([]byte, error) {
	n := len(dst)
	dst = slices.Grow(dst, int(r.Len))[:n+int(r.Len)]
	if _, err := r.seg.ReadAt(dst[n:], r.Pos); err != nil {
		return dst[:n], fmt.Errorf("%w: read segment %d: %v", ErrStorage, r.seg.Base(), err)
	}
	return dst, nil
}

// Bytes copies the region into memory.
func (r *Region) Bytes() ([]byte, error) {
	buf := make([]byte, r.Len)
	if _, err := r.seg.ReadAt(buf, r.Pos); err != nil {
		return nil, fmt.Errorf("%w: read segment %d: %v", ErrStorage, r.seg.Base(), err)
	}
	return buf, nil
}

// ReadRegion is Read without the copy: the committed batches from the one
// holding offset, whole, up to maxBytes (at least the first batch) and
// within one segment, as a Region the caller must Release. An empty
// region (Len 0, nothing held) when there is nothing to read.
func (p *Partition) ReadRegion(offset int64, maxBytes int32) (*Region, Offsets, error) {
	seg, pos, first, limit, res, unlock, err := p.locate(offset, false)
	// The header walk reads the segment's size: under the lock, as Find.
	defer unlock()
	if err != nil || seg == nil {
		return &Region{}, res.Offsets, err
	}
	n := readLength(limit-pos, maxBytes, first.Size())
	// Whole batches only (the index finds the boundaries cheaply).
	end, err := seg.WholeBatchesEnd(pos, pos+n)
	if err != nil {
		seg.Release()
		return &Region{}, res.Offsets, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	whole := end - pos
	if whole == 0 {
		seg.Release()
		return &Region{}, res.Offsets, nil
	}
	return &Region{seg: seg, Pos: pos, Len: whole}, res.Offsets, nil
}
