package replication

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/internal/procs"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication/raftstore"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/sharepart"
)

// A partition group's raft.LogStore over the partition's own segments
// (doc.go, "Raft design": write each byte once). Entries after the anchor
// (the newest snapshot, or the log end when the group was created) are,
// in index order, either one record batch in the segments (a command) or
// one entry of the side log (raft's own entries, and commands the leader
// refused). The index -> offset map is derived, not stored: at open, the
// side log names its indexes and every other index is the next batch.

const (
	// extUnstamped marks a command entry whose data is a batch as a
	// producer sent it: only the leader's own StoreLogs sees it (GetLog
	// never returns it); StoreLogs appends it with log.Partition.Append,
	// which checks sequences, assigns the offset and stamps the term.
	extUnstamped = 1
	// extSide marks a command entry kept in the side log: a batch the
	// leader's Append refused (its data is a partitionRefusal).
	extSide = 2
	// extDeleteRecords marks a DeleteRecords entry (side log): its data is
	// the new log start offset (8 bytes, big endian), which every replica's
	// FSM applies (DeleteRecords moves the log start on every replica).
	extDeleteRecords = 3
	// extShareState marks a share-state entry (side log): its data is the
	// leader epoch the leader computed it at (4 bytes, big endian; -1: not
	// fenced) then a sharepart delta, which every replica's FSM applies to
	// the partition's share registry (partition_share_state.go).
	extShareState = 4

	sideLogName = "raft-side.log"
	// maxPartitionEntries bounds the index map (raft compacts it long
	// before: partition groups snapshot every few thousand entries).
	maxPartitionEntries = 1 << 20
)

var errPartitionStore = errors.New("replication: partition raft store")

// isSideExt reports whether a command entry with extension ext is kept in
// the side log (no batch: no offsets of its own).
func isSideExt(ext byte) bool {
	return ext == extSide || ext == extDeleteRecords || ext == extShareState
}

// entryLoc is where one raft entry lives.
type entryLoc struct {
	term   uint64
	offset int64 // base offset of the batch; for a side entry the log end at its place
	last   int64 // last offset of the batch; -1 for a side entry
	// appendTime is the leader's LogAppendTime for its own batch (-1
	// otherwise), for the producer's answer.
	appendTime int64
}

// partitionRefusal is the side-log data of a batch the leader refused.
// Field names are on disk and on the wire.
type partitionRefusal struct {
	Code string `json:"code"`
	Msg  string `json:"msg"`
	Base int64  `json:"base"` // a duplicate's original offsets
	Last int64  `json:"last"`
	// Record is 1 + the index of the record the batch was refused for
	// (log.RecordError), 0 when no one record is named (Produce v8+
	// reports it in RecordErrors).
	Record int32 `json:"record,omitempty"`
}

// refusalCodes maps the log's refusals to stable names.
var refusalCodes = []struct {
	code string
	err  error
}{
	{"duplicate", log.ErrDuplicateSequence},
	{"out_of_order", log.ErrOutOfOrderSequence},
	{"producer_epoch", log.ErrInvalidProducerEpoch},
	{"unknown_producer", log.ErrUnknownProducerID},
	{"coordinator_fenced", log.ErrTransactionCoordinatorFenced},
	{"too_large", log.ErrBatchTooLarge},
	{"timestamp", log.ErrInvalidTimestamp},
	{"invalid_record", log.ErrInvalidRecord},
	{"magic", log.ErrUnsupportedMagic},
	{"corrupt", log.ErrCorruptBatch},
}

func refusalOf(err error, res log.AppendResult) (partitionRefusal, bool) {
	for _, rc := range refusalCodes {
		if errors.Is(err, rc.err) {
			r := partitionRefusal{Code: rc.code, Msg: err.Error(), Base: res.BaseOffset, Last: res.LastOffset}
			var re *log.RecordError
			if errors.As(err, &re) && re.Index >= 0 {
				r.Record = re.Index + 1
			}
			return r, true
		}
	}
	return partitionRefusal{}, false
}

