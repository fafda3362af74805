package log

import (
	"bytes"
	"testing"

	"github.com/strata-io/strata/segment"
)

// With log.flush.interval.messages=1 each batch fsyncs only the log
// (flushLogLocked), not the indexes. A crash that loses every index write
// since the last full sync -- including after a truncation and appends of
// differently sized batches at the same offsets -- must still recover
// every acknowledged batch, serve reads at every offset, and take new
// writes at the right offset.
func TestCrashWithUnsyncedIndexesPerBatchFlush(t *testing.T) {
	cfg := Config{FlushIntervalMessages: 1, IndexIntervalBytes: 100, SegmentIndexBytes: 4096}
	for _, tc := range []struct {
		name       string
		checkpoint bool // the recovery point file is written before the crash
		truncateAt int64
	}{{"no-checkpoint", false, -1}, {"checkpoint", true, -1}, {"truncated", true, 40}} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := segment.NewMemFS()
			c := newClock()
			m := testManager(t, fsys, c)
			p, err := m.Open(tp0, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var acked [][]byte // batch by batch, in offset order
			appendN := func(n, valueLen int, commitBelow int64) {
				for i := 0; i < n; i++ {
					b := makeBatch(t, spec{n: 2, valueLen: valueLen + i%5, ts: int64(len(acked))})
					res, err := p.Append(b, 3)
					if err != nil {
						t.Fatal(err)
					}
					p.Commit(min(res.LastOffset+1, commitBelow))
					acked = append(acked, b)
				}
			}
			firstCommit := int64(1 << 62)
			if tc.truncateAt >= 0 {
				firstCommit = tc.truncateAt // the rest is cut below
			}
			appendN(60, 30, firstCommit)
			if tc.truncateAt >= 0 {
				if err := p.TruncateTo(tc.truncateAt); err != nil {
					t.Fatal(err)
				}
				acked = acked[:tc.truncateAt/2]
				appendN(40, 70, 1<<62) // larger batches: old index positions are now mid-batch
			}
			if tc.checkpoint {
				if err := m.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
			m.crash()
			fsys.ResetToSyncedState()

			m = testManager(t, fsys, c)
			defer m.Close()
			p = m.Get(tp0)
			if p == nil {
				t.Fatal("partition lost")
			}
			p.SetConfig(cfg)
			got := readAllCommitted(t, p)
			var want []byte
			for _, b := range acked {
				want = append(want, b...)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("recovered %d bytes, want the %d acknowledged", len(got), len(want))
			}
			// A read at every offset starts at the batch holding it.
			for off := int64(0); off < int64(2*len(acked)); off++ {
				r, err := p.Read(off, 1)
				if err != nil {
					t.Fatalf("read %d: %v", off, err)
				}
				hs := batchesOf(t, r.Records)
				if len(hs) == 0 || hs[0].BaseOffset > off || hs[0].LastOffset() < off {
					t.Fatalf("read %d: got batches %+v", off, hs)
				}
			}
			res, err := p.Append(makeBatch(t, spec{n: 1, valueLen: 5}), 4)
			if err != nil || res.BaseOffset != int64(2*len(acked)) {
				t.Fatalf("append after recovery: %+v %v", res, err)
			}
		})
	}
}

// HoldFlush/ReleaseFlush: with log.flush.interval.messages=1 the appends
// between them are fsync'd once, at ReleaseFlush (group commit) -- not one
// by one -- and a crash after ReleaseFlush keeps every one of them, for
// the leader's Append and a follower's AppendReplica alike.
func TestHoldFlushGroupCommit(t *testing.T) {
	cfg := Config{FlushIntervalMessages: 1}
	for _, replica := range []bool{false, true} {
		fsys := segment.NewMemFS()
		c := newClock()
		m := testManager(t, fsys, c)
		p, err := m.Open(tp0, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		appendOne := func(i int) {
			b := makeBatch(t, spec{n: 2, valueLen: 20 + i, ts: int64(i)})
			if replica {
				segment.SetBaseOffset(b, p.Offsets().LogEnd)
				segment.SetLeaderEpoch(b, 3)
				_, err = p.AppendReplica(b)
			} else {
				_, err = p.Append(b, 3)
			}
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, b...)
		}
		appendOne(0) // not held: fsync'd at once
		if rp := p.RecoveryPoint(); rp != 2 {
			t.Fatalf("replica %v: recovery point %d after an unheld append, want 2", replica, rp)
		}
		p.HoldFlush()
		for i := 1; i <= 3; i++ {
			appendOne(i)
		}
		if rp := p.RecoveryPoint(); rp != 2 {
			t.Fatalf("replica %v: recovery point %d while held, want 2 (no fsync per append)", replica, rp)
		}
		if err := p.ReleaseFlush(); err != nil {
			t.Fatal(err)
		}
		if rp := p.RecoveryPoint(); rp != 8 {
			t.Fatalf("replica %v: recovery point %d after ReleaseFlush, want 8", replica, rp)
		}
		p.Commit(8)
		m.crash()
		fsys.ResetToSyncedState()
		m = testManager(t, fsys, c)
		p = m.Get(tp0)
		if p == nil {
			t.Fatal("partition lost")
		}
		p.SetConfig(cfg)
		p.Commit(8)
		if got := readAllCommitted(t, p); !bytes.Equal(got, want) {
			t.Fatalf("replica %v: recovered %d bytes, want the %d stored before ReleaseFlush", replica, len(got), len(want))
		}
		m.Close()
	}
}
