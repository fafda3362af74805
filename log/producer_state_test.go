package log

import (
	"errors"
	"math"
	"testing"

	"github.com/strata-io/strata/segment"
)

func TestProducerSequences(t *testing.T) {
	c := newClock()
	m := testManager(t, segment.NewMemFS(), c)
	defer m.Close()
	p, _ := m.Open(tp0, Config{})
	app := func(s spec) (AppendResult, error) {
		t.Helper()
		res, err := p.Append(makeBatch(t, s), 1)
		if err == nil {
			p.Commit(res.LastOffset + 1)
		}
		return res, err
	}
	// Unknown producer must start at 0.
	if _, err := app(spec{n: 1, pid: 9, seq: 3}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("unknown producer seq 3: %v", err)
	}
	r0, err := app(spec{n: 2, pid: 9, seq: 0})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := app(spec{n: 3, pid: 9, seq: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Retry of a recent batch: duplicate with the original offsets.
	d, err := app(spec{n: 2, pid: 9, seq: 0})
	if !errors.Is(err, ErrDuplicateSequence) || !d.Duplicate || d.BaseOffset != r0.BaseOffset || d.LastOffset != r0.LastOffset {
		t.Fatalf("dup: %+v %v", d, err)
	}
	d, err = app(spec{n: 3, pid: 9, seq: 2})
	if !errors.Is(err, ErrDuplicateSequence) || d.BaseOffset != r1.BaseOffset {
		t.Fatalf("dup 2: %+v %v", d, err)
	}
	if o := p.Offsets(); o.LogEnd != 5 {
		t.Fatalf("duplicate was written: %+v", o)
	}
	// Gap.
	if _, err := app(spec{n: 1, pid: 9, seq: 6}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	if _, err := app(spec{n: 1, pid: 9, seq: 5}); err != nil {
		t.Fatal(err)
	}
	// New epoch must start at 0; old epoch is fenced.
	if _, err := app(spec{n: 1, pid: 9, epoch: 1, seq: 6}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("new epoch nonzero: %v", err)
	}
	if _, err := app(spec{n: 1, pid: 9, epoch: 1, seq: 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := app(spec{n: 1, pid: 9, epoch: 0, seq: 6}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch: %v", err)
	}
	// Non-idempotent batches skip checks.
	if _, err := app(spec{n: 1}); err != nil {
		t.Fatal(err)
	}
	ps := p.Producers()
	if len(ps) != 1 || ps[0].ProducerID != 9 || ps[0].ProducerEpoch != 1 || ps[0].LastSequence != 0 {
		t.Fatalf("producers %+v", ps)
	}
	// Only the last 5 batches are remembered.
	for i := int32(1); i <= 6; i++ {
		if _, err := app(spec{n: 1, pid: 9, epoch: 1, seq: i}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := app(spec{n: 1, pid: 9, epoch: 1, seq: 1}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("old batch beyond the window: %v", err)
	}
	if _, err := app(spec{n: 1, pid: 9, epoch: 1, seq: 2}); !errors.Is(err, ErrDuplicateSequence) {
		t.Fatalf("5th most recent batch: %v", err)
	}

	// State survives a reopen (rebuilt from the log).
	m.Close()
	m = testManager(t, m.fs, c)
	defer m.Close()
	p = m.Get(tp0)
	if _, err := p.Append(makeBatch(t, spec{n: 1, pid: 9, epoch: 1, seq: 5}), 1); !errors.Is(err, ErrDuplicateSequence) {
		t.Fatalf("dup after reopen: %v", err)
	}
	if _, err := p.Append(makeBatch(t, spec{n: 1, pid: 9, epoch: 1, seq: 7}), 1); err != nil {
		t.Fatalf("next after reopen: %v", err)
	}
}

func TestProducerSequenceWrap(t *testing.T) {
	ps := newProducerState()
	h := segment.Header{ProducerID: 1, ProducerEpoch: 0, BaseSequence: math.MaxInt32 - 1, LastOffsetDelta: 1, BaseOffset: 0}
	ps.m[1] = &producerEntry{epoch: 0, txnFirst: -1, batches: []batchMeta{{firstSeq: math.MaxInt32 - 3, lastSeq: math.MaxInt32 - 2}}}
	txn := ps.begin()
	if _, err := txn.check(&h, notMarker); err != nil {
		t.Fatal(err)
	}
	txn.record(&h, notMarker)
	txn.commit()
	if got := ps.m[1].batches[1].lastSeq; got != math.MaxInt32 {
		t.Fatalf("last seq %d", got)
	}
	next := segment.Header{ProducerID: 1, BaseSequence: 0, LastOffsetDelta: 0}
	if _, err := ps.begin().check(&next, notMarker); err != nil {
		t.Fatalf("wrap to 0: %v", err)
	}
	// A batch crossing MaxInt32 wraps its last sequence.
	cross := segment.Header{ProducerID: 2, BaseSequence: math.MaxInt32, LastOffsetDelta: 2}
	if cross.LastSequence() != 1 {
		t.Fatalf("crossing last seq %d", cross.LastSequence())
	}
}

func TestProducerStateAfterTruncate(t *testing.T) {
	c := newClock()
	m := testManager(t, segment.NewMemFS(), c)
	defer m.Close()
	p, _ := m.Open(tp0, Config{SegmentBytes: 1024})
	var last AppendResult
	for i := int32(0); i < 20; i++ {
		res, err := p.Append(makeBatch(t, spec{n: 1, valueLen: 100, pid: 4, seq: i}), 1)
		if err != nil {
			t.Fatal(err)
		}
		if i == 9 {
			p.Commit(res.LastOffset + 1)
			last = res
		}
	}
	if len(p.Segments()) < 3 {
		t.Fatalf("want several segments, got %d", len(p.Segments()))
	}
	if err := p.TruncateTo(last.LastOffset + 1); err != nil {
		t.Fatal(err)
	}
	if o := p.Offsets(); o.LogEnd != 10 || o.HighWatermark != 10 {
		t.Fatalf("offsets %+v", o)
	}
	// Sequence 10 is next again; 9 is a duplicate.
	if _, err := p.Append(makeBatch(t, spec{n: 1, pid: 4, seq: 9}), 1); !errors.Is(err, ErrDuplicateSequence) {
		t.Fatalf("dup after truncate: %v", err)
	}
	if _, err := p.Append(makeBatch(t, spec{n: 1, pid: 4, seq: 10}), 1); err != nil {
		t.Fatal(err)
	}
	// Truncate inside the active segment only.
	res, _ := p.Append(makeBatch(t, spec{n: 1, pid: 4, seq: 11}), 1)
	if err := p.TruncateTo(res.BaseOffset); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(makeBatch(t, spec{n: 1, pid: 4, seq: 11}), 1); err != nil {
		t.Fatalf("after active truncate: %v", err)
	}
	if err := p.TruncateTo(5); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("truncate below hw: %v", err)
	}
}
