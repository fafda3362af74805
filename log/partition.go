package log

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/segment"
)

// Defaults for zero Config fields (Kafka's defaults).
const (
	defaultSegmentBytes    = 1 << 30
	defaultSegmentMs       = 7 * 24 * time.Hour
	defaultMaxMessageBytes = 1<<20 + 12
	// maxReadBytes bounds the buffer one Read allocates (a single batch
	// larger than this is still returned whole).
	maxReadBytes = 64 << 20
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is the partition's directory name, "<topic>-<partition>".
func (tp TopicPartition) String() string { return tp.Topic + "-" + strconv.Itoa(int(tp.Partition)) }

func withDefaults(c Config) Config {
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = defaultSegmentBytes
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = defaultSegmentMs
	}
	if c.SegmentIndexBytes <= 0 {
		c.SegmentIndexBytes = segment.DefaultIndexBytes
	}
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = segment.DefaultIndexInterval
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = defaultMaxMessageBytes
	}
	if c.FlushIntervalMessages < 0 {
		c.FlushIntervalMessages = 0
	}
	return c
}

// pendingBatch is an appended batch not yet below the high watermark.
type pendingBatch struct {
	seg        *segment.Segment
	pos        int64
	lastOffset int64
	maxTs      int64
}

// Partition is one partition's log: ordered segments, offsets, producer
// state and fetch waiters. One writer at a time (Append/Commit/TruncateTo are
// serialized internally); Read, Offsets and Wait may be called from any
// goroutine. See doc.go for the locking rules.
type Partition struct {
	tp     TopicPartition
	dir    string
	fs     segment.FS
	logger *slog.Logger
	now    func() time.Time

	cfg atomic.Pointer[Config] // with defaults applied

	mu sync.RWMutex
	// segs are ordered by base offset; the last is the active segment.
	// Invariant: len(segs) >= 1 while open. Protected by mu.
	segs []*segment.Segment
	// Invariant: logStart <= hw <= leo. Protected by mu.
	logStart int64
	hw       int64 // committed: first offset not yet committed
	leo      int64 // dirty: next offset to assign
	// pending are the batches at or above hw, in offset order; they bound
	// reads (readers stop at pending[0].pos) and feed MaxTimestamp.
	pending []pendingBatch
	// committed max timestamp and the last offset of its batch; -1 none.
	maxTs, maxTsOff int64
	producers       *producerState
	// aborted is the aborted-transaction index of every segment (txn.go),
	// ascending by LastOffset; unstable are transactions whose marker is
	// at or above hw (they hold the LSO back). Protected by mu.
	aborted  []AbortedTxn
	unstable []txnSpan
	// activeSnap is the producer state as of the active segment's base
	// offset, so TruncateTo within the active segment replays only it.
	activeSnap *producerState
	// epochs is the leader-epoch cache (epochs.go), ascending in both
	// fields. Protected by mu.
	epochs         []epochEntry
	activeCreated  time.Time // for segment.ms
	unflushedMsgs  int64
	firstUnflushed time.Time // zero when everything is flushed
	// flushHeld > 0 between HoldFlush and ReleaseFlush: the appends meanwhile
	// leave their flush.interval.messages fsync to ReleaseFlush;
	// heldReplica says one of them was AppendReplica (which syncs the
	// indexes too).
	flushHeld   int
	heldReplica bool
	// recoveryPoint: every offset below it is fsync'd (Kafka's recovery
	// point); checkpointed so the next open knows where checking starts.
	recoveryPoint int64
	werr          error // sticky storage error: appends refused until reopen
	// cleanerPoint is the log cleaner's first dirty offset: everything
	// below it was compacted (-1 = unknown, all dirty). Checkpointed.
	cleanerPoint atomic.Int64
	closed       bool
	// removalLimit (removal.go): batches at or above it are never removed
	// or rewritten. math.MaxInt64 when no replication layer set one.
	removalLimit atomic.Int64
	hookMu       sync.Mutex
	snapshotHook func() error // protected by hookMu

	waiters waiters
}

// segOpts are the segment options derived from cfg.
func segOpts(c *Config) segment.Options {
	return segment.Options{IndexBytes: int(c.SegmentIndexBytes), IndexInterval: int(c.IndexIntervalBytes)}
}