func (r partitionRefusal) error() error {
	for _, rc := range refusalCodes {
		if rc.code == r.Code {
			err := fmt.Errorf("%w (%s)", rc.err, r.Msg)
			if r.Record > 0 {
				return &log.RecordError{Index: r.Record - 1, Err: err}
			}
			return err
		}
	}
	return fmt.Errorf("%w: refused: %s", errPartitionStore, r.Msg)
}

// partitionStore is the raft.LogStore of one partition group. Safe for
// concurrent use (raft reads from its replication goroutines).
type partitionStore struct {
	p    *log.Partition
	side *raftstore.LogFile
	// single: the group has one voter. Its log is read back only to apply
	// committed entries (never to send), so the index map may be rebuilt
	// over segments that retention or compaction changed (doc.go), and an
	// entry whose batch has gone is returned without data.
	single bool
	logger *slog.Logger

	// applied is the last index the FSM applied (GetLog).
	applied atomic.Uint64

	mu         sync.RWMutex
	base       uint64     // protected by mu; the anchor's index
	baseOffset int64      // protected by mu; the log offset at the anchor
	locs       []entryLoc // protected by mu; locs[i] is index base+1+i

	// memo keeps the batches raft is about to read back for followers
	// (partition_memo.go).
	memo batchMemo

	// The side log is written without fsync (syncSideLocked): sideCount
	// entries stored since its last fsync, the first at sideSince.
	// Protected by mu.
	sideCount int64
	sideSince time.Time
}

var _ raft.LogStore = (*partitionStore)(nil)

// openPartitionStore rebuilds the index map from the anchor (index,
// offset) by walking the side log and the batches after offset.
func openPartitionStore(fsys segment.FS, dir string, p *log.Partition, anchor uint64, anchorOffset int64, logger *slog.Logger) (*partitionStore, error) {
	return openPartitionStoreOpts(fsys, dir, p, anchor, anchorOffset, false, logger)
}

// openPartitionStoreOpts is openPartitionStore for a group of one voter
// when single is set.
func openPartitionStoreOpts(fsys segment.FS, dir string, p *log.Partition, anchor uint64, anchorOffset int64, single bool, logger *slog.Logger) (*partitionStore, error) {
	side, err := raftstore.OpenLogFileNamed(fsys, dir, sideLogName, true, logger)
	if err != nil {
		return nil, err
	}
	s := &partitionStore{p: p, side: side, base: anchor, baseOffset: anchorOffset, single: single, logger: logger}
	s.applied.Store(anchor)
	// The batches after the anchor, read from the headers as stored (the
	// removal limit keeps them in place even below the log start).
	type batchRef struct {
		base, last int64
		epoch      int32
	}
	var batches []batchRef
	err = p.ScanHeadersFrom(anchorOffset, func(h *segment.Header) bool {
		if h.LastOffset() < anchorOffset {
			return true
		}
		batches = append(batches, batchRef{base: h.BaseOffset, last: h.LastOffset(), epoch: h.LeaderEpoch})
		return len(batches) < maxPartitionEntries
	})
	if err != nil {
		side.Close()
		return nil, fmt.Errorf("%w: scan from %d: %w", errPartitionStore, anchorOffset, err)
	}
	if !single && len(batches) > 0 && batches[0].base != anchorOffset {
		side.Close()
		return nil, fmt.Errorf("%w: the first batch after the snapshot at offset %d is at %d: the segments changed under the raft log", errPartitionStore, anchorOffset, batches[0].base)
	}
	cursor := anchorOffset
	sideEntries := side.EntriesFrom(anchor + 1)
	for idx := anchor + 1; len(s.locs) < maxPartitionEntries; idx++ {
		if len(sideEntries) > 0 && sideEntries[0].Index == idx {
			s.locs = append(s.locs, entryLoc{term: sideEntries[0].Term, offset: cursor, last: -1, appendTime: -1})
			sideEntries = sideEntries[1:]
			continue
		}
		if len(batches) == 0 {
			break
		}
		bt := batches[0]
		batches = batches[1:]
		if !single && bt.base != cursor {
			side.Close()
			return nil, fmt.Errorf("%w: index %d: batch at %d where %d was expected: the segments changed under the raft log", errPartitionStore, idx, bt.base, cursor)
		}
		s.locs = append(s.locs, entryLoc{term: uint64(bt.epoch), offset: bt.base, last: bt.last, appendTime: -1})
		cursor = bt.last + 1
	}
	if len(sideEntries) > 0 {
		// Side entries past the batches: their commands were lost from an
		// unflushed segment tail in a crash. Raft's log is then shorter;
		// the leader sends the rest again.
		logger.Warn("partition raft side log runs past the segments; cut", "from_index", sideEntries[0].Index)
		if err := side.DeleteRange(sideEntries[0].Index, ^uint64(0)); err != nil {
			side.Close()
			return nil, err
		}
	}
	return s, nil
}

