package segment

import (
	"testing"
)

func BenchmarkSegmentAppend(b *testing.B) {
	for _, bc := range []struct {
		name      string
		n, valLen int
	}{{"1KiB", 8, 100}, {"100B", 3, 10}} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := Create(OSFS{}, b.TempDir(), 0, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			batch := buildBatch(bc.n, bc.valLen, 1)
			b.SetBytes(int64(len(batch)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				next := s.NextOffset()
				SetBaseOffset(batch, next)
				if err := s.Append(batch, []BatchInfo{{Len: len(batch), LastOffset: next + int64(bc.n) - 1, MaxTimestamp: 1}}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*bc.n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkSegmentRead finds a random batch by offset and reads ~64 KiB
// from it, as a fetch does.
func BenchmarkSegmentRead(b *testing.B) {
	s, err := Create(OSFS{}, b.TempDir(), 0, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := buildBatch(8, 100, 1)
	const batches = 20000
	for i := 0; i < batches; i++ {
		next := s.NextOffset()
		SetBaseOffset(batch, next)
		s.Append(batch, []BatchInfo{{Len: len(batch), LastOffset: next + 7, MaxTimestamp: 1}})
	}
	buf := make([]byte, 64<<10)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off := int64((i * 7919) % (batches * 8))
		pos, _, found, err := s.Find(off, s.Size())
		if err != nil || !found {
			b.Fatal(err)
		}
		n := int64(len(buf))
		if pos+n > s.Size() {
			n = s.Size() - pos
		}
		if _, err := s.ReadAt(buf[:n], pos); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)*float64(len(buf))/float64(len(batch))*8/b.Elapsed().Seconds(), "records/s")
}
