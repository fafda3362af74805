package log

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/segment"
)

// modelBatch is one batch in the in-memory model of a partition.
type modelBatch struct {
	data       []byte
	base, last int64
	maxTs      int64
	pid        int64 // 0 = not idempotent
	seq        int32
	n          int
}

// model is the tiny reference the randomized workload checks against.
type model struct {
	batches []modelBatch
	hw, leo int64
}

func (m *model) truncate(off int64) {
	n := len(m.batches)
	for n > 0 && m.batches[n-1].last >= off {
		n--
	}
	m.batches = m.batches[:n]
	m.leo = 0
	if n > 0 {
		m.leo = m.batches[n-1].last + 1
	}
}

// lastIdempotent is the producer's last batch still in the log.
func (m *model) lastIdempotent() *modelBatch {
	for i := len(m.batches) - 1; i >= 0; i-- {
		if m.batches[i].pid != 0 {
			return &m.batches[i]
		}
	}
	return nil
}

// nextSeq is the sequence the idempotent producer must send next.
func (m *model) nextSeq() int32 {
	if b := m.lastIdempotent(); b != nil {
		return b.seq + int32(b.n)
	}
	return 0
}

// TestRandomWorkload runs append/commit/truncate/roll/reopen/crash/read
// against a Partition on MemFS and the model, with a fixed seed.
func TestRandomWorkload(t *testing.T) {
	runWorkload(t, testwait.SeedOr(t, 20261130), 3000, Config{SegmentBytes: 2048, IndexIntervalBytes: 128, SegmentIndexBytes: 256})
}

// FuzzWorkload explores other seeds and segment geometries with shorter
// runs of the same workload (go test -fuzz FuzzWorkload ./log/).
func FuzzWorkload(f *testing.F) {
	f.Add(int64(1), uint16(2048), uint8(128))
	f.Add(int64(7), uint16(200), uint8(1))
	f.Fuzz(func(t *testing.T, seed int64, segBytes uint16, interval uint8) {
		runWorkload(t, seed, 300, Config{SegmentBytes: int64(segBytes) + 1, IndexIntervalBytes: int32(interval) + 1, SegmentIndexBytes: 128})
	})
}

