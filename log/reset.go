package log

import (
	"fmt"
	"time"

	"github.com/strata-io/strata/segment"
)

// ResetTo empties the log and starts it again, empty, at offset: every
// segment, producer snapshot and leader epoch goes; log start, high
// watermark and log end become offset. It is Kafka's
// truncateFullyAndStartAt: a replica that receives the leader's whole log
// (a Raft snapshot install) starts from here and appends the leader's
// batches with AppendReplica. A storage error is sticky, as for
// TruncateTo.
func (p *Partition) ResetTo(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: reset to negative offset %d", ErrOffsetOutOfRange, offset)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.werr != nil {
		return fmt.Errorf("%w: %v", ErrStorage, p.werr)
	}
	fail := func(err error) error {
		p.werr = err
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	// The new segment first, then the old ones go: a crash in between
	// leaves the old data plus an empty segment past it, which the
	// replication layer's interrupted-install marker resets again.
	cfg := p.cfg.Load()
	old := p.segs
	var fresh *segment.Segment
	for _, s := range old {
		if s.Base() == offset {
			fresh = s // the name is taken: truncate that one instead
		}
	}
	if fresh != nil {
		if err := fresh.Reactivate(); err != nil {
			return fail(err)
		}
		if _, err := fresh.TruncateTo(offset); err != nil {
			return fail(err)
		}
		if err := fresh.Sync(); err != nil {
			return fail(err)
		}
	} else {
		s, err := segment.Create(p.fs, p.dir, offset, segOpts(cfg))
		if err != nil {
			return fail(err)
		}
		fresh = s
	}
	for _, s := range old {
		if s == fresh {
			continue
		}
		if err := s.Remove(); err != nil {
			return fail(err)
		}
		p.removeTxnIndex(s.Base())
	}
	p.removeTxnIndex(offset)
	if err := p.fs.SyncDir(p.dir); err != nil {
		return fail(err)
	}
	p.segs = []*segment.Segment{fresh}
	p.logStart, p.hw, p.leo, p.recoveryPoint = offset, offset, offset, offset
	p.pending = p.pending[:0]
	p.maxTs, p.maxTsOff = -1, -1
	p.producers = newProducerState()
	p.aborted, p.unstable = p.aborted[:0], p.unstable[:0]
	p.activeSnap = p.producers.clone()
	p.activeCreated = p.now()
	p.unflushedMsgs, p.firstUnflushed = 0, time.Time{}
	p.removeSnapshotsAbove(-1)
	p.epochs = nil
	if err := p.writeEpochsLocked(); err != nil {
		p.logger.Warn("cannot write leader epoch checkpoint", "err", err)
	}
	p.cleanerPoint.Store(-1)
	p.logger.Info("log reset", "offset", offset)
	return nil
}

// SpanBytes is the size in bytes of the whole batches from the one holding
// from up to (not including) the first batch at or after to, as stored
// now, and the base offset of the first of them. from must be in
// [log start, to]; to at most the log end. It reads only index entries
// and a few headers, so a replication layer can size a transfer of the
// whole log without reading it.
func (p *Partition) SpanBytes(from, to int64) (size int64, first int64, err error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return 0, 0, ErrClosed
	}
	if from < p.logStart || from > to || to > p.leo {
		return 0, 0, fmt.Errorf("%w: span [%d, %d) not in [%d, %d]", ErrOffsetOutOfRange, from, to, p.logStart, p.leo)
	}
	first = -1
	for i := p.segmentIndexLocked(from); i < len(p.segs) && from < to; i++ {
		s := p.segs[i]
		start, h, found, err := s.Find(from, s.Size())
		if err != nil {
			return 0, 0, fmt.Errorf("%w: %v", ErrStorage, err)
		}
		if !found {
			continue
		}
		if h.BaseOffset >= to {
			break
		}
		if first < 0 {
			first = h.BaseOffset
		}
		end := s.Size()
		if s.NextOffset() > to {
			pos, _, found, err := s.Find(to, s.Size())
			if err != nil {
				return 0, 0, fmt.Errorf("%w: %v", ErrStorage, err)
			}
			if found {
				end = pos
			}
		}
		size += end - start
		from = s.NextOffset()
	}
	if first < 0 {
		first = to
	}
	return size, first, nil
}
