package retention

import (
	"fmt"
	"sort"
	"testing"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

// kv is one record read back.
type kv struct {
	off   int64
	key   string
	value *string // nil = tombstone
	codec int
}

// readAll reads every committed record of p from its log start.
func readAll(t testing.TB, p *log.Partition) []kv {
	t.Helper()
	var out []kv
	offs := p.Offsets()
	err := forEachBatch(p, offs.LogStart, offs.HighWatermark, func(b []byte, h segment.Header) error {
		if _, err := segment.ValidateStoredBatch(b); err != nil {
			return err
		}
		_, recs, err := segment.OpenBatch(b)
		if err != nil {
			return err
		}
		for _, r := range recs {
			e := kv{off: h.BaseOffset + int64(r.OffsetDelta), key: string(r.Key), codec: h.Compression()}
			if !r.Tombstone {
				v := string(r.Value)
				e.value = &v
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// latestOf is the model: the last record of each key, in offset order.
func latestOf(all []kv) []kv {
	last := map[string]kv{}
	for _, r := range all {
		last[r.key] = r
	}
	out := make([]kv, 0, len(last))
	for _, r := range last {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].off < out[j].off })
	return out
}

func sameRecords(t testing.TB, what string, got, want []kv) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d\ngot  %v\nwant %v", what, len(got), len(want), fmtKVs(got), fmtKVs(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.off != w.off || g.key != w.key || (g.value == nil) != (w.value == nil) || (g.value != nil && *g.value != *w.value) {
			t.Fatalf("%s: record %d is %v, want %v", what, i, fmtKVs(got[i:i+1]), fmtKVs(want[i:i+1]))
		}
	}
}

func fmtKVs(rs []kv) string {
	s := ""
	for _, r := range rs {
		v := "<tombstone>"
		if r.value != nil {
			v = *r.value
		}
		s += fmt.Sprintf("%d:%s=%s ", r.off, r.key, v)
	}
	return s
}

const testNow = int64(1_700_000_000_000)

// fillKeyed appends rounds of keyed batches (keys k0..k9, five records a
// batch) with codec, a tombstone for k3 in the middle, then rolls so that
// everything but an empty active segment can be cleaned.
func fillKeyed(t testing.TB, p *log.Partition, codec int8, rounds int, ts int64) {
	t.Helper()
	for r := 0; r < rounds; r++ {
		for b := 0; b < 2; b++ {
			var recs []rec
			for i := 0; i < 5; i++ {
				k := fmt.Sprintf("k%d", b*5+i)
				recs = append(recs, rec{key: []byte(k), value: []byte(fmt.Sprintf("%s-r%d", k, r))})
			}
			if r == rounds/2 && b == 0 {
				recs[3] = rec{key: []byte("k3")} // tombstone
			}
			appendCommit(t, p, makeBatch(t, ts, codec, recs...))
		}
	}
	if err := p.Roll(); err != nil {
		t.Fatal(err)
	}
}

func compactCfg() log.Config {
	return log.Config{SegmentBytes: 1500, SegmentIndexBytes: 4096, Cleanup: log.CleanupConfig{Compact: true, DeleteRetentionMs: 60_000, MinCleanableDirtyRatio: 0.5}}
}

// TestCompactLatestPerKey: for every codec, compaction keeps exactly the
// latest record of each key at its original offset (gaps elsewhere),
// batches keep their codec, a young tombstone stays and an old one goes
// after delete.retention.ms.
func TestCompactLatestPerKey(t *testing.T) {
	for codec := int8(0); codec <= 4; codec++ {
		t.Run(fmt.Sprintf("codec%d", codec), func(t *testing.T) {
			c := newClock(testNow)
			fs := segment.NewMemFS()
			m := openManager(t, fs, "/data", c)
			p, err := m.Open(log.TopicPartition{Topic: "c", Partition: 0}, compactCfg())
			if err != nil {
				t.Fatal(err)
			}
			// Tombstones of k3 late in the log: round 6 of 8 writes one
			// (rounds/2 = 4 tombstones k3, later rounds rewrite it).
			fillKeyed(t, p, codec, 8, testNow)
			before := readAll(t, p)
			segsBefore := len(p.Segments())
			var sizeBefore int64
			for _, s := range p.Segments() {
				sizeBefore += s.Size
			}
			cl := newTestCleaner(t, m, c)
			if n := cl.CompactOnce(); n != 1 {
				t.Fatalf("CompactOnce compacted %d partitions, want 1", n)
			}
			got := readAll(t, p)
			sameRecords(t, "after compaction", got, latestOf(before))
			for _, r := range got {
				if r.codec != int(codec) {
					t.Fatalf("record %d in a batch with codec %d, want %d", r.off, r.codec, codec)
				}
			}
			var sizeAfter int64
			for _, s := range p.Segments() {
				sizeAfter += s.Size
			}
			if sizeAfter >= sizeBefore || len(p.Segments()) > segsBefore {
				t.Fatalf("compaction did not shrink the log: %d -> %d bytes, %d -> %d segments", sizeBefore, sizeAfter, segsBefore, len(p.Segments()))
			}
			if n := cl.CompactOnce(); n != 0 {
				t.Fatalf("a clean log was compacted again (%d)", n)
			}
			// The first dirty offset survives a restart
			// (cleaner-offset-checkpoint): still nothing to do.
			cl.Close()
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			m = openManager(t, fs, "/data", c)
			if p, err = m.Open(log.TopicPartition{Topic: "c", Partition: 0}, compactCfg()); err != nil {
				t.Fatal(err)
			}
			cl = newTestCleaner(t, m, c)
			if n := cl.CompactOnce(); n != 0 {
				t.Fatalf("a clean log was compacted again after a restart (%d)", n)
			}
			sameRecords(t, "after a restart", readAll(t, p), latestOf(before))
			// Offsets, the log end and reads at gap offsets behave.
			if offs := p.Offsets(); offs.LogEnd != before[len(before)-1].off+1 {
				t.Fatalf("log end moved: %+v", offs)
			}
		})
	}
}

// TestCompactTombstones: a tombstone that is the latest record of its key
// survives compaction while younger than delete.retention.ms, then goes.
func TestCompactTombstones(t *testing.T) {
	c := newClock(testNow)
	m := openManager(t, segment.NewMemFS(), "/data", c)
	p, err := m.Open(log.TopicPartition{Topic: "c", Partition: 0}, compactCfg())
	if err != nil {
		t.Fatal(err)
	}
	appendCommit(t, p, makeBatch(t, testNow, 0, rec{key: []byte("a"), value: []byte("1")}, rec{key: []byte("b"), value: []byte("1")}))
	appendCommit(t, p, makeBatch(t, testNow, 0, rec{key: []byte("a")}, rec{key: []byte("c"), value: []byte("1")}))
	if err := p.Roll(); err != nil {
		t.Fatal(err)
	}
	cl := newTestCleaner(t, m, c)
	cl.CompactOnce()
	one := "1"
	sameRecords(t, "young tombstone", readAll(t, p), []kv{{off: 1, key: "b", value: &one}, {off: 2, key: "a"}, {off: 3, key: "c", value: &one}})

	// delete.retention.ms later, new data makes the log dirty again (any
	// dirty share will do) and the tombstone goes.
	cfg := compactCfg()
	cfg.Cleanup.MinCleanableDirtyRatio = 0.01
	p.SetConfig(cfg)
	c.set(testNow + 60_001)
	appendCommit(t, p, makeBatch(t, testNow+60_001, 0, rec{key: []byte("c"), value: []byte("2")}))
	if err := p.Roll(); err != nil {
		t.Fatal(err)
	}
	if cl.CompactOnce() != 1 {
		t.Fatal("not compacted")
	}
	two := "2"
	sameRecords(t, "old tombstone", readAll(t, p), []kv{{off: 1, key: "b", value: &one}, {off: 4, key: "c", value: &two}})
}

// TestCompactCrash injects a fault at every filesystem operation of a
// compaction in turn, crashes (drops everything not fsync'd) and reopens:
// the log always reads back either as before or as compacted -- the same
// latest value of every key, the same log end -- and a compaction after
// the restart finishes the job.
func TestCompactCrash(t *testing.T) {
	ops := []segment.Op{segment.OpCreate, segment.OpWrite, segment.OpSync, segment.OpRename, segment.OpRemove, segment.OpSyncDir, segment.OpMkdir, segment.OpTruncate, segment.OpMap, segment.OpOpen}
	tp := log.TopicPartition{Topic: "c", Partition: 0}
	cases, recovered := 0, 0
	for _, op := range ops {
		for n := 0; n < 200; n++ {
			fs := segment.NewMemFS()
			c := newClock(testNow)
			m, err := log.OpenManager(log.ManagerOptions{Dir: "/data", FS: fs, Logger: quietLogger, Now: c.now})
			if err != nil {
				t.Fatal(err)
			}
			p, err := m.Open(tp, compactCfg())
			if err != nil {
				t.Fatal(err)
			}
			fillKeyed(t, p, 1, 6, testNow)
			before := readAll(t, p)
			want := latestOf(before)
			end := p.Offsets().LogEnd
			if err := p.Flush(); err != nil {
				t.Fatal(err)
			}
			fs.FailAfter(op, n)
			cl := NewCleaner(CleanerOptions{Logs: m, Logger: quietLogger, Now: c.now, CheckInterval: 1 << 40, Backoff: 1 << 40})
			done := cl.CompactOnce() == 1
			cl.Close()
			// Crash: whatever was not fsync'd is gone. (The old manager is
			// closed first so that no goroutine of it outlives the crash;
			// closing syncs nothing of the compaction's files.)
			m.Close()
			fs.ResetToSyncedState()
			m2, err := log.OpenManager(log.ManagerOptions{Dir: "/data", FS: fs, Logger: quietLogger, Now: c.now})
			if err != nil {
				t.Fatalf("%s after %d: reopen: %v", op, n, err)
			}
			p2, err := m2.Open(tp, compactCfg())
			if err != nil {
				t.Fatalf("%s after %d: open partition: %v", op, n, err)
			}
			got := readAll(t, p2)
			if p2.Offsets().LogEnd != end {
				t.Fatalf("%s after %d: log end %d, want %d", op, n, p2.Offsets().LogEnd, end)
			}
			// Each run of segments is swapped atomically, so the log may be
			// partly compacted: what is read is a subsequence of what was
			// written, with the same latest record of every key.
			checkSubsequence(t, fmt.Sprintf("%s after %d", op, n), got, before)
			sameRecords(t, fmt.Sprintf("%s after %d: latest per key", op, n), latestOf(got), want)
			if !done && len(got) < len(before) {
				recovered++ // the compaction failed, yet reopening finished its swap
			}
			cl2 := NewCleaner(CleanerOptions{Logs: m2, Logger: quietLogger, Now: c.now, CheckInterval: 1 << 40, Backoff: 1 << 40})
			cl2.CompactOnce()
			cl2.Close()
			sameRecords(t, fmt.Sprintf("%s after %d, compacted after restart", op, n), readAll(t, p2), want)
			m2.Close()
			cases++
			if done {
				break // the fault was past the compaction's last op of this kind
			}
		}
	}
	t.Logf("%d crash points, %d swaps finished by recovery", cases, recovered)
	if recovered == 0 {
		t.Fatal("no crash point left a committed swap for recovery to finish")
	}
}

// checkSubsequence fails unless every record of got is a record of all,
// in the same order.
func checkSubsequence(t testing.TB, what string, got, all []kv) {
	t.Helper()
	j := 0
	for _, g := range got {
		for j < len(all) && all[j].off != g.off {
			j++
		}
		if j == len(all) {
			t.Fatalf("%s: record %s was never written (or is out of order)", what, fmtKVs([]kv{g}))
		}
		sameRecords(t, what, []kv{g}, all[j:j+1])
	}
}

// TestCompactedDiskUseConverges: under a steady update load over a fixed
// key set, with a roll and a cleaner pass after each round, the disk use
// of a compacted partition stays bounded instead of growing with the
// number of updates.
func TestCompactedDiskUseConverges(t *testing.T) {
	c := newClock(testNow)
	m := openManager(t, segment.NewMemFS(), "/data", c)
	cfg := compactCfg()
	cfg.SegmentBytes = 16 << 10
	p, err := m.Open(log.TopicPartition{Topic: "c", Partition: 0}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl := newTestCleaner(t, m, c)
	size := func() int64 {
		var n int64
		for _, s := range p.Segments() {
			n += s.Size
		}
		return n
	}
	var sizes []int64
	var written int64
	for round := 0; round < 30; round++ {
		for b := 0; b < 20; b++ {
			var recs []rec
			for i := 0; i < 10; i++ {
				k := (round*200 + b*10 + i) % 100 // 100 keys, each updated twice a round
				recs = append(recs, rec{key: []byte(fmt.Sprintf("key-%03d", k)), value: []byte(fmt.Sprintf("value-%d-%d-%s", round, b, "............................"))})
			}
			bt := makeBatch(t, testNow, 3, recs...)
			written += int64(len(bt))
			appendCommit(t, p, bt)
		}
		if err := p.Roll(); err != nil {
			t.Fatal(err)
		}
		cl.CompactOnce()
		sizes = append(sizes, size())
	}
	t.Logf("bytes written %d; disk use after each round: %v", written, sizes)
	peak := int64(0)
	for _, s := range sizes[10:] {
		peak = max(peak, s)
	}
	if peak > 3*sizes[4] || peak*5 > written {
		t.Fatalf("disk use does not converge: round 5 %d bytes, peak after round 10 %d, %d written", sizes[4], peak, written)
	}
}
