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