// nextBatchHeader returns the header of the batch holding offset or the
// first one after it (ok false at the log end).
func nextBatchHeader(p *log.Partition, offset int64) (segment.Header, bool, error) {
	if ls := p.LogStartOffset(); offset < ls {
		offset = ls
	}
	rr, err := p.ReadUncommitted(offset, segment.HeaderSize)
	if err != nil {
		return segment.Header{}, false, err
	}
	if len(rr.Records) < segment.HeaderSize {
		return segment.Header{}, false, nil
	}
	h, err := segment.ParseHeader(rr.Records)
	if err != nil {
		return segment.Header{}, false, fmt.Errorf("%w: %v", log.ErrCorruptBatch, err)
	}
	return h, true, nil
}

func (s *partitionStore) Close() error { return s.side.Close() }

func (s *partitionStore) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.locs) == 0 {
		return 0, nil
	}
	return s.base + 1, nil
}

func (s *partitionStore) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.locs) == 0 {
		// Empty (everything is in the snapshot at base): as raft's own
		// stores, 0; raft takes its last index from the snapshot.
		return 0, nil
	}
	return s.base + uint64(len(s.locs)), nil
}

func (s *partitionStore) loc(index uint64) (entryLoc, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if index <= s.base || index > s.base+uint64(len(s.locs)) {
		return entryLoc{}, false
	}
	return s.locs[index-s.base-1], true
}

func (s *partitionStore) GetLog(index uint64, out *raft.Log) error {
	l, ok := s.loc(index)
	if !ok {
		return raft.ErrLogNotFound
	}
	if l.last < 0 {
		return s.side.GetLog(index, out)
	}
	if b := s.memo.get(index); b != nil {
		*out = raft.Log{Index: index, Term: l.term, Type: raft.LogCommand, Data: b}
		return nil
	}
	b, err := s.p.BatchAt(l.offset)
	if err == nil {
		if h, herr := segment.ParseHeader(b); herr != nil || h.LastOffset() != l.last {
			// Compaction rewrote the batches here: the entry is gone.
			err = fmt.Errorf("%w: batch at %d changed", log.ErrOffsetOutOfRange, l.offset)
		}
	}
	if err != nil && errors.Is(err, log.ErrOffsetOutOfRange) {
		// Removed by retention or compaction since (both act only below
		// the high watermark). Raft reads an entry either to send it to a
		// follower -- then ErrLogNotFound, and raft sends a snapshot
		// instead (it checks for this very value) -- or to apply it after a
		// restart, which needs no data (partitionFSM.Apply): entries not
		// applied yet are returned without it.
		if index <= s.applied.Load() {
			return raft.ErrLogNotFound
		}
		*out = raft.Log{Index: index, Term: l.term, Type: raft.LogCommand}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: index %d: %w", errPartitionStore, index, err)
	}
	if !s.single {
		s.memo.put(index, b) // a fresh read: nobody else holds it
	}
	*out = raft.Log{Index: index, Term: l.term, Type: raft.LogCommand, Data: b}
	return nil
}

