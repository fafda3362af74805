package log

import (
	"errors"
	"fmt"

	"github.com/strata-io/strata/segment"
)

// ErrNotAtLogEnd is a replicated batch whose base offset is not the log
// end: the replica's log and the leader's have diverged (the replication
// layer truncates first) or the batch was not stamped.
var ErrNotAtLogEnd = errors.New("log: replicated batch not at the log end")

// AppendReplica appends one batch that a leader has already accepted and
// stamped (base offset, leader epoch, timestamps): a follower's write, and
// a Raft log store's. The batch is written as it is, byte for byte, so
// every replica stores identical batches; its base offset must be the log
// end. Producer state is updated as Append would, but nothing is refused
// for sequence, epoch or timestamp reasons: the leader decided that, and a
// replica must not disagree (its state derives from the same log). The CRC
// and format are still checked, since the bytes crossed a network.
// It does not advance the high watermark: call Commit.
func (p *Partition) AppendReplica(batch []byte) (AppendResult, error) {
	res := AppendResult{LogAppendTime: -1}
	h, err := segment.ValidateBatch(batch)
	if err != nil {
		return res, mapSegmentErr(err)
	}
	if int64(len(batch)) != h.Size() {
		return res, fmt.Errorf("%w: %d bytes for one batch of %d", ErrCorruptBatch, len(batch), h.Size())
	}
	cfg := p.cfg.Load()
	now := p.now()
	if h.IsLogAppendTime() {
		res.LogAppendTime = h.MaxTimestamp
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return res, ErrClosed
	}
	if p.werr != nil {
		return res, fmt.Errorf("%w: %v", ErrStorage, p.werr)
	}
	if h.BaseOffset != p.leo {
		return res, fmt.Errorf("%w: batch at %d, log end %d", ErrNotAtLogEnd, h.BaseOffset, p.leo)
	}
	res.LogStartOffset = p.logStart
	txn := p.producers.begin()
	txn.record(&h, markerOfBatch(&h, batch))
	info := []segment.BatchInfo{{Pos: 0, Len: len(batch), LastOffset: h.LastOffset(), MaxTimestamp: h.MaxTimestamp}}
	if err := p.maybeRollLocked(cfg, now, int64(len(batch)), h.LastOffset()); err != nil {
		return res, err
	}
	act := p.segs[len(p.segs)-1]
	start := act.Size()
	if err := act.Append(batch, info); err != nil {
		if act.Err() == nil {
			// ENOSPC, cut back by the segment: only this append failed
			// (nothing of it is in the log); appends work again once
			// space returns.
			return res, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		p.werr = err
		p.logger.Error("replica append failed; partition refuses writes until reopened", "err", err)
		return res, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	txn.commit()
	for _, e := range txn.ended {
		p.endTxnLocked(e, true)
	}
	if p.noteEpochLocked(h.LeaderEpoch, p.leo) {
		if err := p.writeEpochsLocked(); err != nil {
			p.logger.Warn("cannot write leader epoch checkpoint", "err", err)
		}
	}
	p.pending = append(p.pending, pendingBatch{seg: act, pos: start, lastOffset: h.LastOffset(), maxTs: h.MaxTimestamp})
	res.BaseOffset, res.LastOffset = h.BaseOffset, h.LastOffset()
	p.leo = h.LastOffset() + 1
	p.unflushedMsgs += int64(h.NumRecords)
	if p.firstUnflushed.IsZero() {
		p.firstUnflushed = now
	}
	if cfg.FlushIntervalMessages > 0 && p.unflushedMsgs >= cfg.FlushIntervalMessages {
		if p.flushHeld > 0 {
			p.heldReplica = true // ReleaseFlush syncs
		} else if err := p.flushLocked(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// BatchAt returns a copy of the one whole batch whose base offset is
// offset, committed or not (a Raft log store reads its entries with it).
// ErrOffsetOutOfRange when no batch starts there.
func (p *Partition) BatchAt(offset int64) ([]byte, error) {
	rr, err := p.ReadUncommitted(offset, segment.HeaderSize)
	if err != nil {
		return nil, err
	}
	if len(rr.Records) < segment.HeaderSize {
		return nil, fmt.Errorf("%w: no batch at %d (log end %d)", ErrOffsetOutOfRange, offset, rr.Offsets.LogEnd)
	}
	h, err := segment.ParseHeader(rr.Records)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptBatch, err)
	}
	if h.BaseOffset != offset {
		return nil, fmt.Errorf("%w: offset %d is inside the batch at %d", ErrOffsetOutOfRange, offset, h.BaseOffset)
	}
	return rr.Records[:h.Size()], nil
}

// Dir is the partition's directory. The log ignores subdirectories it does
// not know (a replication layer keeps its own files there), and deleting
// the partition removes them with it.
func (p *Partition) Dir() string { return p.dir }
