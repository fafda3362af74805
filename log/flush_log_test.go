package log

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

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

// With log.flush.interval.messages=1 the fsync of a batch does not hold
// the partition: while it is in progress (here: blocked), the batch before
// it is committed and read, and its offsets are answered; once the fsync
// returns, the append returns and the recovery point covers the batch.
func TestFlushDoesNotBlockReaders(t *testing.T) {
	cfg := Config{FlushIntervalMessages: 1}
	fsys := segment.NewMemFS()
	m := testManager(t, fsys, newClock())
	defer m.Close()
	p, err := m.Open(tp0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := makeBatch(t, spec{n: 2, valueLen: 10})
	if _, err := p.Append(first, 1); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock() // before m.Close, which would wait for the append
	var once sync.Once
	fsys.OnSync(func(name string) {
		if strings.HasSuffix(name, ".log") {
			once.Do(func() { close(entered); <-release })
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := p.Append(makeBatch(t, spec{n: 3, valueLen: 10}), 1)
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the second append never synced")
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		p.Commit(2)
		res, err := p.Read(0, 1<<20)
		if err != nil || !bytes.Equal(res.Records, first) {
			t.Errorf("read during the fsync: %d bytes, %v", len(res.Records), err)
		}
		if off := p.Offsets(); off.HighWatermark != 2 || off.LogEnd != 5 {
			t.Errorf("offsets during the fsync: %+v", off)
		}
	}()
	select {
	case <-readerDone:
	case <-time.After(10 * time.Second):
		t.Fatal("commit and read waited for the fsync")
	}
	if rp := p.RecoveryPoint(); rp != 2 {
		t.Fatalf("recovery point %d while the fsync runs, want 2", rp)
	}
	unblock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if rp := p.RecoveryPoint(); rp != 5 {
		t.Fatalf("recovery point %d after the fsync, want 5", rp)
	}
}