// resetTo empties the index map and anchors it at (index, offset): after a
// snapshot install the segments end at offset, which is index.
func (s *partitionStore) resetTo(index uint64, offset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.base, s.baseOffset, s.locs = index, offset, nil
	s.memo.drop(func(uint64) bool { return true })
	s.applied.Store(index)
	if err := s.side.DeleteRange(0, ^uint64(0)); err != nil {
		s.logger.Warn("partition raft side log not cut after a snapshot install", "err", err)
	}
}

func (s *partitionStore) StoreLog(e *raft.Log) error { return s.StoreLogs([]*raft.Log{e}) }

// StoreLogs appends entries in order: batches into the segments (the
// leader's own via Append, followers' as stamped via AppendReplica),
// everything else into the side log.
func (s *partitionStore) StoreLogs(logs []*raft.Log) (err error) {
	procs.Touch() // replicated data: work, not idle heartbeats
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(logs) > 1 {
		// Group commit: with log.flush.interval.messages, one fsync for
		// every batch stored here, before raft counts any of them stored.
		s.p.HoldFlush()
		defer func() {
			if ferr := s.p.ReleaseFlush(); ferr != nil && err == nil {
				err = fmt.Errorf("%w: %w", errPartitionStore, ferr)
			}
		}()
	}
	for _, e := range logs {
		want := s.base + uint64(len(s.locs)) + 1
		if e.Index != want {
			return fmt.Errorf("%w: entry %d stored where %d belongs", errPartitionStore, e.Index, want)
		}
		if len(s.locs) >= maxPartitionEntries {
			return fmt.Errorf("%w: more than %d entries since the last snapshot", errPartitionStore, maxPartitionEntries)
		}
		leo := s.p.Offsets().LogEnd
		if e.Type != raft.LogCommand || (len(e.Extensions) == 1 && isSideExt(e.Extensions[0])) {
			if err := s.storeSideLocked(e, leo); err != nil {
				return err
			}
			continue
		}
		// A batch follows side entries only once they are durable: a
		// crash may lose the segments' unflushed tail, never a side entry
		// before a batch that survives (a hole in raft's log).
		if err := s.syncSideLocked(); err != nil {
			return err
		}
		if len(e.Extensions) == 1 && e.Extensions[0] == extUnstamped {
			res, err := s.appendLeaderLocked(e)
			if err != nil {
				ref, ok := refusalOf(err, res)
				if !ok {
					return err // storage: raft steps down
				}
				data, _ := json.Marshal(ref)
				side := &raft.Log{Index: e.Index, Term: e.Term, Type: raft.LogCommand, Data: data, Extensions: []byte{extSide}}
				if err := s.storeSideLocked(side, leo); err != nil {
					return err
				}
				continue
			}
			s.locs = append(s.locs, entryLoc{term: e.Term, offset: res.BaseOffset, last: res.LastOffset, appendTime: res.LogAppendTime})
			// Append stamped e.Data in place; the producer's buffer is
			// reused once Produce returns, so the memo keeps a copy.
			if !s.single {
				s.memo.put(e.Index, append([]byte(nil), e.Data...))
			}
			continue
		}
		h, err := segment.ParseHeader(e.Data)
		if err != nil || uint64(h.LeaderEpoch) != e.Term {
			return fmt.Errorf("%w: entry %d: batch epoch %d, term %d (%v)", errPartitionStore, e.Index, h.LeaderEpoch, e.Term, err)
		}
		res, err := s.p.AppendReplica(e.Data)
		if err != nil {
			return fmt.Errorf("%w: entry %d: %w", errPartitionStore, e.Index, err)
		}
		// raft reads it back to apply it. e.Data is the follower's own
		// (the transport decodes a frame of one entry without copying
		// it, of several entries into a copy each), read-only from here.
		s.memo.put(e.Index, e.Data)
		s.locs = append(s.locs, entryLoc{term: e.Term, offset: res.BaseOffset, last: res.LastOffset, appendTime: -1})
	}
	return nil
}

