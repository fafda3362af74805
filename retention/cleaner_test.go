package retention

import (
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

func newTestCleaner(t *testing.T, m *log.Manager, c *clock) *Cleaner {
	logger := quietLogger
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	// A check interval far in the future: the test drives RunOnce.
	cl := NewCleaner(CleanerOptions{Logs: m, Logger: logger, Now: c.now, CheckInterval: time.Hour, Backoff: time.Hour})
	t.Cleanup(cl.Close)
	return cl
}

func TestCleanerRetentionBytes(t *testing.T) {
	c := newClock(1_700_000_000_000)
	m := openManager(t, nil, "", c)
	cfg := log.Config{SegmentBytes: 1000, Cleanup: log.CleanupConfig{Delete: true, RetentionMs: -1, RetentionBytes: 2500}}
	p, err := m.Open(log.TopicPartition{Topic: "t", Partition: 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		appendCommit(t, p, valueBatch(t, c.now().UnixMilli(), 200))
	}
	cl := newTestCleaner(t, m, c)
	if n := cl.RunOnce(); n != 1 {
		t.Fatalf("RunOnce changed %d partitions, want 1", n)
	}
	var total int64
	segs := p.Segments()
	for _, s := range segs {
		total += s.Size
	}
	if total < 2500 || total-segs[0].Size >= 2500 {
		t.Fatalf("after retention: %d bytes in %d segments (first %d); want the least that keeps >= 2500", total, len(segs), segs[0].Size)
	}
	offs := p.Offsets()
	if offs.LogStart != segs[0].BaseOffset || offs.LogStart == 0 {
		t.Fatalf("log start %d, first segment %d", offs.LogStart, segs[0].BaseOffset)
	}
	if _, err := p.Read(0, 1<<20); !errors.Is(err, log.ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v, want ErrOffsetOutOfRange", err)
	}
	if r, err := p.Read(offs.LogStart, 1<<20); err != nil || len(r.Records) == 0 {
		t.Fatalf("read at the log start: %d bytes, %v", len(r.Records), err)
	}
	if n := cl.RunOnce(); n != 0 {
		t.Fatalf("second pass changed %d partitions, want 0", n)
	}
}

func TestCleanerRetentionMsRollsExpiredActive(t *testing.T) {
	c := newClock(1_700_000_000_000)
	m := openManager(t, nil, "", c)
	cfg := log.Config{SegmentBytes: 1000, Cleanup: log.CleanupConfig{Delete: true, RetentionMs: 60_000, RetentionBytes: -1}}
	tp := log.TopicPartition{Topic: "t", Partition: 0}
	p, err := m.Open(tp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := c.now().UnixMilli()
	for i := 0; i < 10; i++ {
		appendCommit(t, p, valueBatch(t, t0, 200))
	}
	cl := newTestCleaner(t, m, c)
	c.set(t0 + 60_000) // exactly retention.ms old: kept
	if n := cl.RunOnce(); n != 0 {
		t.Fatalf("nothing is past retention yet, but %d partitions changed", n)
	}
	c.set(t0 + 60_001)
	cl.RunOnce()
	offs := p.Offsets()
	segs := p.Segments()
	if offs.LogStart != 10 || offs.LogEnd != 10 || len(segs) != 1 || segs[0].BaseOffset != 10 || segs[0].Size != 0 {
		t.Fatalf("after the whole log expired: offsets %+v, segments %+v; want one empty segment at 10", offs, segs)
	}
	// The log carries on from there, and the log start survives a restart.
	res := appendCommit(t, p, valueBatch(t, t0+60_001, 10))
	if res.BaseOffset != 10 {
		t.Fatalf("next append at %d, want 10", res.BaseOffset)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCleanerConfigChangeApplies(t *testing.T) {
	c := newClock(1_700_000_000_000)
	m := openManager(t, nil, "", c)
	cfg := log.Config{SegmentBytes: 1000, Cleanup: log.CleanupConfig{Delete: true, RetentionMs: -1, RetentionBytes: -1}}
	p, err := m.Open(log.TopicPartition{Topic: "t", Partition: 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		appendCommit(t, p, valueBatch(t, c.now().UnixMilli(), 200))
	}
	cl := newTestCleaner(t, m, c)
	if n := cl.RunOnce(); n != 0 {
		t.Fatal("unlimited retention deleted something")
	}
	cfg.Cleanup.RetentionBytes = 0
	p.SetConfig(cfg)
	cl.RunOnce()
	if offs := p.Offsets(); offs.LogStart != offs.LogEnd {
		t.Fatalf("retention.bytes=0 left %+v", offs)
	}
}

// TestCleanerDeletesUnderReaders: readers fetch from old segments while the
// cleaner deletes them. Every read either fails with ErrOffsetOutOfRange
// (the reader then restarts at the log start, as a Kafka client does) or
// returns whole, CRC-valid batches at the offsets asked for -- never
// garbage, never another error.
func TestCleanerDeletesUnderReaders(t *testing.T) {
	for _, fs := range []struct {
		name string
		fs   segment.FS
	}{{"os", nil}, {"mem", segment.NewMemFS()}} {
		t.Run(fs.name, func(t *testing.T) {
			c := newClock(1_700_000_000_000)
			dir := ""
			if fs.fs != nil {
				dir = "/data"
			}
			m := openManager(t, fs.fs, dir, c)
			cfg := log.Config{SegmentBytes: 2000, Cleanup: log.CleanupConfig{Delete: true, RetentionMs: -1, RetentionBytes: 4000}}
			p, err := m.Open(log.TopicPartition{Topic: "t", Partition: 0}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			cl := newTestCleaner(t, m, c)
			var stop atomic.Bool
			var resets atomic.Int64
			var wg sync.WaitGroup
			errc := make(chan error, 4)
			for r := 0; r < 3; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var next int64
					for !stop.Load() {
						res, err := p.Read(next, 700)
						if errors.Is(err, log.ErrOffsetOutOfRange) {
							next = p.Offsets().LogStart
							resets.Add(1)
							continue
						}
						if err != nil {
							errc <- err
							return
						}
						b := res.Records
						for len(b) > 0 {
							h, err := segment.ValidateBatch(b[:min(len(b), int(mustSize(b)))])
							if err != nil {
								errc <- err
								return
							}
							if h.LastOffset() < next {
								errc <- errors.New("read returned a batch before the offset asked for")
								return
							}
							next = h.LastOffset() + 1
							b = b[h.Size():]
						}
					}
				}()
			}
			for i := 0; i < 250; i++ {
				appendCommit(t, p, valueBatch(t, c.now().UnixMilli(), 150))
				if i%10 == 0 {
					cl.RunOnce()
				}
			}
			stop.Store(true)
			wg.Wait()
			select {
			case err := <-errc:
				t.Fatal(err)
			default:
			}
			if p.Offsets().LogStart == 0 {
				t.Fatal("retention never deleted anything")
			}
			t.Logf("log start %d, reader resets %d", p.Offsets().LogStart, resets.Load())
		})
	}
}

// mustSize is the whole size of the batch at the start of b (its length
// field + 12), or len(b) when b is too short to tell.
func mustSize(b []byte) int64 {
	h, err := segment.ParseHeader(b)
	if err != nil {
		return int64(len(b))
	}
	return h.Size()
}
