package log

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/strata-io/strata/segment"
)

var tp0 = TopicPartition{"orders", 0}

func TestAppendCommitRead(t *testing.T) {
	c := newClock()
	m := testManager(t, segment.NewMemFS(), c)
	defer m.Close()
	p, err := m.Open(tp0, Config{SegmentBytes: 4096, IndexIntervalBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for i := 0; i < 100; i++ {
		b := makeBatch(t, spec{n: 3, valueLen: 20, ts: 1000 + int64(i)*10})
		res, err := p.Append(b, 7)
		if err != nil {
			t.Fatal(err)
		}
		if res.BaseOffset != int64(i*3) || res.LastOffset != int64(i*3+2) {
			t.Fatalf("append %d: %+v", i, res)
		}
		want = append(want, b)
		if o := p.Offsets(); o.HighWatermark != int64(i*3) || o.LogEnd != int64(i*3+3) {
			t.Fatalf("offsets %+v", o)
		}
		r, err := p.Read(int64(i*3), 1<<20)
		if err != nil || len(r.Records) != 0 {
			t.Fatalf("read above hw: %d bytes, %v", len(r.Records), err)
		}
		p.Commit(res.LastOffset + 1)
	}
	if len(p.Segments()) < 3 {
		t.Fatalf("expected rolls, got %d segments", len(p.Segments()))
	}
	// Read everything back in order, byte-identical.
	var got []byte
	for off := int64(0); off < 300; {
		r, err := p.Read(off, 500)
		if err != nil {
			t.Fatal(err)
		}
		hs := batchesOf(t, r.Records)
		if len(hs) == 0 {
			t.Fatalf("empty read at %d", off)
		}
		if hs[0].BaseOffset > off || hs[0].LastOffset() < off || hs[0].LeaderEpoch != 7 {
			t.Fatalf("read at %d got %+v", off, hs[0])
		}
		got = append(got, r.Records...)
		off = hs[len(hs)-1].LastOffset() + 1
	}
	if !bytes.Equal(got, bytes.Join(want, nil)) {
		t.Fatal("read back differs")
	}
	// Mid-batch read returns the containing batch.
	r, _ := p.Read(4, 1)
	if hs := batchesOf(t, r.Records); len(hs) != 1 || hs[0].BaseOffset != 3 {
		t.Fatalf("mid-batch read: %+v", hs)
	}
	if _, err := p.Read(301, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past leo: %v", err)
	}
	p.Append(makeBatch(t, spec{n: 2, ts: 1}), 7)
	if r, err := p.Read(301, 100); err != nil || len(r.Records) != 0 {
		t.Fatalf("read between hw and leo: %d bytes, %v", len(r.Records), err)
	}
	if off, ts, ok := p.OffsetForTimestamp(1500); !ok || off != 150 || ts != 1500 {
		t.Fatalf("offset for ts: %d %d %v", off, ts, ok)
	}
	if off, ts, ok := p.OffsetForTimestamp(1501); !ok || off != 150 || ts != 1502 {
		t.Fatalf("offset for ts mid-batch: %d %d %v", off, ts, ok)
	}
	if _, _, ok := p.OffsetForTimestamp(99999); ok {
		t.Fatal("found a timestamp past the end")
	}
	if ts, off := p.MaxTimestamp(); ts != 1992 || off != 299 {
		t.Fatalf("max ts %d %d", ts, off)
	}
}

func TestWaitWakesOnCommit(t *testing.T) {
	c := newClock()
	m := testManager(t, segment.NewMemFS(), c)
	defer m.Close()
	p, _ := m.Open(tp0, Config{})
	ch := p.Wait(0)
	select {
	case <-ch:
		t.Fatal("woke before commit")
	default:
	}
	res, err := p.Append(makeBatch(t, spec{n: 1, valueLen: 1, ts: 1}), 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Commit(res.LastOffset + 1)
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("not woken")
	}
	ch2 := p.Wait(1)
	m.Delete(tp0)
	select {
	case <-ch2:
	case <-time.After(time.Second):
		t.Fatal("not woken by delete")
	}
}

func TestMultiBatchAppend(t *testing.T) {
	c := newClock()
	m := testManager(t, segment.NewMemFS(), c)
	defer m.Close()
	p, _ := m.Open(tp0, Config{})
	a := makeBatch(t, spec{n: 2, pid: 3, seq: 0, ts: 10})
	b := makeBatch(t, spec{n: 3, pid: 3, seq: 2, ts: 20})
	blob := append(append([]byte(nil), a...), b...)
	res, err := p.Append(blob, 4)
	if err != nil || res.BaseOffset != 0 || res.LastOffset != 4 {
		t.Fatalf("%+v %v", res, err)
	}
	p.Commit(res.LastOffset + 1)
	r, _ := p.Read(0, 1<<20)
	hs := batchesOf(t, r.Records)
	if len(hs) != 2 || hs[1].BaseOffset != 2 || !bytes.Equal(r.Records, blob) {
		t.Fatalf("read back %+v", hs)
	}
	// A gap inside one append rejects all of it.
	c1 := makeBatch(t, spec{n: 1, pid: 3, seq: 5})
	c2 := makeBatch(t, spec{n: 1, pid: 3, seq: 7})
	if _, err := p.Append(append(c1, c2...), 4); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap in one append: %v", err)
	}
	if o := p.Offsets(); o.LogEnd != 5 {
		t.Fatalf("partial append written: %+v", o)
	}
	if _, err := p.Append(makeBatch(t, spec{n: 1, pid: 3, seq: 5}), 4); err != nil {
		t.Fatalf("state changed by the rejected append: %v", err)
	}
}

func TestAdvanceLogStart(t *testing.T) {
	c := newClock()
	m := testManager(t, segment.NewMemFS(), c)
	defer m.Close()
	p, _ := m.Open(tp0, Config{SegmentBytes: 600})
	for i := 0; i < 20; i++ {
		res, _ := p.Append(makeBatch(t, spec{n: 2, valueLen: 50, ts: int64(100 + i)}), 0)
		p.Commit(res.LastOffset + 1)
	}
	segs := p.Segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments", len(segs))
	}
	target := segs[2].BaseOffset + 1
	if _, err := p.AdvanceLogStart(50); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("past hw: %v", err)
	}
	ls, err := p.AdvanceLogStart(target)
	if err != nil || ls != target {
		t.Fatalf("%d %v", ls, err)
	}
	if got := p.Segments(); got[0].BaseOffset != segs[2].BaseOffset {
		t.Fatalf("segments below the log start kept: %+v", got[0])
	}
	if _, err := p.Read(target-1, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
	if r, err := p.Read(target, 100); err != nil || len(r.Records) == 0 {
		t.Fatalf("read at log start: %v", err)
	}
	if off, _, ok := p.OffsetForTimestamp(0); !ok || off != target {
		t.Fatalf("offset for ts 0: %d %v", off, ok)
	}
}