// appendLeaderLocked appends a producer's batch (exactly one) stamped
// with the entry's term, the leader epoch.
func (s *partitionStore) appendLeaderLocked(e *raft.Log) (log.AppendResult, error) {
	spans, err := segment.SplitBatches(e.Data, 2)
	if err != nil {
		return log.AppendResult{}, fmt.Errorf("%w: %v", log.ErrCorruptBatch, err)
	}
	if len(spans) != 1 {
		return log.AppendResult{}, fmt.Errorf("%w: one batch per raft entry", log.ErrCorruptBatch)
	}
	if e.Term > 1<<31-1 {
		return log.AppendResult{}, fmt.Errorf("%w: term %d does not fit a leader epoch", errPartitionStore, e.Term)
	}
	return s.p.Append(e.Data, int32(e.Term))
}

func (s *partitionStore) storeSideLocked(e *raft.Log, leo int64) error {
	if err := s.side.StoreLogs([]*raft.Log{e}); err != nil {
		return err
	}
	s.locs = append(s.locs, entryLoc{term: e.Term, offset: leo, last: -1, appendTime: -1})
	if s.sideCount == 0 {
		s.sideSince = time.Now()
	}
	s.sideCount++
	// The partition's flush policy (flush.messages, flush.ms) holds for
	// its side entries as for its batches; by default neither forces an
	// fsync and replication, not fsync, keeps them (as Kafka's share
	// state, written without fsync).
	cfg := s.p.Config()
	if (cfg.FlushIntervalMessages > 0 && s.sideCount >= cfg.FlushIntervalMessages) ||
		(cfg.FlushInterval > 0 && time.Since(s.sideSince) >= cfg.FlushInterval) {
		return s.syncSideLocked()
	}
	return nil
}

// syncSideLocked makes the side entries stored so far durable.
func (s *partitionStore) syncSideLocked() error {
	if s.sideCount == 0 {
		return nil
	}
	if err := s.side.Sync(); err != nil {
		return err
	}
	s.sideCount = 0
	return nil
}

// DeleteRange removes a suffix (raft's conflict rule: the segments are
// truncated) or a prefix (after a snapshot: only the anchor moves;
// retention deletes segments).
func (s *partitionStore) DeleteRange(min, max uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.base + uint64(len(s.locs))
	if min > max || max <= s.base || min > last {
		return nil
	}
	if min <= s.base {
		min = s.base + 1
	}
	if max >= last { // suffix
		i := min - s.base - 1
		if err := s.p.TruncateTo(s.locs[i].offset); err != nil {
			return fmt.Errorf("%w: truncate to %d: %w", errPartitionStore, s.locs[i].offset, err)
		}
		if err := s.side.DeleteRange(min, ^uint64(0)); err != nil {
			return err
		}
		s.locs = s.locs[:i]
		s.memo.drop(func(i uint64) bool { return i >= min })
		return nil
	}
	if min == s.base+1 { // prefix
		n := max - s.base
		l := s.locs[n-1]
		s.baseOffset = l.offset
		if l.last >= 0 {
			s.baseOffset = l.last + 1
		}
		s.base = max
		s.locs = append([]entryLoc(nil), s.locs[n:]...)
		return s.side.DeleteRange(0, max)
	}
	return fmt.Errorf("%w: cannot delete %d..%d from the middle of %d..%d", errPartitionStore, min, max, s.base+1, last)
}

// partitionResult is a partition FSM's answer for one command entry.
type partitionResult struct {
	res log.AppendResult
	err error
}

// partitionFSM is a partition group's raft.FSM: applying a committed
// command entry advances the high watermark past its batch (the bytes are
// already in the segment: no I/O here) and returns its offsets; a refused
// batch returns the refusal.
type partitionFSM struct {
	store *partitionStore
	// share is the partition's share state (partition_share_state.go): changed by
	// extShareState entries, carried by the group's snapshots.
	share *sharepart.Registry
}

var _ raft.FSM = (*partitionFSM)(nil)

