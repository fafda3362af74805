package retention

import (
	"errors"
	"fmt"
	"math"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

// ActionCompact asks the cleaner to compact the partition's sealed
// segments below Offset (the first uncleanable offset).
const ActionCompact ActionKind = 100

// PlanCompact decides whether a cleanup.policy=compact partition is
// compacted now, as Kafka's LogCleanerManager chooses logs. Pure: it sees
// the segments (oldest first, the last active), the offsets, the cleanup
// config, the cleaner's first dirty offset for the partition (everything
// below it was compacted before; 0 when unknown) and the time (Unix ms).
//
//   - The cleanable range ends at the first uncleanable offset: the base of
//     the active segment, of the first segment not wholly committed, or of
//     the first segment holding a record newer than min.compaction.lag.ms.
//   - Dirty bytes are the segments from firstDirty to that end; clean bytes
//     those before. The partition is compacted when dirty / (clean + dirty)
//     >= min.cleanable.dirty.ratio, or when max.compaction.lag.ms is set and
//     the first dirty segment's newest record is older than it (Kafka
//     looks at the earliest dirty record; the newest one of the first
//     dirty segment is a bound that errs on the late side).
func PlanCompact(segs []log.SegmentInfo, offs log.Offsets, cfg log.CleanupConfig, firstDirty, nowMs int64) []Action {
	if !cfg.Compact || len(segs) < 2 {
		return nil
	}
	end := segs[len(segs)-1].BaseOffset // the active segment is never cleaned
	why := ""
	for _, s := range segs[:len(segs)-1] {
		if s.NextOffset > offs.HighWatermark {
			end, why = s.BaseOffset, fmt.Sprintf(" (segment %d not wholly committed)", s.BaseOffset)
			break
		}
		// Nothing at or above the last stable offset is cleaned: an
		// open transaction's records are not decided yet (Kafka's
		// firstUncleanableOffset).
		if s.NextOffset > offs.LastStable {
			end, why = s.BaseOffset, fmt.Sprintf(" (segment %d holds an open transaction)", s.BaseOffset)
			break
		}
		if cfg.MinCompactionLagMs > 0 && s.MaxTimestamp > nowMs-cfg.MinCompactionLagMs {
			end, why = s.BaseOffset, fmt.Sprintf(" (segment %d newer than min.compaction.lag.ms=%d)", s.BaseOffset, cfg.MinCompactionLagMs)
			break
		}
	}
	firstDirty = max(firstDirty, segs[0].BaseOffset)
	var clean, dirty int64
	var firstDirtySeg *log.SegmentInfo
	for i := range segs {
		s := &segs[i]
		if s.BaseOffset >= end {
			break
		}
		if s.BaseOffset < firstDirty {
			clean += s.Size
			continue
		}
		if firstDirtySeg == nil {
			firstDirtySeg = s
		}
		dirty += s.Size
	}
	if dirty == 0 {
		return nil
	}
	ratio := float64(dirty) / float64(clean+dirty)
	var reason string
	switch {
	case ratio >= cfg.MinCleanableDirtyRatio:
		reason = fmt.Sprintf("dirty ratio %.2f >= min.cleanable.dirty.ratio %g (%d dirty of %d bytes)", ratio, cfg.MinCleanableDirtyRatio, dirty, clean+dirty)
	case cfg.MaxCompactionLagMs > 0 && firstDirtySeg.MaxTimestamp >= 0 && nowMs-firstDirtySeg.MaxTimestamp > cfg.MaxCompactionLagMs:
		reason = fmt.Sprintf("segment %d dirty for more than max.compaction.lag.ms=%d (dirty ratio %.2f)", firstDirtySeg.BaseOffset, cfg.MaxCompactionLagMs, ratio)
	default:
		return nil
	}
	return []Action{{Kind: ActionCompact, Offset: end, Reasons: []string{reason + fmt.Sprintf("; clean up to %d%s", end, why)}}}
}

// Bounds of one compaction pass.
const (
	// maxMapKeys bounds the cleaner's offset map (Kafka bounds it by
	// log.cleaner.dedupe.buffer.size): ~40 bytes a key.
	maxMapKeys = 1 << 21
	// readChunk is how much one Read of the log asks for.
	readChunk = 1 << 20
	// maxBatchesPerPass bounds the batches one compaction pass reads.
	maxBatchesPerPass = 1 << 24
)

// errMapFull stops building the offset map at a segment boundary.
var errMapFull = errors.New("retention: offset map full")

// forEachBatch reads the committed batches of p from offset from until
// end (exclusive), calling fn with each whole batch (its own copy).
func forEachBatch(p *log.Partition, from, end int64, fn func(b []byte, h segment.Header) error) error {
	next := from
	for n := 0; next < end; {
		res, err := p.Read(next, readChunk)
		if err != nil {
			return err
		}
		if len(res.Records) == 0 {
			return nil
		}
		b := res.Records
		for len(b) > 0 {
			h, err := segment.ParseHeader(b)
			if err != nil || h.Size() > int64(len(b)) {
				return fmt.Errorf("%w: %v", ErrCorruptBatch, err)
			}
			if h.BaseOffset >= end {
				return nil
			}
			if n++; n > maxBatchesPerPass {
				return fmt.Errorf("retention: more than %d batches in one pass", maxBatchesPerPass)
			}
			if h.LastOffset() >= next {
				if err := fn(b[:h.Size()], h); err != nil {
					return err
				}
			}
			next = max(next, h.LastOffset()+1)
			b = b[h.Size():]
		}
	}
	return nil
}

// compactStats says what one compaction did.
type compactStats struct {
	end                 int64 // first dirty offset after it
	bytesIn, bytesOut   int64
	recordsIn, recsKept int64
	segments            int
}

// compact cleans the partition's segments below end, using an offset map
// of the dirty part [firstDirty, end): a keyed record survives when it is
// the latest of its key (no later record of the key in the map), a
// tombstone additionally only while it is younger than
// delete.retention.ms. Keyless records are kept. Records of aborted
// transactions are dropped and never count as a key's latest record (a
// later aborted write must not erase a committed one). A transaction
// marker (a control batch) is kept while any record of its transaction
// is, and then for delete.retention.ms after it was written, as Kafka's
// cleaner does; after that it goes, so the markers of a transactional
// writer do not pile up in a compacted topic.
// Runs of segments up to segment.bytes are rewritten into one cleaned
// segment each and swapped in atomically (log.SwapCleaned).
func compact(p *log.Partition, firstDirty, end, nowMs int64) (compactStats, error) {
	st := compactStats{end: end}
	segs := p.Segments()
	offs := p.Offsets()
	cfg := p.Config()
	// The offset map, segment by segment, stopping at a segment boundary
	// when full (the range then ends there).
	latest := map[keyHash]int64{}
	abortedTxns := map[int64][]log.AbortedTxn{}
	for _, a := range p.AbortedTransactions(offs.LogStart, end) {
		abortedTxns[a.ProducerID] = append(abortedTxns[a.ProducerID], a)
	}
	aborted := func(h *segment.Header) bool {
		if !h.IsTransactional() {
			return false
		}
		for _, a := range abortedTxns[h.ProducerID] {
			if a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
				return true
			}
		}
		return false
	}
	for _, s := range segs {
		if s.BaseOffset >= end {
			break
		}
		if s.NextOffset <= firstDirty {
			continue
		}
		if len(latest) >= maxMapKeys && s.BaseOffset > firstDirty {
			st.end, end = s.BaseOffset, s.BaseOffset
			break
		}
		from := max(s.BaseOffset, offs.LogStart, firstDirty)
		err := forEachBatch(p, from, s.NextOffset, func(b []byte, h segment.Header) error {
			if h.IsControl() || aborted(&h) {
				return nil
			}
			_, recs, err := segment.OpenBatch(b)
			if err != nil {
				return err
			}
			for _, r := range recs {
				if r.Key != nil {
					latest[hashKey(r.Key)] = h.BaseOffset + int64(r.OffsetDelta)
				}
			}
			return nil
		})
		if err != nil {
			return st, err
		}
	}
	// Group the sealed segments below end into runs of at most
	// segment.bytes (by their size before cleaning, as Kafka groups).
	type run struct{ first, end, size int64 }
	var runs []run
	for i, s := range segs {
		if s.BaseOffset >= end || s.Active {
			break
		}
		next := segs[i+1].BaseOffset
		if n := len(runs); n > 0 && runs[n-1].size+s.Size <= cfg.SegmentBytes && next-runs[n-1].first < math.MaxUint32 {
			runs[n-1].end, runs[n-1].size = next, runs[n-1].size+s.Size
			continue
		}
		runs = append(runs, run{first: s.BaseOffset, end: next, size: s.Size})
	}
	// txnData: producers with a transactional record kept since their last
	// marker (in offset order across the runs), whose next marker stays.
	txnData := map[int64]bool{}
	for _, r := range runs {
		cl, err := p.NewCleaned(r.first, r.end)
		if err != nil {
			return st, err
		}
		err = forEachBatch(p, max(r.first, offs.LogStart), r.end, func(b []byte, h segment.Header) error {
			st.bytesIn += int64(len(b))
			if h.IsControl() {
				if !txnData[h.ProducerID] && nowMs-h.MaxTimestamp > cfg.Cleanup.DeleteRetentionMs {
					return nil // its transaction's records are gone, and it is old
				}
				delete(txnData, h.ProducerID)
				st.bytesOut += int64(len(b))
				return cl.Append(b)
			}
			if aborted(&h) {
				return nil
			}
			_, recs, err := segment.OpenBatch(b)
			if err != nil {
				return err
			}
			st.recordsIn += int64(len(recs))
			kept := recs[:0:0]
			for _, rec := range recs {
				off := h.BaseOffset + int64(rec.OffsetDelta)
				if rec.Key != nil {
					if l, ok := latest[hashKey(rec.Key)]; ok && l > off {
						continue // a later record of the key exists
					}
					if rec.Tombstone && nowMs-(h.BaseTimestamp+rec.TimestampDelta) > cfg.Cleanup.DeleteRetentionMs {
						continue // the tombstone has done its job
					}
				}
				kept = append(kept, rec)
			}
			st.recsKept += int64(len(kept))
			if len(kept) > 0 && h.IsTransactional() {
				txnData[h.ProducerID] = true
			}
			switch {
			case len(kept) == 0:
				return nil
			case len(kept) == len(recs):
				st.bytesOut += int64(len(b))
				return cl.Append(b)
			}
			nb, err := rebuildBatch(h, kept)
			if err != nil {
				return err
			}
			st.bytesOut += int64(len(nb))
			return cl.Append(nb)
		})
		if err != nil {
			cl.Abort()
			return st, err
		}
		if err := p.SwapCleaned(cl); err != nil {
			return st, err
		}
		st.segments++
	}
	return st, nil
}
