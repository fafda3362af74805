package log

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/strata-io/strata/segment"
)

func TestSnapshotRoundTrip(t *testing.T) {
	ps := newProducerState()
	ps.m[1] = &producerEntry{epoch: 3, lastTs: 9, lastOff: 20, txnFirst: -1, batches: []batchMeta{{1, 2, 10, 11, 5}, {3, 9, 12, 20, 9}}}
	ps.m[-7] = &producerEntry{epoch: 0, lastOff: 4, txnFirst: 7}
	got, err := decodeSnapshot(encodeSnapshot(ps))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.list(), ps.list()) || !reflect.DeepEqual(got.m[1].batches, ps.m[1].batches) {
		t.Fatalf("round trip: %+v", got.list())
	}
	b := encodeSnapshot(ps)
	b[len(b)-1] ^= 1
	if _, err := decodeSnapshot(b); !errors.Is(err, errBadSnapshot) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	ps := newProducerState()
	ps.m[1] = &producerEntry{epoch: 3, txnFirst: -1, batches: []batchMeta{{1, 2, 10, 11, 5}}}
	f.Add(encodeSnapshot(ps))
	f.Fuzz(func(t *testing.T, b []byte) { decodeSnapshot(b) })
}

// TestSnapshotSurvivesDeletedSegments: producer state lives on in the
// snapshot written at roll even after the segments it came from are gone.
func TestSnapshotSurvivesDeletedSegments(t *testing.T) {
	fsys := segment.NewMemFS()
	c := newClock()
	m := testManager(t, fsys, c)
	p, _ := m.Open(tp0, Config{})
	for i := int32(0); i < 3; i++ {
		res, _ := p.Append(makeBatch(t, spec{n: 1, pid: 8, seq: i}), 0)
		p.Commit(res.LastOffset + 1)
	}
	if err := p.Roll(); err != nil {
		t.Fatal(err)
	}
	res, _ := p.Append(makeBatch(t, spec{n: 1}), 0)
	p.Commit(res.LastOffset + 1)
	if _, err := p.AdvanceLogStart(3); err != nil {
		t.Fatal(err)
	}
	if n := len(p.Segments()); n != 1 {
		t.Fatalf("%d segments", n)
	}
	m.Close()
	if _, err := fsys.Stat(filepath.Join("/data", tp0.String(), snapshotName(3))); err != nil {
		t.Fatalf("no snapshot: %v", err)
	}
	m = testManager(t, fsys, c)
	defer m.Close()
	p = m.Get(tp0)
	if o := p.Offsets(); o.LogStart != 3 || o.LogEnd != 4 {
		t.Fatalf("offsets %+v", o)
	}
	if _, err := p.Append(makeBatch(t, spec{n: 1, pid: 8, seq: 2}), 0); !errors.Is(err, ErrDuplicateSequence) {
		t.Fatalf("producer forgotten: %v", err)
	}
	if _, err := p.Append(makeBatch(t, spec{n: 1, pid: 8, seq: 3}), 0); err != nil {
		t.Fatal(err)
	}
}
