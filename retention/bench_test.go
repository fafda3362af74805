package retention

import (
	"fmt"
	"testing"
	"time"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

// BenchmarkCompact measures compaction throughput in MB/s of stored bytes
// read (and raw-MB/s of uncompressed record bytes)
// (offset map + rewrite + swap): 4 MiB-ish of 200-byte values in batches
// of 100 records over 1,000 keys (each key updated ~20 times), segments
// of 1 MiB, on the OS filesystem (temp dir) or MemFS.
//
//	go test ./retention -run XXX -bench Compact -benchtime 5x
func BenchmarkCompact(b *testing.B) {
	for _, bc := range []struct {
		name  string
		codec int8
		mem   bool
	}{{"none/os", 0, false}, {"lz4/os", 3, false}, {"zstd/os", 4, false}, {"none/mem", 0, true}} {
		b.Run(bc.name, func(b *testing.B) {
			value := make([]byte, 200)
			for i := range value {
				value[i] = byte('a' + i*7%26) // some entropy, compressible
			}
			var batches [][]byte
			var total, raw int64
			for n := 0; n < 200; n++ {
				var recs []rec
				for i := 0; i < 100; i++ {
					recs = append(recs, rec{key: []byte(fmt.Sprintf("key-%04d", (n*100+i*37)%1000)), value: value})
				}
				bt := makeBatch(b, testNow, bc.codec, recs...)
				unc := makeBatch(b, testNow, 0, recs...)
				raw += int64(len(unc))
				batches = append(batches, bt)
				total += int64(len(bt))
			}
			b.SetBytes(total) // MB/s of stored (compressed) bytes
			b.ReportAllocs()
			var timed time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				var fs segment.FS
				dir := b.TempDir()
				if bc.mem {
					fs, dir = segment.NewMemFS(), "/data"
				}
				c := newClock(testNow)
				m, err := log.OpenManager(log.ManagerOptions{Dir: dir, FS: fs, Logger: quietLogger, Now: c.now})
				if err != nil {
					b.Fatal(err)
				}
				cfg := log.Config{SegmentBytes: 1 << 20, SegmentIndexBytes: 1 << 16,
					Cleanup: log.CleanupConfig{Compact: true, DeleteRetentionMs: 86_400_000, MinCleanableDirtyRatio: 0.5}}
				p, err := m.Open(log.TopicPartition{Topic: "bench", Partition: 0}, cfg)
				if err != nil {
					b.Fatal(err)
				}
				for _, bt := range batches {
					appendCommit(b, p, append([]byte(nil), bt...))
				}
				if err := p.Roll(); err != nil {
					b.Fatal(err)
				}
				segs, offs := p.Segments(), p.Offsets()
				acts := PlanCompact(segs, offs, cfg.Cleanup, 0, testNow)
				if len(acts) != 1 {
					b.Fatal("nothing to compact")
				}
				b.StartTimer()
				t0 := time.Now()
				st, err := compact(p, 0, acts[0].Offset, testNow)
				timed += time.Since(t0)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if st.recsKept != 1000 {
					b.Fatalf("kept %d records, want 1000", st.recsKept)
				}
				m.Close()
				b.StartTimer()
			}
			// Throughput in uncompressed record bytes, comparable across codecs.
			b.ReportMetric(float64(raw)*float64(b.N)/timed.Seconds()/1e6, "raw-MB/s")
		})
	}
}
