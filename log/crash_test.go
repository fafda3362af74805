package log

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/segment"
)

// readAllCommitted reads the partition from its log start to its high
// watermark.
func readAllCommitted(t *testing.T, p *Partition) []byte {
	t.Helper()
	var out []byte
	o := p.Offsets()
	for off := o.LogStart; off < o.HighWatermark; {
		r, err := p.Read(off, 1<<16)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		hs := batchesOf(t, r.Records)
		if len(hs) == 0 {
			t.Fatalf("empty read at %d below hw %d", off, o.HighWatermark)
		}
		out = append(out, r.Records...)
		off = hs[len(hs)-1].LastOffset() + 1
	}
	return out
}

func TestCrashKeepsSyncedBatches(t *testing.T) {
	for _, segBytes := range []int64{1024, 1 << 20} {
		fsys := segment.NewMemFS()
		c := newClock()
		m := testManager(t, fsys, c)
		p, err := m.Open(tp0, Config{SegmentBytes: segBytes, IndexIntervalBytes: 100, SegmentIndexBytes: 4096})
		if err != nil {
			t.Fatal(err)
		}
		var synced []byte
		var all []byte
		for i := 0; i < 60; i++ {
			b := makeBatch(t, spec{n: 2, valueLen: 30, ts: int64(i)})
			res, err := p.Append(b, 3)
			if err != nil {
				t.Fatal(err)
			}
			p.Commit(res.LastOffset + 1)
			all = append(all, b...)
			if i%7 == 0 {
				if err := p.Flush(); err != nil {
					t.Fatal(err)
				}
				synced = append(synced[:0], all...)
			}
		}
		m.crash()
		fsys.ResetToSyncedState()

		m = testManager(t, fsys, c)
		p = m.Get(tp0)
		if p == nil {
			t.Fatal("partition lost")
		}
		p.SetConfig(Config{SegmentBytes: segBytes, IndexIntervalBytes: 100, SegmentIndexBytes: 4096})
		got := readAllCommitted(t, p)
		// Everything synced survives; whatever else survived (sealed
		// segments) is a byte-identical prefix of what was written.
		if len(got) < len(synced) || !bytes.Equal(got, all[:len(got)]) {
			t.Fatalf("segBytes %d: recovered %d bytes, synced %d, not a prefix", segBytes, len(got), len(synced))
		}
		if segBytes == 1<<20 && len(got) != len(synced) {
			t.Fatalf("one segment: recovered %d bytes, synced %d", len(got), len(synced))
		}
		o := p.Offsets()
		if o.HighWatermark != o.LogEnd {
			t.Fatalf("hw %+v", o)
		}
		// The partition takes new writes at the recovered end.
		res, err := p.Append(makeBatch(t, spec{n: 1, valueLen: 5}), 4)
		if err != nil || res.BaseOffset != o.LogEnd {
			t.Fatalf("append after recovery: %+v %v", res, err)
		}
		m.Close()
	}
}

func TestTornTailTruncated(t *testing.T) {
	fsys := segment.NewMemFS()
	c := newClock()
	m := testManager(t, fsys, c)
	p, _ := m.Open(tp0, Config{})
	var want []byte
	for i := 0; i < 5; i++ {
		b := makeBatch(t, spec{n: 3, valueLen: 50})
		res, _ := p.Append(b, 0)
		p.Commit(res.LastOffset + 1)
		want = append(want, b...)
	}
	p.Flush()
	m.crash()
	// A torn write: half a batch after the last whole one.
	f, err := fsys.Open(filepath.Join("/data", tp0.String(), segment.FileName(0, segment.LogExt)))
	if err != nil {
		t.Fatal(err)
	}
	torn := makeBatch(t, spec{n: 3, valueLen: 50})
	segment.SetBaseOffset(torn, 15)
	f.Append(torn[:len(torn)/2])
	f.Sync()
	fsys.ResetToSyncedState()

	m = testManager(t, fsys, c)
	defer m.Close()
	p = m.Get(tp0)
	if o := p.Offsets(); o.LogEnd != 15 {
		t.Fatalf("offsets %+v", o)
	}
	if got := readAllCommitted(t, p); !bytes.Equal(got, want) {
		t.Fatal("recovered data differs")
	}
	if _, err := p.Append(makeBatch(t, spec{n: 1, valueLen: 1}), 0); err != nil {
		t.Fatal(err)
	}
}

func TestFailedSyncSticks(t *testing.T) {
	fsys := segment.NewMemFS()
	c := newClock()
	m := testManager(t, fsys, c)
	p, _ := m.Open(tp0, Config{})
	res, _ := p.Append(makeBatch(t, spec{n: 1, valueLen: 10}), 0)
	p.Commit(res.LastOffset + 1)
	fsys.FailNext(segment.OpSync)
	if err := p.Flush(); !errors.Is(err, ErrStorage) {
		t.Fatalf("flush: %v", err)
	}
	if _, err := p.Append(makeBatch(t, spec{n: 1, valueLen: 10}), 0); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after failed fsync: %v", err)
	}
	if err := p.Flush(); !errors.Is(err, ErrStorage) {
		t.Fatalf("second flush: %v", err)
	}
	// Reads of committed data still work.
	if r, err := p.Read(0, 100); err != nil || len(r.Records) == 0 {
		t.Fatalf("read: %v", err)
	}
	m.Close()
	m = testManager(t, fsys, c)
	defer m.Close()
	p = m.Get(tp0)
	if _, err := p.Append(makeBatch(t, spec{n: 1, valueLen: 10}), 0); err != nil {
		t.Fatalf("append after reopen: %v", err)
	}
}

func TestFailedWriteSticksAndRecovers(t *testing.T) {
	fsys := segment.NewMemFS()
	c := newClock()
	m := testManager(t, fsys, c)
	p, _ := m.Open(tp0, Config{FlushIntervalMessages: 1})
	res, _ := p.Append(makeBatch(t, spec{n: 2, valueLen: 10}), 0)
	p.Commit(res.LastOffset + 1)
	fsys.FailNext(segment.OpWrite)
	if _, err := p.Append(makeBatch(t, spec{n: 2, valueLen: 10}), 0); !errors.Is(err, ErrStorage) {
		t.Fatalf("append: %v", err)
	}
	if _, err := p.Append(makeBatch(t, spec{n: 2, valueLen: 10}), 0); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after failed write: %v", err)
	}
	if o := p.Offsets(); o.LogEnd != 2 {
		t.Fatalf("offsets moved: %+v", o)
	}
	m.Close()
	m = testManager(t, fsys, c)
	defer m.Close()
	p = m.Get(tp0)
	if o := p.Offsets(); o.LogEnd != 2 {
		t.Fatalf("torn write not truncated: %+v", o)
	}
	res, err := p.Append(makeBatch(t, spec{n: 2, valueLen: 10}), 0)
	if err != nil || res.BaseOffset != 2 {
		t.Fatalf("append after reopen: %+v %v", res, err)
	}
}
