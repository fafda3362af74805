package log

import (
	"fmt"
	"math"
	"sort"

	"github.com/strata-io/strata/segment"
)

// Producer state bounds.
const (
	// producerBatchesKept is how many recent batches per producer are
	// remembered for duplicate detection (Kafka keeps 5, matching
	// max.in.flight.requests.per.connection for idempotence).
	producerBatchesKept = 5
	// maxProducers bounds the producer table; past it the least recently
	// active producer is forgotten (its next batch must restart at
	// sequence 0, as after Kafka's producer.id.expiration.ms).
	maxProducers = 1 << 16
)

// batchMeta is one remembered batch of an idempotent producer.
type batchMeta struct {
	firstSeq, lastSeq int32
	firstOff, lastOff int64
	maxTs             int64
}

// producerEntry is one producer's state. Invariant: batches are in append
// order, at most producerBatchesKept, all of epoch.
type producerEntry struct {
	epoch   int16
	batches []batchMeta
	lastTs  int64
	lastOff int64
	// txnFirst is the first offset of the producer's ongoing transaction
	// in this partition, -1 when none (Kafka's currentTxnFirstOffset).
	// Set by its first transactional data batch, cleared by a marker.
	txnFirst int64
	// coordEpoch is the coordinator epoch of the last marker that ended
	// one of its transactions, -1 before any (Kafka's coordinatorEpoch): a
	// marker from an older coordinator is refused.
	coordEpoch int32
}

func (e *producerEntry) clone() *producerEntry {
	c := *e
	c.batches = append([]batchMeta(nil), e.batches...)
	return &c
}

// producerState is a partition's idempotent-producer table, derived from
// the log (rebuilt by replaying batch headers). Guarded by the partition's
// mutex.
type producerState struct {
	m map[int64]*producerEntry
	// ongoing is producer ID -> first offset of its open transaction:
	// exactly the entries of m with txnFirst >= 0 (kept beside m so the
	// last stable offset needs no scan of every producer).
	ongoing map[int64]int64
}

func newProducerState() *producerState {
	return &producerState{m: map[int64]*producerEntry{}, ongoing: map[int64]int64{}}
}

func (ps *producerState) clone() *producerState {
	c := &producerState{m: make(map[int64]*producerEntry, len(ps.m)), ongoing: make(map[int64]int64, len(ps.ongoing))}
	for id, e := range ps.m {
		c.m[id] = e.clone()
	}
	for id, f := range ps.ongoing {
		c.ongoing[id] = f
	}
	return c
}

// noteOngoing keeps ongoing in step with one entry.
func (ps *producerState) noteOngoing(id int64, e *producerEntry) {
	if e.txnFirst >= 0 {
		ps.ongoing[id] = e.txnFirst
	} else {
		delete(ps.ongoing, id)
	}
}

// firstUnstable is the smallest first offset of an open transaction, or
// -1 when none is open.
func (ps *producerState) firstUnstable() int64 {
	first := int64(-1)
	for _, f := range ps.ongoing {
		if first < 0 || f < first {
			first = f
		}
	}
	return first
}

// producerTxn checks a sequence of batches against the state without
// changing it, collecting the updates to apply once the write succeeded.
type producerTxn struct {
	ps      *producerState
	overlay map[int64]*producerEntry
	// ended are the transactions the batches' markers completed, in
	// order, for the partition to index (aborts) and track until stable.
	ended []txnEnd
}

func (ps *producerState) begin() *producerTxn { return &producerTxn{ps: ps} }

func (t *producerTxn) get(id int64) *producerEntry {
	if e, ok := t.overlay[id]; ok {
		return e
	}
	return t.ps.m[id]
}

// inSequence reports whether next follows last, wrapping at MaxInt32.
func inSequence(last, next int32) bool {
	return next == last+1 || (last == math.MaxInt32 && next == 0)
}

// check validates one batch appended as leader (m: what it says as a
// control batch). A duplicate of a recent batch returns its metadata and
// ErrDuplicateSequence. A marker from a coordinator older than the one
// that wrote the producer's last marker is refused
// (ErrTransactionCoordinatorFenced, as Kafka): a deposed coordinator's
// late retry would otherwise end the producer's next transaction.
func (t *producerTxn) check(h *segment.Header, m marker) (*batchMeta, error) {
	if h.ProducerID >= 0 && m.isEnd() {
		if e := t.get(h.ProducerID); e != nil && m.coordEpoch < e.coordEpoch {
			return nil, fmt.Errorf("%w: producer %d: marker of coordinator epoch %d, the last was %d", ErrTransactionCoordinatorFenced, h.ProducerID, m.coordEpoch, e.coordEpoch)
		}
	}
	if h.ProducerID < 0 || h.IsControl() || h.BaseSequence < 0 {
		return nil, nil
	}
	e := t.get(h.ProducerID)
	if e == nil {
		if h.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: producer %d unknown, sequence %d", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence)
		}
		return nil, nil
	}
	last := h.LastSequence()
	if h.ProducerEpoch == e.epoch {
		for i := range e.batches {
			b := &e.batches[i]
			if b.firstSeq == h.BaseSequence && b.lastSeq == last {
				d := *b
				return &d, fmt.Errorf("%w: producer %d sequence %d", ErrDuplicateSequence, h.ProducerID, h.BaseSequence)
			}
		}
	}
	switch {
	case h.ProducerEpoch < e.epoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d < %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	case h.ProducerEpoch > e.epoch:
		if h.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
	default:
		lastSeq := int32(-1)
		if n := len(e.batches); n > 0 {
			lastSeq = e.batches[n-1].lastSeq
		}
		if lastSeq < 0 {
			if h.BaseSequence != 0 {
				return nil, fmt.Errorf("%w: producer %d sequence %d, expected 0", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence)
			}
		} else if !inSequence(lastSeq, h.BaseSequence) {
			return nil, fmt.Errorf("%w: producer %d sequence %d after %d", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, lastSeq)
		}
	}
	return nil, nil
}