// runWorkload drives ops random operations from seed (printed on failure).
func runWorkload(t *testing.T, seed int64, ops int, cfg Config) {
	rng := rand.New(rand.NewSource(seed))
	defer func() {
		if t.Failed() {
			t.Logf("seed %d", seed)
		}
	}()
	fsys := segment.NewMemFS()
	c := newClock()
	mgr := testManager(t, fsys, c)
	defer func() { mgr.Close() }()
	p, err := mgr.Open(tp0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var md model
	var lost, truncs, reads int
	for i := 0; i < ops; i++ {
		switch op := rng.Intn(100); {
		case op < 45: // append, half of them from an idempotent producer
			n := 1 + rng.Intn(5)
			ts := 1000 + int64(rng.Intn(5000))
			sp := spec{n: n, valueLen: rng.Intn(200), ts: ts}
			if rng.Intn(2) == 0 {
				sp.pid, sp.seq = 5, md.nextSeq()
			}
			lastIdem := md.lastIdempotent()
			if sp.pid != 0 && lastIdem != nil && rng.Intn(6) == 0 {
				// Retry the producer's last batch: a duplicate.
				dup := makeBatch(t, spec{n: lastIdem.n, pid: 5, seq: lastIdem.seq, ts: 1})
				res, err := p.Append(dup, int32(i))
				if !errors.Is(err, ErrDuplicateSequence) || res.BaseOffset != lastIdem.base || res.LastOffset != lastIdem.last {
					t.Fatalf("op %d: duplicate: %+v %v, model %d-%d", i, res, err, lastIdem.base, lastIdem.last)
				}
				continue
			}
			if sp.pid != 0 && rng.Intn(8) == 0 {
				bad := makeBatch(t, spec{n: 1, pid: 5, seq: sp.seq + 1 + int32(rng.Intn(3)), ts: 1})
				if _, err := p.Append(bad, int32(i)); !errors.Is(err, ErrOutOfOrderSequence) {
					t.Fatalf("op %d: out of order accepted: %v", i, err)
				}
				continue
			}
			b := makeBatch(t, sp)
			res, err := p.Append(b, int32(i))
			if err != nil {
				t.Fatalf("op %d append: %v", i, err)
			}
			if res.BaseOffset != md.leo {
				t.Fatalf("op %d: base %d, model leo %d", i, res.BaseOffset, md.leo)
			}
			md.batches = append(md.batches, modelBatch{data: append([]byte(nil), b...), base: md.leo, last: res.LastOffset, maxTs: ts + int64(n-1), pid: sp.pid, seq: sp.seq, n: n})
			md.leo = res.LastOffset + 1
		case op < 65: // commit, usually at a batch boundary
			off := md.leo
			if len(md.batches) > 0 && rng.Intn(3) == 0 {
				k := rng.Intn(len(md.batches))
				off = md.batches[k].last + 1
			}
			p.Commit(off)
			if off > md.hw {
				md.hw = off
			}
		case op < 72: // truncate the uncommitted tail
			if md.leo == md.hw {
				continue
			}
			off := md.hw + rng.Int63n(md.leo-md.hw)
			if err := p.TruncateTo(off); err != nil {
				t.Fatalf("op %d truncate %d: %v", i, off, err)
			}
			md.truncate(off)
			truncs++
		case op < 75:
			if err := p.Roll(); err != nil {
				t.Fatal(err)
			}
		case op < 78: // clean reopen
			if err := mgr.Close(); err != nil {
				t.Fatal(err)
			}
			mgr = testManager(t, fsys, c)
			p = mgr.Get(tp0)
			p.SetConfig(cfg)
			md.hw = md.leo // single voter: everything recovered is committed
		case op < 80: // crash, maybe after a flush
			flushed := rng.Intn(2) == 0
			if flushed {
				if err := p.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			mgr.crash()
			fsys.ResetToSyncedState()
			mgr = testManager(t, fsys, c)
			p = mgr.Get(tp0)
			p.SetConfig(cfg)
			o := p.Offsets()
			if flushed && o.LogEnd != md.leo {
				t.Fatalf("op %d: flushed log lost data: leo %d, model %d", i, o.LogEnd, md.leo)
			}
			if o.LogEnd > md.leo {
				t.Fatalf("op %d: recovered past the model: %d > %d", i, o.LogEnd, md.leo)
			}
			if o.LogEnd < md.leo {
				lost++
			}
			md.truncate(o.LogEnd)
			md.hw = md.leo
		default: // read and check
			checkModel(t, i, rng, p, &md)
			reads++
		}
		if o := p.Offsets(); o.HighWatermark != md.hw || o.LogEnd != md.leo || o.LogStart > o.HighWatermark {
			t.Fatalf("op %d: offsets %+v, model hw %d leo %d", i, o, md.hw, md.leo)
		}
	}
	checkModel(t, ops, rng, p, &md)
	t.Logf("seed %d: %d truncations, %d crashes lost data, %d reads, %d segments, offsets %+v", seed, truncs, lost, reads, len(p.Segments()), p.Offsets())
	// A final full scan must equal the model's committed batches.
	var want []byte
	for _, b := range md.batches {
		if b.last < md.hw {
			want = append(want, b.data...)
		}
	}
	if got := readAllCommitted(t, p); !bytes.Equal(got, withEpochs(t, got, want)) {
		t.Fatal("full scan differs from the model")
	}
}

// withEpochs returns want with the leader epochs and base offsets taken
// from got (the stored copy was stamped in place; the model kept the
// stamped bytes already, so this only guards against length mismatch).
func withEpochs(t *testing.T, got, want []byte) []byte {
	if len(got) != len(want) {
		t.Fatalf("scan %d bytes, model %d", len(got), len(want))
	}
	return want
}

func checkModel(t *testing.T, i int, rng *rand.Rand, p *Partition, md *model) {
	t.Helper()
	o := p.Offsets()
	// Max timestamp among committed batches (first batch reaching it).
	wantTs, wantOff := int64(-1), int64(-1)
	for _, b := range md.batches {
		if b.last < md.hw && b.maxTs > wantTs {
			wantTs, wantOff = b.maxTs, b.last
		}
	}
	if ts, off := p.MaxTimestamp(); ts != wantTs || off != wantOff {
		t.Fatalf("op %d: max timestamp %d@%d, model %d@%d", i, ts, off, wantTs, wantOff)
	}
	if md.hw <= o.LogStart {
		return
	}
	// Read at a random committed offset.
	off := o.LogStart + rng.Int63n(md.hw-o.LogStart)
	maxBytes := int32(rng.Intn(3000))
	r, err := p.Read(off, maxBytes)
	if err != nil {
		t.Fatalf("op %d read %d: %v", i, off, err)
	}
	k := 0
	for k < len(md.batches) && md.batches[k].last < off {
		k++
	}
	var want []byte
	for j := k; j < len(md.batches) && md.batches[j].last < md.hw; j++ {
		if j > k && len(want)+len(md.batches[j].data) > int(maxBytes) {
			break
		}
		want = append(want, md.batches[j].data...)
	}
	got := r.Records
	if len(got) == 0 || len(got) > len(want) || !bytes.Equal(got, want[:len(got)]) {
		t.Fatalf("op %d read %d max %d: got %d bytes, model %d (prefix mismatch)", i, off, maxBytes, len(got), len(want))
	}
	// ReadUncommitted at a random offset below the log end.
	if md.leo > o.LogStart {
		off := o.LogStart + rng.Int63n(md.leo-o.LogStart)
		r, err := p.ReadUncommitted(off, maxBytes)
		if err != nil {
			t.Fatalf("op %d read uncommitted %d: %v", i, off, err)
		}
		k := 0
		for k < len(md.batches) && md.batches[k].last < off {
			k++
		}
		var want []byte
		for j := k; j < len(md.batches); j++ {
			if j > k && len(want)+len(md.batches[j].data) > int(maxBytes) {
				break
			}
			want = append(want, md.batches[j].data...)
		}
		if len(r.Records) == 0 || len(r.Records) > len(want) || !bytes.Equal(r.Records, want[:len(r.Records)]) {
			t.Fatalf("op %d read uncommitted %d: got %d bytes, model %d", i, off, len(r.Records), len(want))
		}
	}
	// Offset for a random timestamp.
	ts := 1000 + int64(rng.Intn(5200))
	wOff, found := int64(-1), false
	for _, b := range md.batches {
		if b.last < md.hw && b.maxTs >= ts {
			wOff, found = b.base, true
			break
		}
	}
	gOff, _, gFound := p.OffsetForTimestamp(ts)
	if gFound != found || (found && gOff != max(wOff, o.LogStart)) {
		t.Fatalf("op %d: offset for ts %d = %d,%v; model %d,%v", i, ts, gOff, gFound, wOff, found)
	}
}
