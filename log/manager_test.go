package log

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/segment"
)

func TestParseDirName(t *testing.T) {
	cases := map[string]TopicPartition{
		"orders-0":              {"orders", 0},
		"my-topic-12":           {"my-topic", 12},
		"__consumer_offsets-49": {"__consumer_offsets", 49},
		"a.b_c-1-2":             {"a.b_c-1", 2},
	}
	for name, want := range cases {
		if got, ok := parseDirName(name); !ok || got != want {
			t.Errorf("%s: %+v %v", name, got, ok)
		}
	}
	for _, bad := range []string{"orders", "orders-", "-1", "orders-x", "orders--", "orders-01", "or/ders-1", "..-1", "orders-99999999999"} {
		if _, ok := parseDirName(bad); ok {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestManagerReopenAndCheckpoints(t *testing.T) {
	fsys := segment.NewMemFS()
	c := newClock()
	m := testManager(t, fsys, c)
	tps := []TopicPartition{{"a-b", 0}, {"a-b", 1}, {"c", 3}}
	for i, tp := range tps {
		p, err := m.Open(tp, Config{})
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j <= i; j++ {
			res, _ := p.Append(makeBatch(t, spec{n: 2, valueLen: 3}), 0)
			p.Commit(res.LastOffset)
		}
	}
	if _, err := m.Open(TopicPartition{"../x", 0}, Config{}); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("bad name: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	ck, err := readCheckpoint(fsys, "/data/"+hwCheckpointFile)
	if err != nil || len(ck) != 3 || ck[TopicPartition{"c", 3}] != 5 {
		t.Fatalf("hw checkpoint %v %v", ck, err)
	}
	// Single voter: hw = leo on reopen.
	m = testManager(t, fsys, c)
	if got := m.Partitions(); len(got) != 3 || got[0] != tps[0] || got[2] != tps[2] {
		t.Fatalf("partitions %v", got)
	}
	if o := m.Get(TopicPartition{"c", 3}).Offsets(); o.HighWatermark != 6 || o.LogEnd != 6 {
		t.Fatalf("offsets %+v", o)
	}
	m.Close()
	// Replicated: the checkpointed hw is used.
	m2, err := OpenManager(ManagerOptions{Dir: "/data", FS: fsys, Now: c.now, UseHighWatermarkCheckpoint: true, DefaultConfig: Config{SegmentIndexBytes: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	if o := m2.Get(TopicPartition{"c", 3}).Offsets(); o.HighWatermark != 6 || o.LogEnd != 6 {
		t.Fatalf("offsets with checkpoint %+v", o)
	}
	p := m2.Get(TopicPartition{"c", 3})
	res, _ := p.Append(makeBatch(t, spec{n: 1, ts: 5}), 0)
	m2.Close()
	m2, _ = OpenManager(ManagerOptions{Dir: "/data", FS: fsys, Now: c.now, UseHighWatermarkCheckpoint: true, DefaultConfig: Config{SegmentIndexBytes: 4096}})
	p = m2.Get(TopicPartition{"c", 3})
	if o := p.Offsets(); o.HighWatermark != 6 || o.LogEnd != 7 {
		t.Fatalf("uncommitted tail after reopen %+v", o)
	}
	if r, _ := p.Read(6, 100); len(r.Records) != 0 {
		t.Fatal("read above checkpointed hw")
	}
	p.Commit(res.LastOffset + 1)
	if r, _ := p.Read(6, 100); len(r.Records) == 0 {
		t.Fatal("committed tail unreadable")
	}
	// A partition missing from the checkpoint (created after the last
	// one was written) starts with nothing committed.
	m2.Close()
	if err := fsys.Remove("/data/" + hwCheckpointFile); err != nil {
		t.Fatal(err)
	}
	m2, _ = OpenManager(ManagerOptions{Dir: "/data", FS: fsys, Now: c.now, UseHighWatermarkCheckpoint: true, DefaultConfig: Config{SegmentIndexBytes: 4096}})
	if o := m2.Get(TopicPartition{"c", 3}).Offsets(); o.HighWatermark != o.LogStart || o.LogEnd != 7 {
		t.Fatalf("not checkpointed: %+v", o)
	}
	m2.Close()
}

func TestDeleteWhileReading(t *testing.T) {
	fsys := segment.NewMemFS()
	c := newClock()
	m := testManager(t, fsys, c)
	defer m.Close()
	p, _ := m.Open(tp0, Config{SegmentBytes: 2048})
	var all []byte
	for i := 0; i < 50; i++ {
		b := makeBatch(t, spec{n: 2, valueLen: 50})
		res, _ := p.Append(b, 0)
		p.Commit(res.LastOffset + 1)
		all = append(all, b...)
	}
	// The readers read until the partition is closed under them, so the
	// delete always lands while they read.
	var wg sync.WaitGroup
	var reads atomic.Int64
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				r, err := p.Read(int64(i%100), 1000)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				if !bytes.Contains(all, r.Records) {
					t.Error("read garbage")
					return
				}
				reads.Add(1)
			}
		}()
	}
	testwait.For(t, 10*time.Second, func() bool { return reads.Load() >= 400 }, "four readers reading")
	if err := m.Delete(tp0); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if m.Get(tp0) != nil {
		t.Fatal("still open")
	}
	if ents, _ := fsys.ReadDir("/data"); len(ents) != 0 {
		for _, e := range ents {
			if strings.HasPrefix(e.Name, tp0.String()) {
				t.Fatalf("directory left: %v", ents)
			}
		}
	}
	if _, err := p.Append(makeBatch(t, spec{n: 1}), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after delete: %v", err)
	}
	// Reopening creates an empty partition.
	p2, err := m.Open(tp0, Config{})
	if err != nil || p2.Offsets().LogEnd != 0 {
		t.Fatalf("reopen after delete: %v", err)
	}
}

func TestConcurrentAppendReadRace(t *testing.T) {
	c := newClock()
	m := testManager(t, segment.NewMemFS(), c)
	defer m.Close()
	p, _ := m.Open(tp0, Config{SegmentBytes: 4096, IndexIntervalBytes: 200})
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var off int64
			for {
				select {
				case <-done:
					return
				case <-p.Wait(off):
				case <-time.After(50 * time.Millisecond):
				}
				r, err := p.Read(off, 4096)
				if err != nil {
					t.Error(err)
					return
				}
				if hs := batchesOf(t, r.Records); len(hs) > 0 {
					if hs[0].BaseOffset > off {
						t.Errorf("gap: %d > %d", hs[0].BaseOffset, off)
						return
					}
					off = hs[len(hs)-1].LastOffset() + 1
				}
				p.OffsetForTimestamp(5)
				p.MaxTimestamp()
			}
		}()
	}
	for i := 0; i < 300; i++ {
		res, err := p.Append(makeBatch(t, spec{n: 3, valueLen: 30, ts: int64(i)}), 0)
		if err != nil {
			t.Fatal(err)
		}
		p.Commit(res.LastOffset + 1)
		if i%50 == 0 {
			p.Flush()
		}
	}
	close(done)
	wg.Wait()
}

func TestAppendValidation(t *testing.T) {
	c := newClock()
	m := testManager(t, segment.NewMemFS(), c)
	defer m.Close()
	p, _ := m.Open(tp0, Config{MaxMessageBytes: 500, TimestampBeforeMaxMs: 1000, TimestampAfterMaxMs: 1000})
	now := c.now().UnixMilli()
	if _, err := p.Append(makeBatch(t, spec{n: 1, valueLen: 600, ts: now}), 0); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	if _, err := p.Append(makeBatch(t, spec{n: 1, ts: now - 5000}), 0); !errors.Is(err, ErrInvalidTimestamp) {
		t.Fatalf("too old: %v", err)
	}
	if _, err := p.Append(makeBatch(t, spec{n: 1, ts: now + 5000}), 0); !errors.Is(err, ErrInvalidTimestamp) {
		t.Fatalf("too new: %v", err)
	}
	b := makeBatch(t, spec{n: 1, ts: now})
	b[len(b)-1] ^= 1
	if _, err := p.Append(b, 0); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("crc: %v", err)
	}
	b = makeBatch(t, spec{n: 1, ts: now})
	b[16] = 1
	if _, err := p.Append(b, 0); !errors.Is(err, ErrUnsupportedMagic) {
		t.Fatalf("magic: %v", err)
	}
	if _, err := p.Append(nil, 0); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("empty: %v", err)
	}
	if o := p.Offsets(); o.LogEnd != 0 {
		t.Fatalf("something was written: %+v", o)
	}
	// LogAppendTime stamps the max timestamp and keeps the batch valid.
	p.SetConfig(Config{MessageTimestampType: "LogAppendTime"})
	res, err := p.Append(makeBatch(t, spec{n: 2, ts: 5}), 0)
	if err != nil || res.LogAppendTime != now {
		t.Fatalf("log append time: %+v %v", res, err)
	}
	p.Commit(res.LastOffset + 1)
	r, _ := p.Read(0, 1000)
	hs := batchesOf(t, r.Records)
	if !hs[0].IsLogAppendTime() || hs[0].MaxTimestamp != now {
		t.Fatalf("stored header %+v", hs[0])
	}
}