func (f *partitionFSM) Apply(l *raft.Log) any {
	loc, ok := f.store.loc(l.Index)
	if !ok {
		return partitionResult{err: fmt.Errorf("%w: applied entry %d is not in the store", errPartitionStore, l.Index)}
	}
	if loc.last < 0 {
		var e raft.Log
		if err := f.store.side.GetLog(l.Index, &e); err != nil {
			return partitionResult{err: err}
		}
		if len(e.Extensions) == 1 && e.Extensions[0] == extDeleteRecords {
			return f.applyDeleteRecords(e.Data)
		}
		if len(e.Extensions) == 1 && e.Extensions[0] == extShareState {
			return f.applyShareState(e.Term, e.Data)
		}
		var ref partitionRefusal
		if err := json.Unmarshal(e.Data, &ref); err != nil {
			return partitionResult{err: fmt.Errorf("%w: refusal %d: %v", errPartitionStore, l.Index, err)}
		}
		r := log.AppendResult{BaseOffset: ref.Base, LastOffset: ref.Last, LogAppendTime: -1}
		if ref.Code == "duplicate" {
			r.Duplicate = true
			return partitionResult{res: r}
		}
		return partitionResult{res: r, err: ref.error()}
	}
	f.store.p.Commit(loc.last + 1)
	f.store.applied.Store(l.Index)
	// Applied: a follower is done with its batch; a leader may still send
	// it to its slower follower or ask for its term (the entry before a
	// send), so it keeps the last two.
	if l.Index > memoKeepApplied {
		f.store.memo.drop(func(i uint64) bool { return i <= l.Index-memoKeepApplied })
	}
	return partitionResult{res: log.AppendResult{BaseOffset: loc.offset, LastOffset: loc.last, LogAppendTime: loc.appendTime, LogStartOffset: f.store.p.LogStartOffset()}}
}

// applyDeleteRecords moves the log start (never past the high watermark:
// a replica behind the leader moves it as far as it has data, and the
// snapshot it may later install carries the leader's).
func (f *partitionFSM) applyDeleteRecords(data []byte) any {
	if len(data) != 8 {
		return partitionResult{err: fmt.Errorf("%w: delete-records entry of %d bytes", errPartitionStore, len(data))}
	}
	off := int64(binary.BigEndian.Uint64(data))
	p := f.store.p
	if hw := p.Offsets().HighWatermark; off > hw {
		off = hw
	}
	start, err := p.AdvanceLogStart(off)
	return partitionResult{res: log.AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1, LogStartOffset: start}, err: err}
}

// Snapshot: "everything up to the applied index is in the segments". The
// snapshot holds the high watermark (the end of applied data) and the
// share registry as of the applied index (raft calls Snapshot between
// two Applies; nil when it is empty: partition_snapshots.go).
func (f *partitionFSM) Snapshot() (raft.FSMSnapshot, error) {
	o := f.store.p.Offsets()
	return partitionSnapshot{kind: snapKindLocal, end: o.HighWatermark, start: o.LogStart, share: f.shareSnapshot()}, nil
}

// Restore is called with this replica's own newest snapshot at start, and
// after an install (partition_snapshots.go has then already written the
// leader's batches): either way the segments cover the position; it
// commits up to it and replaces the share registry with the snapshot's.
func (f *partitionFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	h, err := readSnapPosition(rc)
	if err != nil {
		return err
	}
	if o := f.store.p.Offsets(); h.end > o.LogEnd {
		return fmt.Errorf("%w: snapshot up to offset %d is past the local log end %d", errPartitionStore, h.end, o.LogEnd)
	}
	if f.share != nil {
		if err := f.share.Restore(h.share); err != nil {
			return fmt.Errorf("%w: snapshot share state: %w", errPartitionStore, err)
		}
	}
	f.store.p.Commit(h.end)
	return nil
}

type partitionSnapshot snapPosition

func (s partitionSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(snapPosition(s).encode()); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (partitionSnapshot) Release() {}