// record notes an appended batch (with its assigned offsets) in the
// transaction's overlay. m is what it says as a control batch (notMarker
// for data or an unknown control).
func (t *producerTxn) record(h *segment.Header, m marker) {
	if h.ProducerID < 0 {
		return
	}
	if t.overlay == nil {
		t.overlay = map[int64]*producerEntry{}
	}
	e := t.get(h.ProducerID)
	if e == nil {
		e = &producerEntry{epoch: h.ProducerEpoch, txnFirst: -1, coordEpoch: -1}
	} else if _, mine := t.overlay[h.ProducerID]; !mine {
		e = e.clone()
	}
	t.overlay[h.ProducerID] = e
	if end, ok := applyBatch(e, h, m); ok {
		t.ended = append(t.ended, end)
	}
}

// txnEnd is a transaction completed by a marker: its producer, its first
// offset in this partition (the marker's own offset when it wrote no data
// here) and the marker's offset.
type txnEnd struct {
	producerID  int64
	first, last int64
	abort       bool
}

// applyBatch updates an entry for a batch, the same way for appends and
// for replay from the log. A marker that ends the producer's transaction
// reports it.
func applyBatch(e *producerEntry, h *segment.Header, m marker) (txnEnd, bool) {
	var end txnEnd
	ended := false
	if h.IsControl() && m.isEnd() && h.ProducerEpoch >= e.epoch {
		first := e.txnFirst
		if first < 0 {
			first = h.BaseOffset
		}
		end, ended = txnEnd{producerID: h.ProducerID, first: first, last: h.LastOffset(), abort: m.typ == controlAbort}, true
		e.txnFirst = -1
		e.coordEpoch = max(e.coordEpoch, m.coordEpoch)
	} else if !h.IsControl() && h.IsTransactional() && e.txnFirst < 0 {
		e.txnFirst = h.BaseOffset
	}
	if h.ProducerEpoch != e.epoch {
		if h.ProducerEpoch < e.epoch && h.IsControl() {
			return end, ended
		}
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
	}
	e.lastTs = h.MaxTimestamp
	e.lastOff = h.LastOffset()
	if h.IsControl() || h.BaseSequence < 0 {
		return end, ended
	}
	if len(e.batches) == producerBatchesKept {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerBatchesKept-1]
	}
	e.batches = append(e.batches, batchMeta{
		firstSeq: h.BaseSequence, lastSeq: h.LastSequence(),
		firstOff: h.BaseOffset, lastOff: h.LastOffset(), maxTs: h.MaxTimestamp,
	})
	return end, ended
}

// commit applies the overlay to the state.
func (t *producerTxn) commit() {
	for id, e := range t.overlay {
		t.ps.m[id] = e
		t.ps.noteOngoing(id, e)
	}
	t.ps.evict()
}

// replay applies one batch read back from the log (m as for record),
// reporting the transaction a marker ended.
func (ps *producerState) replay(h *segment.Header, m marker) (txnEnd, bool) {
	if h.ProducerID < 0 {
		return txnEnd{}, false
	}
	e := ps.m[h.ProducerID]
	if e == nil {
		e = &producerEntry{epoch: h.ProducerEpoch, txnFirst: -1, coordEpoch: -1}
		ps.m[h.ProducerID] = e
	}
	end, ok := applyBatch(e, h, m)
	ps.noteOngoing(h.ProducerID, e)
	ps.evict()
	return end, ok
}

// evict enforces maxProducers by forgetting the least recently written
// producers. O(n log n) but only runs when the table overflows.
func (ps *producerState) evict() {
	if len(ps.m) <= maxProducers {
		return
	}
	type idOff struct {
		id  int64
		off int64
	}
	all := make([]idOff, 0, len(ps.m))
	for id, e := range ps.m {
		if e.txnFirst >= 0 {
			continue // an open transaction is never forgotten (Kafka neither)
		}
		all = append(all, idOff{id, e.lastOff})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].off < all[j].off })
	n := len(ps.m) - maxProducers*7/8
	for _, x := range all[:min(n, len(all))] {
		delete(ps.m, x.id)
	}
}

// expire forgets producers whose last write is older than cutoffMs and
// that have no open transaction (producer.id.expiration.ms). Their next
// batch must start again at sequence 0.
func (ps *producerState) expire(cutoffMs int64) int {
	n := 0
	for id, e := range ps.m {
		if e.txnFirst < 0 && e.lastTs < cutoffMs {
			delete(ps.m, id)
			n++
		}
	}
	return n
}

func (ps *producerState) list() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(ps.m))
	for id, e := range ps.m {
		pi := ProducerInfo{ProducerID: id, ProducerEpoch: e.epoch, LastSequence: -1, LastTimestamp: e.lastTs, LastOffset: e.lastOff, TxnStartOffset: e.txnFirst}
		if n := len(e.batches); n > 0 {
			pi.LastSequence = e.batches[n-1].lastSeq
		}
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}
