package log

import (
	"fmt"

	"github.com/strata-io/strata/segment"
)

// The removal limit (replication/doc.go, "Partition groups"): a Raft log
// store over the segments maps raft indexes to batches from its newest
// snapshot on, so batches at or above that snapshot's end must stay as
// they are. Retention and DeleteRecords still move the log start (reads
// below it fail as before), but a segment is removed only once it lies
// wholly below the limit too, and compaction rewrites only segments below
// it. A partition without a replication layer has no limit.

// SetRemovalLimit sets the offset from which batches must stay in place.
func (p *Partition) SetRemovalLimit(offset int64) { p.removalLimit.Store(offset) }

// RemovalLimit is the offset from which batches stay in place
// (math.MaxInt64: none).
func (p *Partition) RemovalLimit() int64 { return p.removalLimit.Load() }

// SetSnapshotHook registers fn, which asks the replication layer to take
// a snapshot now (raising the removal limit); the cleaner calls it when
// the limit holds back what retention or compaction would remove. fn runs
// on the caller's goroutine and must not be called with p's lock held.
func (p *Partition) SetSnapshotHook(fn func() error) {
	p.hookMu.Lock()
	p.snapshotHook = fn
	p.hookMu.Unlock()
}

// RequestSnapshot runs the snapshot hook, if any.
func (p *Partition) RequestSnapshot() error {
	p.hookMu.Lock()
	fn := p.snapshotHook
	p.hookMu.Unlock()
	if fn == nil {
		return nil
	}
	return fn()
}

// RemoveBelowLogStart removes the segments that lie wholly below both the
// log start and the removal limit (left by a move of the log start while
// the limit held them).
func (p *Partition) RemoveBelowLogStart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	return p.removeBelowLogStartLocked()
}

// ScanHeadersFrom calls fn with the header of every batch stored from the
// one holding offset on, in order, below the log start too (a Raft log
// store rebuilding its index map reads the batches its snapshot did not
// cover, which the removal limit kept). It stops when fn returns false.
func (p *Partition) ScanHeadersFrom(offset int64, fn func(h *segment.Header) bool) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrClosed
	}
	stop := false
	for i := p.segmentIndexLocked(offset); i < len(p.segs) && !stop; i++ {
		s := p.segs[i]
		if s.NextOffset() <= offset {
			continue
		}
		pos, _, found, err := s.Find(offset, s.Size())
		if err != nil {
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
		if !found {
			continue
		}
		err = s.ScanHeaders(pos, s.Size(), func(_ int64, h *segment.Header) bool {
			if !fn(h) {
				stop = true
				return false
			}
			return true
		})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
	}
	return nil
}