// FuzzAppend feeds arbitrary bytes to Append: never a panic, and whatever
// is accepted reads back whole, valid and byte-identical.
func FuzzAppend(f *testing.F) {
	f.Add(makeBatch(f, spec{n: 2, valueLen: 3, ts: 5}))
	f.Add(makeBatch(f, spec{n: 1, pid: 1, seq: 0, codec: 2}))
	f.Add(append(makeBatch(f, spec{n: 1}), makeBatch(f, spec{n: 3})...))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := newClock()
		m := testManager(t, segment.NewMemFS(), c)
		defer m.Close()
		p, _ := m.Open(tp0, Config{SegmentBytes: 4096, SegmentIndexBytes: 1024})
		in := append([]byte(nil), b...)
		res, err := p.Append(in, 1)
		if err != nil {
			if p.Offsets().LogEnd != 0 {
				t.Fatal("rejected append wrote something")
			}
			return
		}
		p.Commit(res.LastOffset + 1)
		var got []byte
		for off := int64(0); off <= res.LastOffset; {
			r, err := p.Read(off, 1<<20)
			if err != nil || len(r.Records) == 0 {
				t.Fatalf("read %d: %v", off, err)
			}
			hs := batchesOf(t, r.Records)
			got = append(got, r.Records...)
			off = hs[len(hs)-1].LastOffset() + 1
		}
		if !bytes.Equal(got, in) {
			t.Fatal("read back differs from what was appended")
		}
	})
}