// parseSegmentBase parses "<20 digits>.log".
func parseSegmentBase(name string) (int64, bool) {
	if !strings.HasSuffix(name, segment.LogExt) {
		return 0, false
	}
	s := strings.TrimSuffix(name, segment.LogExt)
	if len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// partitionState is what the manager remembers across restarts.
type partitionState struct {
	logStart int64 // -1 unknown
	hw       int64 // -1 unknown; used only with UseHighWatermarkCheckpoint
	recovery int64 // recovery point: everything below was fsync'd; -1 unknown
	cleaner  int64 // the cleaner's first dirty offset (compact.go); -1 unknown
}

// openPartition opens or creates the partition's directory and recovers
// its segments: only the last (active) segment's tail is scanned, because
// rolled segments were fsync'd when they were sealed.
func openPartition(fsys segment.FS, dir string, tp TopicPartition, cfg Config, st partitionState, logger *slog.Logger, now func() time.Time) (*Partition, error) {
	p := &Partition{tp: tp, dir: dir, fs: fsys, logger: logger.With("partition", tp.String()), now: now, maxTs: -1, maxTsOff: -1}
	p.removalLimit.Store(math.MaxInt64)
	c := withDefaults(cfg)
	p.cfg.Store(&c)
	// A compaction interrupted by a crash is finished or discarded first
	// (compact.go), so the listing below sees one consistent run.
	if done, err := recoverSwap(fsys, dir); err != nil {
		return nil, err
	} else if done {
		p.logger.Warn("finished a compaction swap interrupted by a crash")
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %v", ErrStorage, dir, err)
	}
	var bases []int64
	for _, e := range ents {
		if b, ok := parseSegmentBase(e.Name); ok && !e.IsDir {
			bases = append(bases, b)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	opts := segOpts(&c)
	fail := func(err error) (*Partition, error) {
		for _, s := range p.segs {
			s.Close()
		}
		return nil, err
	}
	for i, b := range bases {
		active := i == len(bases)-1
		// The active segment is checked from the recovery point on (all
		// of it when the point is unknown), and from its last index
		// entry at the latest.
		verifyFrom := st.recovery
		if verifyFrom < 0 {
			verifyFrom = 0
		}
		s, info, err := segment.OpenFrom(fsys, dir, b, opts, active, verifyFrom)
		if err != nil {
			return fail(fmt.Errorf("%w: open segment %d of %s: %v", ErrStorage, b, tp, err))
		}
		if info.TruncatedBytes > 0 || info.Rebuilt {
			p.logger.Warn("recovered segment", "base", b, "truncated_bytes", info.TruncatedBytes, "index_rebuilt", info.Rebuilt)
		}
		if n := len(p.segs); n > 0 && p.segs[n-1].NextOffset() > b {
			// Overlap: the earlier segment runs past this one's base,
			// which a correct roll never produces. Keep the earlier
			// data and drop this and later segments.
			p.logger.Error("segment overlaps its predecessor; dropping the rest of the log", "base", b)
			s.Close()
			if err := p.removeFrom(bases[i:]); err != nil {
				return fail(err)
			}
			break
		}
		p.segs = append(p.segs, s)
		if info.TruncatedBytes > 0 && !active {
			// A rolled segment lost its tail: everything after it is
			// no longer contiguous, as Kafka's recovery we drop it.
			if err := p.removeFrom(bases[i+1:]); err != nil {
				return fail(err)
			}
			break
		}
	}
	if len(p.segs) == 0 {
		base := st.logStart
		if base < 0 {
			base = 0
		}
		s, err := segment.Create(fsys, dir, base, opts)
		if err != nil {
			return fail(fmt.Errorf("%w: %v", ErrStorage, err))
		}
		p.segs = append(p.segs, s)
	}
	act := p.segs[len(p.segs)-1]
	if err := act.Reactivate(); err != nil {
		return fail(fmt.Errorf("%w: %v", ErrStorage, err))
	}
	// What recovery kept may be only in the page cache (a process crash):
	// make it durable so the recovery point can move to the log end.
	if err := act.Sync(); err != nil {
		return fail(fmt.Errorf("%w: %v", ErrStorage, err))
	}
	p.leo = act.NextOffset()
	p.recoveryPoint = p.leo
	p.logStart = p.segs[0].Base()
	if st.logStart > p.logStart {
		p.logStart = st.logStart
	}
	if p.logStart > p.leo {
		p.logStart = p.leo
	}
	// Single node (the default): everything recovered is committed, see
	// doc.go. With a replicated log the checkpointed value is used and
	// the replication layer commits the rest.
	p.hw = p.leo
	if st.hw >= 0 {
		p.hw = min(max(st.hw, p.logStart), p.leo)
	}
	p.activeCreated = now()
	p.cleanerPoint.Store(min(st.cleaner, p.leo))
	if err := p.rebuildDerivedLocked(); err != nil {
		return fail(err)
	}
	p.waiters.hw = p.hw
	return p, nil
}

// removeFrom deletes the segments with the given bases (files only; they
// are not open) and syncs the directory.
func (p *Partition) removeFrom(bases []int64) error {
	for _, b := range bases {
		for _, ext := range []string{segment.LogExt, segment.IndexExt, segment.TimeIndexExt, txnIndexExt} {
			if err := p.fs.Remove(filepath.Join(p.dir, segment.FileName(b, ext))); err != nil && !isNotExist(err) {
				return fmt.Errorf("%w: %v", ErrStorage, err)
			}
		}
	}
	if err := p.fs.SyncDir(p.dir); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return nil
}

// rebuildDerivedLocked derives the producer state (and the snapshot at
// the active segment's base), the committed max timestamp and the pending
// batches above hw from the log. Producer state starts from the newest
// usable snapshot file and replays batch headers from there (payloads
// skipped by length); segments wholly committed and before the snapshot
// contribute their cached max timestamp without any read. Caller holds mu
// (or owns p).
func (p *Partition) rebuildDerivedLocked() error {
	p.pending = p.pending[:0]
	p.aborted, p.unstable = p.aborted[:0], p.unstable[:0]
	p.maxTs, p.maxTsOff = -1, -1
	snap, snapOff := p.loadSnapshotLocked()
	epochs, ok := readEpochs(p.fs, p.dir)
	if !ok {
		// No usable epoch cache: derive it (and producers) from every batch.
		snap, snapOff, epochs = nil, -1, nil
	}
	p.epochs = epochs
	p.truncateEpochsLocked(p.leo)
	if snap == nil {
		snap = newProducerState()
	}
	p.producers = snap
	last := len(p.segs) - 1
	for i, s := range p.segs {
		if i == last {
			p.activeSnap = p.producers.clone()
		}
		if s.Empty() || s.NextOffset() <= p.logStart {
			continue
		}
		replay := s.Base() >= snapOff
		if !replay {
			// Not replayed: its aborted transactions come from its file.
			ents, err := p.readTxnIndex(s.Base())
			if err != nil {
				p.logger.Warn("unreadable transaction index; replaying the log from the start", "base", s.Base(), "err", err)
				return p.rebuildWithoutSnapshotLocked()
			}
			for _, a := range ents {
				if a.LastOffset >= s.Base() && a.LastOffset < s.NextOffset() {
					p.aborted = append(p.aborted, a)
				}
			}
		}
		if !replay && s.NextOffset() <= p.hw {
			if ts, off := s.MaxTimestamp(); ts > p.maxTs {
				p.maxTs, p.maxTsOff = ts, off
			}
			continue
		}
		each := func(pos int64, h *segment.Header) {
			if replay {
				p.noteEpochLocked(h.LeaderEpoch, h.BaseOffset)
			}
			if h.LastOffset() < p.hw {
				if h.MaxTimestamp > p.maxTs {
					p.maxTs, p.maxTsOff = h.MaxTimestamp, h.LastOffset()
				}
			} else {
				p.pending = append(p.pending, pendingBatch{seg: s, pos: pos, lastOffset: h.LastOffset(), maxTs: h.MaxTimestamp})
			}
		}
		var err error
		if replay {
			err = p.replaySegmentLocked(s, each)
			if err == nil {
				// The file is re-derived from the markers (fsync'd for
				// sealed segments, which are not replayed next time).
				if werr := p.writeTxnIndexLocked(s.Base(), s.NextOffset(), i != last); werr != nil {
					p.logger.Warn("cannot write transaction index", "base", s.Base(), "err", werr)
				}
			}
		} else {
			err = s.ScanHeaders(0, s.Size(), func(pos int64, h *segment.Header) bool {
				each(pos, h)
				return true
			})
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
	}
	p.pruneTxnLocked()
	return nil
}

// rebuildWithoutSnapshotLocked re-derives everything from every batch,
// ignoring snapshots and index files (one of them was unreadable).
func (p *Partition) rebuildWithoutSnapshotLocked() error {
	offs, err := p.snapshotOffsets()
	if err == nil {
		for _, o := range offs {
			p.fs.Remove(filepath.Join(p.dir, snapshotName(o)))
		}
	}
	return p.rebuildDerivedLocked()
}

// rebuildProducersActiveLocked restores the producer snapshot taken at the
// active segment's base and replays the active segment only.
func (p *Partition) rebuildProducersActiveLocked() error {
	p.producers = p.activeSnap.clone()
	act := p.segs[len(p.segs)-1]
	p.dropAbortedFromLocked(act.Base())
	if err := p.replaySegmentLocked(act, nil); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := p.writeTxnIndexLocked(act.Base(), act.NextOffset(), false); err != nil {
		p.logger.Warn("cannot write transaction index", "base", act.Base(), "err", err)
	}
	p.pruneTxnLocked()
	return nil
}

// Topic partition this log belongs to.
func (p *Partition) TopicPartition() TopicPartition { return p.tp }

// Config returns the partition's configuration with defaults applied.
func (p *Partition) Config() Config { return *p.cfg.Load() }

// SetConfig applies a new configuration to a live partition. Index sizes
// apply from the next segment.
func (p *Partition) SetConfig(cfg Config) {
	c := withDefaults(cfg)
	p.cfg.Store(&c)
}

// checkTimestamps applies message.timestamp.before.max.ms and
// message.timestamp.after.max.ms to a CreateTime batch. Uncompressed batches
// are checked record by record, and the first bad record is named in a
// RecordError (Produce v8+ reports it in RecordErrors, as Kafka does);
// compressed batches are not opened, so their header's base and max
// timestamps stand for the records.
func checkTimestamps(b []byte, h segment.Header, nowMs int64, cfg *Config) error {
	if cfg.TimestampBeforeMaxMs <= 0 && cfg.TimestampAfterMaxMs <= 0 {
		return nil
	}
	bad := func(ts int64) error {
		if cfg.TimestampBeforeMaxMs > 0 && nowMs-ts > cfg.TimestampBeforeMaxMs {
			return fmt.Errorf("%w: timestamp %d is more than %d ms older than the broker's clock", ErrInvalidTimestamp, ts, cfg.TimestampBeforeMaxMs)
		}
		if cfg.TimestampAfterMaxMs > 0 && ts-nowMs > cfg.TimestampAfterMaxMs {
			return fmt.Errorf("%w: timestamp %d is more than %d ms ahead of the broker's clock", ErrInvalidTimestamp, ts, cfg.TimestampAfterMaxMs)
		}
		return nil
	}
	if h.Compression() != 0 {
		if err := bad(h.BaseTimestamp); err != nil {
			return err
		}
		return bad(h.MaxTimestamp)
	}
	var rerr error
	err := segment.RecordTimestamps(b, h, func(i int32, ts int64) bool {
		if err := bad(ts); err != nil {
			rerr = &RecordError{Index: i, Err: err}
			return false
		}
		return true
	})
	if err != nil {
		return mapSegmentErr(err)
	}
	return rerr
}

// mapSegmentErr turns a batch validation error into the log's sentinels.
func mapSegmentErr(err error) error {
	switch {
	case errors.Is(err, segment.ErrUnsupportedMagic):
		return fmt.Errorf("%w: %v", ErrUnsupportedMagic, err)
	case errors.Is(err, segment.ErrInvalidRecord):
		return fmt.Errorf("%w: %v", ErrInvalidRecord, err)
	default:
		return fmt.Errorf("%w: %v", ErrCorruptBatch, err)
	}
}

// Append validates the record batches in records (one or more v2 batches as
// received from the wire), checks idempotent producer sequences, assigns
// offsets from the log end, stamps leaderEpoch into each batch, and writes
// the bytes once into the active segment (records is modified in place:
// base offset, leader epoch, and for LogAppendTime the max timestamp and
// CRC). It does not advance the high watermark: call Commit.
//
// A retried idempotent batch returns the original offsets with
// Duplicate set and ErrDuplicateSequence; nothing is written.
func (p *Partition) Append(records []byte, leaderEpoch int32) (AppendResult, error) {
	res := AppendResult{LogAppendTime: -1}
	cfg := p.cfg.Load()
	if len(records) == 0 {
		return res, fmt.Errorf("%w: empty records", ErrCorruptBatch)
	}
	spans, err := segment.SplitBatches(records, 0)
	if err != nil {
		return res, mapSegmentErr(err)
	}
	// Validation (CRC over every byte) runs before taking the lock.
	hdrs := make([]segment.Header, len(spans))
	now := p.now()
	nowMs := now.UnixMilli()
	appendTime := cfg.MessageTimestampType == "LogAppendTime"
	for i, sp := range spans {
		b := records[sp[0]:sp[1]]
		if len(b) > int(cfg.MaxMessageBytes) {
			return res, fmt.Errorf("%w: batch of %d bytes, max.message.bytes %d", ErrBatchTooLarge, len(b), cfg.MaxMessageBytes)
		}
		h, err := segment.ValidateBatch(b)
		if err != nil {
			return res, mapSegmentErr(err)
		}
		if appendTime {
			segment.SetLogAppendTime(b, nowMs)
			h.MaxTimestamp = nowMs
			h.Attributes |= segment.AttrTimestampType
		} else if !h.IsLogAppendTime() {
			if err := checkTimestamps(b, h, nowMs, cfg); err != nil {
				return res, err
			}
		}
		hdrs[i] = h
	}
	if appendTime {
		res.LogAppendTime = nowMs
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return res, ErrClosed
	}
	if p.werr != nil {
		return res, fmt.Errorf("%w: %v", ErrStorage, p.werr)
	}
	res.LogStartOffset = p.logStart

	// Producer checks against the state plus this append's earlier batches.
	txn := p.producers.begin()
	off := p.leo
	infos := make([]segment.BatchInfo, len(spans))
	for i := range hdrs {
		h := &hdrs[i]
		b := records[spans[i][0]:spans[i][1]]
		m := markerOfBatch(h, b)
		if dup, err := txn.check(h, m); err != nil {
			if dup != nil {
				res.BaseOffset, res.LastOffset, res.Duplicate = dup.firstOff, dup.lastOff, true
			}
			return res, err
		}
		h.BaseOffset = off
		h.LeaderEpoch = leaderEpoch
		txn.record(h, m)
		segment.SetBaseOffset(b, off)
		segment.SetLeaderEpoch(b, leaderEpoch)
		infos[i] = segment.BatchInfo{Pos: spans[i][0], Len: len(b), LastOffset: h.LastOffset(), MaxTimestamp: h.MaxTimestamp}
		off = h.LastOffset() + 1
	}
	if err := p.maybeRollLocked(cfg, now, int64(len(records)), off-1); err != nil {
		return res, err
	}
	act := p.segs[len(p.segs)-1]
	start := act.Size()
	if err := act.Append(records, infos); err != nil {
		if act.Err() == nil {
			// ENOSPC, cut back by the segment: only this append failed
			// (nothing of it is in the log); appends work again once
			// space returns.
			return res, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		p.werr = err
		p.logger.Error("append failed; partition refuses writes until reopened", "err", err)
		return res, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	txn.commit()
	for _, e := range txn.ended {
		p.endTxnLocked(e, true)
	}
	if p.noteEpochLocked(leaderEpoch, p.leo) {
		if err := p.writeEpochsLocked(); err != nil {
			// Rebuilt from the batches at the next open if lost.
			p.logger.Warn("cannot write leader epoch checkpoint", "err", err)
		}
	}
	var nrec int64
	for i := range hdrs {
		p.pending = append(p.pending, pendingBatch{seg: act, pos: start + int64(infos[i].Pos), lastOffset: infos[i].LastOffset, maxTs: infos[i].MaxTimestamp})
		nrec += int64(hdrs[i].NumRecords)
	}
	res.BaseOffset = p.leo
	res.LastOffset = off - 1
	p.leo = off
	p.unflushedMsgs += nrec
	if p.firstUnflushed.IsZero() {
		p.firstUnflushed = now
	}
	if cfg.FlushIntervalMessages > 0 && p.unflushedMsgs >= cfg.FlushIntervalMessages && p.flushHeld == 0 {
		if err := p.syncLogUnlocking(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// syncLogUnlocking is flushLogLocked with p.mu released during the fsync
// itself, so that Commit and reads (a consumer fetching the batch before
// this one) go on meanwhile instead of queueing behind the disk; p.mu is
// held on entry and on return. The active segment is held by a reference
// while unlocked. The recovery point moves to the log end as of the call.
func (p *Partition) syncLogUnlocking() error {
	if p.werr != nil {
		return fmt.Errorf("%w: %v", ErrStorage, p.werr)
	}
	if p.firstUnflushed.IsZero() {
		return nil
	}
	seg := p.segs[len(p.segs)-1]
	if !seg.Acquire() {
		return p.flushLogLocked()
	}
	leo := p.leo
	p.mu.Unlock()
	err := seg.SyncLogFile()
	seg.Release()
	p.mu.Lock()
	if err != nil {
		p.werr = seg.FailWrite(err)
		p.logger.Error("fsync failed; partition refuses writes until reopened", "err", err)
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if leo > p.recoveryPoint {
		p.recoveryPoint = leo
	}
	if p.leo == leo { // nothing appended meanwhile: everything is flushed
		p.unflushedMsgs = 0
		p.firstUnflushed = time.Time{}
	}
	return nil
}

// HoldFlush defers the flush.interval.messages fsync of the appends that
// follow to ReleaseFlush: a caller storing several batches at once (raft's
// StoreLogs, before any of them is acknowledged) pays one fsync for all of
// them -- group commit. Every HoldFlush must be matched by ReleaseFlush.
func (p *Partition) HoldFlush() {
	p.mu.Lock()
	p.flushHeld++
	p.mu.Unlock()
}

// ReleaseFlush ends a HoldFlush and, when the last hold ends, fsyncs if
// the appends meanwhile reached flush.interval.messages. Its error is the
// appends' own: the caller must not report them written.
func (p *Partition) ReleaseFlush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.flushHeld > 0 {
		p.flushHeld--
	}
	if p.flushHeld > 0 || p.closed {
		return nil // closing flushed everything
	}
	replica := p.heldReplica
	p.heldReplica = false
	cfg := p.cfg.Load()
	if cfg.FlushIntervalMessages <= 0 || p.unflushedMsgs < cfg.FlushIntervalMessages {
		return nil
	}
	if replica {
		return p.flushLocked()
	}
	return p.syncLogUnlocking()
}

// maybeRollLocked starts a new segment when the active one is non-empty
// and would pass segment.bytes, is older than segment.ms, or its indexes or
// relative offsets are full.
func (p *Partition) maybeRollLocked(cfg *Config, now time.Time, size int64, lastOffset int64) error {
	act := p.segs[len(p.segs)-1]
	if act.Empty() {
		return nil
	}
	if act.Size()+size <= cfg.SegmentBytes && now.Sub(p.activeCreated) < cfg.SegmentMs && act.CanHold(size, lastOffset) {
		return nil
	}
	return p.rollLocked(cfg)
}

// rollLocked seals the active segment (fsync'd, indexes trimmed) and
// creates the next one at leo.
func (p *Partition) rollLocked(cfg *Config) error {
	act := p.segs[len(p.segs)-1]
	if err := act.Seal(); err != nil {
		p.werr = err
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := p.syncTxnIndexLocked(act.Base()); err != nil {
		// Only the markers replayed at open could rebuild it: rewrite
		// it whole and fsync, and refuse writes if even that fails.
		if err := p.writeTxnIndexLocked(act.Base(), act.NextOffset(), true); err != nil {
			p.werr = err
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
	}
	s, err := segment.Create(p.fs, p.dir, p.leo, segOpts(cfg))
	if err != nil {
		p.werr = err
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	p.segs = append(p.segs, s)
	p.activeSnap = p.producers.clone()
	p.activeCreated = p.now()
	if err := p.writeSnapshotLocked(p.leo, p.activeSnap); err != nil {
		// Only an optimization for the next open: log and carry on.
		p.logger.Warn("cannot write producer snapshot", "offset", p.leo, "err", err)
	}
	// The sealed segment was fsync'd, so only the new one is unflushed.
	p.unflushedMsgs = 0
	p.firstUnflushed = time.Time{}
	p.recoveryPoint = p.leo
	return nil
}

// Roll forces a new active segment (if the current one is not empty).
func (p *Partition) Roll() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.werr != nil {
		return fmt.Errorf("%w: %v", ErrStorage, p.werr)
	}
	if p.segs[len(p.segs)-1].Empty() {
		return nil
	}
	return p.rollLocked(p.cfg.Load())
}

// Commit advances the high watermark to min(offset, LogEnd) and wakes
// waiting fetchers. It never moves the high watermark backwards.
func (p *Partition) Commit(offset int64) {
	p.mu.Lock()
	if offset > p.leo {
		offset = p.leo
	}
	if p.closed || offset <= p.hw {
		p.mu.Unlock()
		return
	}
	p.hw = offset
	p.pruneTxnLocked()
	n := 0
	for n < len(p.pending) && p.pending[n].lastOffset < offset {
		if b := p.pending[n]; b.maxTs > p.maxTs {
			p.maxTs, p.maxTsOff = b.maxTs, b.lastOffset
		}
		n++
	}
	if n == len(p.pending) {
		p.pending = p.pending[:0]
	} else {
		p.pending = append(p.pending[:0], p.pending[n:]...)
	}
	p.mu.Unlock()
	p.waiters.advance(offset)
}

// TruncateTo removes every batch at or above offset (which must be above
// the high watermark, or equal to it) and rebuilds producer state. A batch
// straddling offset is removed whole.
func (p *Partition) TruncateTo(offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if offset < p.hw {
		return fmt.Errorf("%w: truncate to %d below high watermark %d", ErrOffsetOutOfRange, offset, p.hw)
	}
	if offset >= p.leo {
		return nil
	}
	if p.werr != nil {
		return fmt.Errorf("%w: %v", ErrStorage, p.werr)
	}
	removed := false
	for len(p.segs) > 1 && p.segs[len(p.segs)-1].Base() >= offset {
		s := p.segs[len(p.segs)-1]
		p.segs = p.segs[:len(p.segs)-1]
		removed = true
		if err := s.Remove(); err != nil {
			p.werr = err
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
		p.removeTxnIndex(s.Base())
	}
	if removed {
		if err := p.fs.SyncDir(p.dir); err != nil {
			p.werr = err
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
	}
	act := p.segs[len(p.segs)-1]
	if err := act.Reactivate(); err != nil {
		p.werr = err
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	next, err := act.TruncateTo(offset)
	if err == nil {
		err = act.Sync()
	}
	if err != nil {
		p.werr = err
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	p.leo = next
	p.recoveryPoint = min(p.recoveryPoint, next) // the cut was fsync'd above
	n := len(p.pending)
	for n > 0 && p.pending[n-1].lastOffset >= next {
		n--
	}
	p.pending = p.pending[:n]
	p.removeSnapshotsAbove(p.leo)
	if p.truncateEpochsLocked(p.leo) {
		if err := p.writeEpochsLocked(); err != nil {
			p.logger.Warn("cannot write leader epoch checkpoint", "err", err)
		}
	}
	if removed {
		p.activeCreated = p.now()
		err = p.rebuildDerivedLocked()
	} else {
		err = p.rebuildProducersActiveLocked()
	}
	if err != nil {
		p.werr = err
		return err
	}
	return nil
}

// committedLimitLocked returns the segment and position where committed
// data ends: readers never look past it.
func (p *Partition) committedLimitLocked() (*segment.Segment, int64) {
	if len(p.pending) > 0 {
		return p.pending[0].seg, p.pending[0].pos
	}
	act := p.segs[len(p.segs)-1]
	return act, act.Size()
}

// segmentIndexLocked returns the index of the segment that would hold
// offset: the last with base <= offset (0 if none).
func (p *Partition) segmentIndexLocked(offset int64) int {
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].Base() > offset })
	if i > 0 {
		i--
	}
	return i
}

// Read returns whole batches starting with the batch containing offset, up
// to maxBytes but always at least one whole batch when offset is below the
// high watermark, never including anything at or above the high watermark.
// ErrOffsetOutOfRange when offset < LogStart or offset > HighWatermark.
//
// Readers copy the bytes into a fresh buffer while holding a reference on
// the segment, so a segment deleted meanwhile stays readable until the
// copy is done; the result never aliases storage.
func (p *Partition) Read(offset int64, maxBytes int32) (ReadResult, error) {
	return p.read(offset, maxBytes, false)
}

// ReadUncommitted is Read bounded by the log end instead of the high
// watermark, for replication (a Raft leader sends entries before they
// commit). Uncommitted bytes can be truncated and overwritten, so this
// copies them while holding the partition's read lock.
func (p *Partition) ReadUncommitted(offset int64, maxBytes int32) (ReadResult, error) {
	return p.read(offset, maxBytes, true)
}

func (p *Partition) read(offset int64, maxBytes int32, uncommitted bool) (ReadResult, error) {
	seg, pos, first, limit, res, unlock, err := p.locate(offset, uncommitted)
	defer unlock()
	if err != nil || seg == nil {
		return res, err
	}
	defer seg.Release()
	if !uncommitted {
		// Committed bytes never change: copy them without the lock.
		unlock()
	}
	n := readLength(limit-pos, maxBytes, first.Size())
	buf := make([]byte, n)
	if _, err := seg.ReadAt(buf, pos); err != nil {
		return res, fmt.Errorf("%w: read segment %d: %v", ErrStorage, seg.Base(), err)
	}
	// Keep whole batches only (the read may end inside one).
	whole := 0
	for whole+segment.HeaderSize <= len(buf) {
		h, err := segment.ParseHeader(buf[whole:])
		if err != nil || int64(whole)+h.Size() > int64(len(buf)) {
			break
		}
		whole += int(h.Size())
	}
	res.Records = buf[:whole]
	return res, nil
}

// readLength is how many bytes one read takes: what is there (avail), at
// most maxBytes (when >= 0) and maxReadBytes, but at least the first batch.
func readLength(avail int64, maxBytes int32, firstSize int64) int64 {
	n := avail
	if maxBytes >= 0 && n > int64(maxBytes) {
		n = int64(maxBytes)
	}
	if n > maxReadBytes {
		n = maxReadBytes // whatever the caller asked, one read is bounded
	}
	if n < firstSize {
		n = firstSize
	}
	return n
}

// locate finds the segment, position and header of the batch holding
// offset, and the position reads must stop at in that segment (the high
// watermark's, or the log end's when uncommitted). The segment is returned
// acquired (the caller releases it); nil when there is nothing to read.
// The partition's read lock is held until the caller calls unlock (an
// uncommitted read copies under it: the tail may be truncated); unlock may
// be called more than once.
func (p *Partition) locate(offset int64, uncommitted bool) (seg *segment.Segment, pos int64, first segment.Header, limit int64, res ReadResult, unlock func(), err error) {
	p.mu.RLock()
	locked := true
	unlock = func() {
		if locked {
			locked = false
			p.mu.RUnlock()
		}
	}
	if p.closed {
		return nil, 0, first, 0, res, unlock, ErrClosed
	}
	res = ReadResult{Offsets: p.offsetsLocked()}
	if offset < p.logStart || offset > p.leo {
		return nil, 0, first, 0, res, unlock, fmt.Errorf("%w: offset %d not in [%d, %d]", ErrOffsetOutOfRange, offset, p.logStart, p.leo)
	}
	end := p.hw
	if uncommitted {
		end = p.leo
	}
	if offset >= end {
		return nil, 0, first, 0, res, unlock, nil
	}
	limSeg, limPos := p.committedLimitLocked()
	if uncommitted {
		limSeg = p.segs[len(p.segs)-1]
		limPos = limSeg.Size()
	}
	for i := p.segmentIndexLocked(offset); i < len(p.segs); i++ {
		s := p.segs[i]
		limit = s.Size()
		if s == limSeg {
			limit = limPos
		}
		ps, h, found, ferr := s.Find(offset, limit)
		if ferr != nil {
			return nil, 0, first, 0, res, unlock, fmt.Errorf("%w: %v", ErrStorage, ferr)
		}
		if found {
			seg, pos, first = s, ps, h
			break
		}
		if s == limSeg {
			break
		}
	}
	if seg == nil || !seg.Acquire() {
		return nil, 0, first, 0, res, unlock, nil
	}
	// Bytes below limit are whole batches the log will not change (below
	// the high watermark) -- or, uncommitted, the tail as it is now -- and
	// the reference keeps the file readable even if retention deletes it.
	return seg, pos, first, limit, res, unlock, nil
}

// Offsets returns the partition's current offsets.
func (p *Partition) Offsets() Offsets {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.offsetsLocked()
}

// OffsetForTimestamp returns the first offset whose batch has a timestamp
// >= ts, with that timestamp, using the time index. found is false when no
// committed record is that late. Batch granularity: the offset is the
// batch's base offset (or the log start), and the timestamp the batch's
// first timestamp when that already reaches ts, else its max timestamp.
func (p *Partition) OffsetForTimestamp(ts int64) (offset, timestamp int64, found bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed || p.hw <= p.logStart {
		return -1, -1, false
	}
	limSeg, limPos := p.committedLimitLocked()
	for i := p.segmentIndexLocked(p.logStart); i < len(p.segs); i++ {
		s := p.segs[i]
		limit := s.Size()
		if s == limSeg {
			limit = limPos
		}
		if mts, _ := s.MaxTimestamp(); mts >= ts || s == limSeg {
			_, h, ok, err := s.FindTimestamp(ts, limit)
			if err != nil {
				p.logger.Error("time index lookup failed", "err", err)
				return -1, -1, false
			}
			if ok && h.LastOffset() >= p.logStart {
				off, t := h.BaseOffset, h.MaxTimestamp
				if !h.IsLogAppendTime() && h.BaseTimestamp >= ts {
					t = h.BaseTimestamp
				}
				return max(off, p.logStart), t, true
			}
		}
		if s == limSeg {
			break
		}
	}
	return -1, -1, false
}

// MaxTimestamp returns the largest timestamp committed and its offset
// (ListOffsets -3); offset -1 when the log is empty. The offset is the
// last offset of the batch holding that timestamp.
func (p *Partition) MaxTimestamp() (timestamp, offset int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.maxTsOff < 0 {
		return -1, -1
	}
	return p.maxTs, p.maxTsOff
}

// Wait returns a channel closed once the high watermark is above offset
// (or the partition is closed or deleted). Callers select on it with
// their own timeout.
func (p *Partition) Wait(offset int64) <-chan struct{} { return p.waiters.wait(offset) }

// Notify is Wait for a caller watching many partitions with one channel:
// once the high watermark is above offset (or the partition is closed or
// deleted) a send on ch is attempted without blocking (give ch a buffer of
// one). It reports false, registering nothing, when that is already so.
// The caller must Unnotify(ch) when it stops waiting.
func (p *Partition) Notify(offset int64, ch chan<- struct{}) bool {
	return p.waiters.notify(offset, ch)
}

// Unnotify drops ch's registrations that have not fired.
func (p *Partition) Unnotify(ch chan<- struct{}) { p.waiters.unnotify(ch) }

// Notified reports how many Notify registrations wait on the partition
// and have not fired: the long polls parked on it. Tests wait for a
// parked fetch with it instead of sleeping.
func (p *Partition) Notified() int {
	p.waiters.mu.Lock()
	defer p.waiters.mu.Unlock()
	return len(p.waiters.notifies)
}

// Producers lists the idempotent producers known to this partition.
func (p *Partition) Producers() []ProducerInfo {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.producers == nil {
		return nil
	}
	return p.producers.list()
}

// Flush fsyncs everything written so far.
func (p *Partition) Flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	return p.flushLocked()
}

func (p *Partition) flushLocked() error {
	return p.syncActiveLocked((*segment.Segment).Sync)
}

// flushLogLocked is flushLocked for log.flush.interval.messages: it
// fsyncs the active segment's log but not its indexes (two more fsyncs
// per batch, under the partition lock). The recovery point still moves
// to the log end, which is what makes this safe: at open the active
// segment is scanned and every batch CRC-checked from the last index
// entry below the recovery point that names a batch boundary, and the
// entries after it are re-derived from the log, so an index page that did
// not reach the disk only makes that scan start earlier. Index pages reach
// the disk by the kernel's writeback of the mapping, and are synced at
// roll (Seal), at close, by Flush, and after every truncation (which is
// what keeps stale entries off the disk: see Segment.SyncLog).
func (p *Partition) flushLogLocked() error {
	return p.syncActiveLocked((*segment.Segment).SyncLog)
}

// syncActiveLocked runs sync on the active segment if anything is
// unflushed and moves the recovery point to the log end. A failed sync
// sticks (p.werr): the file's contents are unknown until reopened.
func (p *Partition) syncActiveLocked(sync func(*segment.Segment) error) error {
	if p.werr != nil {
		return fmt.Errorf("%w: %v", ErrStorage, p.werr)
	}
	if p.firstUnflushed.IsZero() {
		return nil
	}
	if err := sync(p.segs[len(p.segs)-1]); err != nil {
		p.werr = err
		p.logger.Error("fsync failed; partition refuses writes until reopened", "err", err)
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	p.unflushedMsgs = 0
	p.firstUnflushed = time.Time{}
	p.recoveryPoint = p.leo
	return nil
}

// RecoveryPoint returns the offset below which everything is fsync'd.
func (p *Partition) RecoveryPoint() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.recoveryPoint
}

// maybeFlush flushes when the oldest unflushed write is older than
// flush.ms (called by the manager's flusher).
func (p *Partition) maybeFlush(now time.Time) {
	cfg := p.cfg.Load()
	if cfg.FlushInterval <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.firstUnflushed.IsZero() || now.Sub(p.firstUnflushed) < cfg.FlushInterval {
		return
	}
	if err := p.flushLocked(); err != nil {
		p.logger.Error("scheduled flush failed", "err", err)
	}
}

// Close flushes and closes the partition's files.
func (p *Partition) Close() error { return p.close(true) }

func (p *Partition) close(flush bool) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	var err error
	if flush && p.werr == nil {
		err = p.flushLocked()
	}
	for _, s := range p.segs {
		var e error
		if flush {
			e = s.Close()
		} else {
			e = s.Remove()
		}
		if err == nil && e != nil {
			err = fmt.Errorf("%w: %v", ErrStorage, e)
		}
	}
	p.closed = true
	p.mu.Unlock()
	p.waiters.close()
	return err
}

// LogStartOffset returns the first offset still stored. (Retention and
// DeleteRecords move it forward through AdvanceLogStart.)
func (p *Partition) LogStartOffset() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.logStart
}

// AdvanceLogStart moves the log start offset forward to offset (at most
// the high watermark), as DeleteRecords does, and deletes the segments
// wholly below it. It returns the new log start offset.
func (p *Partition) AdvanceLogStart(offset int64) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, ErrClosed
	}
	if offset > p.hw {
		return p.logStart, fmt.Errorf("%w: log start %d above high watermark %d", ErrOffsetOutOfRange, offset, p.hw)
	}
	if offset <= p.logStart {
		// Nothing moves, but segments wholly below the log start (left
		// by a restart that read it from the checkpoint) still go.
		return p.logStart, p.removeBelowLogStartLocked()
	}
	p.logStart = offset
	// Epochs wholly before the new log start go (as Kafka's
	// truncateFromStart); the one covering it now starts there.
	k := 0
	for k+1 < len(p.epochs) && p.epochs[k+1].start <= offset {
		k++
	}
	if k > 0 || (len(p.epochs) > 0 && p.epochs[0].start < offset) {
		p.epochs = append(p.epochs[:0], p.epochs[k:]...)
		p.epochs[0].start = max(p.epochs[0].start, offset)
		if err := p.writeEpochsLocked(); err != nil {
			p.logger.Warn("cannot write leader epoch checkpoint", "err", err)
		}
	}
	return p.logStart, p.removeBelowLogStartLocked()
}

// removeBelowLogStartLocked deletes the segments wholly below the log
// start offset (never the active one). Readers holding a reference keep
// reading the removed files until they release them. Caller holds mu.
func (p *Partition) removeBelowLogStartLocked() error {
	removed := false
	p.pruneTxnLocked()
	bound := min(p.logStart, p.removalLimit.Load())
	for len(p.segs) > 1 && p.segs[1].Base() <= bound {
		s := p.segs[0]
		p.segs = p.segs[1:]
		removed = true
		if err := s.Remove(); err != nil {
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
		p.removeTxnIndex(s.Base())
	}
	if removed {
		if err := p.fs.SyncDir(p.dir); err != nil {
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
	}
	return nil
}

// SegmentInfo describes one segment, for retention decisions.
type SegmentInfo struct {
	BaseOffset   int64
	NextOffset   int64
	Size         int64
	MaxTimestamp int64 // -1 when empty
	Active       bool
}

// Segments lists the partition's segments, oldest first.
func (p *Partition) Segments() []SegmentInfo {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]SegmentInfo, 0, len(p.segs))
	for i, s := range p.segs {
		ts, _ := s.MaxTimestamp()
		out = append(out, SegmentInfo{BaseOffset: s.Base(), NextOffset: s.NextOffset(), Size: s.Size(), MaxTimestamp: ts, Active: i == len(p.segs)-1})
	}
	return out
}
