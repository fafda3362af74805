package log

import (
	"testing"
)

// BenchmarkCreatePartitions opens 1,000 new partitions of one topic on the
// real filesystem, as one CreateTopics of 1,000 partitions does: each
// creates a segment with two preallocated, mmap'd index files (10 MiB each
// by default). "then-index" also appends two 8 KiB batches to each, so that
// each writes its first index entries: the cost of faulting in a fresh
// mapping must not just move from creation to the first append.
func BenchmarkCreatePartitions(b *testing.B) {
	const partitions = 1000
	for _, bc := range []struct {
		name    string
		appends int
	}{{"create", 0}, {"then-index", 2}} {
		b.Run(bc.name, func(b *testing.B) {
			batch := makeBatch(b, spec{n: 8, valueLen: 1000, ts: 1})
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				m, err := OpenManager(ManagerOptions{Dir: b.TempDir(), Logger: quietLogger})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for n := int32(0); n < partitions; n++ {
					p, err := m.Open(TopicPartition{Topic: "t", Partition: n}, Config{})
					if err != nil {
						b.Fatal(err)
					}
					for k := 0; k < bc.appends; k++ {
						if _, err := p.Append(batch, 1); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*partitions), "µs/partition")
		})
	}
}