func TestRollOnSegmentMsAndFlushMs(t *testing.T) {
	fsys := segment.NewMemFS()
	c := newClock()
	now := c.now
	m, err := OpenManager(ManagerOptions{Dir: "/data", FS: fsys, Now: now, FlushCheckInterval: 5 * time.Millisecond, CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := m.Open(tp0, Config{SegmentMs: time.Hour, FlushInterval: time.Second, SegmentIndexBytes: 4096})
	p.Append(makeBatch(t, spec{n: 1}), 0)
	p.Append(makeBatch(t, spec{n: 1}), 0)
	if n := len(p.Segments()); n != 1 {
		t.Fatalf("%d segments", n)
	}
	c.add(2 * time.Hour)
	res, _ := p.Append(makeBatch(t, spec{n: 1}), 0)
	p.Commit(res.LastOffset + 1)
	if n := len(p.Segments()); n != 2 {
		t.Fatalf("no roll on segment.ms: %d segments", n)
	}
	// The background flusher syncs the new segment after flush.ms.
	c.add(2 * time.Second)
	testwait.For(t, 5*time.Second, func() bool {
		p.mu.RLock()
		defer p.mu.RUnlock()
		return p.firstUnflushed.IsZero()
	}, "background flush did not happen")
	m.crash()
	fsys.ResetToSyncedState()
	m = testManager(t, fsys, c)
	defer m.Close()
	if o := m.Get(tp0).Offsets(); o.LogEnd != 3 {
		t.Fatalf("flushed data lost: %+v", o)
	}
}

func TestManagerConcurrentAdmin(t *testing.T) {
	c := newClock()
	m := testManager(t, segment.NewMemFS(), c)
	defer m.Close()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				tp := TopicPartition{"t", int32((g + i) % 3)}
				switch i % 3 {
				case 0:
					if p, err := m.Open(tp, Config{SegmentIndexBytes: 1024}); err == nil {
						p.Append(makeBatch(t, spec{n: 1}), 0)
					}
				case 1:
					if p := m.Get(tp); p != nil {
						p.Read(0, 100)
						p.Offsets()
					}
				case 2:
					if err := m.Delete(tp); err != nil {
						t.Error(err)
					}
				}
				m.Partitions()
			}
		}(g)
	}
	wg.Wait()
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
}

// Opens of distinct partitions run side by side; concurrent Opens of one
// partition create it once and return the same log; Close waits for them.
func TestManagerConcurrentOpens(t *testing.T) {
	m, err := OpenManager(ManagerOptions{Dir: "/data", FS: segment.NewMemFS(), DefaultConfig: Config{SegmentIndexBytes: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	const parts, callers = 8, 4
	got := make([][]*Partition, parts)
	for i := range got {
		got[i] = make([]*Partition, callers)
	}
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		for c := 0; c < callers; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lp, err := m.Open(TopicPartition{Topic: "co", Partition: int32(p)}, Config{SegmentIndexBytes: 4096})
				if err != nil {
					t.Error(err)
				}
				got[p][c] = lp
			}()
		}
	}
	wg.Wait()
	for p := range got {
		for c := range got[p] {
			if got[p][c] == nil || got[p][c] != got[p][0] {
				t.Fatalf("partition %d: caller %d got %p, caller 0 %p", p, c, got[p][c], got[p][0])
			}
		}
	}
	if n := len(m.Partitions()); n != parts {
		t.Fatalf("%d partitions open, want %d", n, parts)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open(TopicPartition{Topic: "co", Partition: 99}, Config{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Open after Close: %v", err)
	}
}
