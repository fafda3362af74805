package segment

import "testing"

// BenchmarkSegmentRoll is one segment's life at a roll, on the real file
// system: create (two preallocated, mapped indexes), 16 appends of 4 KiB
// batches with their index entries, Sync (log and indexes), Seal (indexes
// trimmed and remapped), Close.
func BenchmarkSegmentRoll(b *testing.B) {
	dir := b.TempDir()
	batch := buildBatch(32, 100, 1)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s, err := Create(OSFS{}, dir, int64(i)*1000, Options{IndexBytes: 1 << 20, IndexInterval: 4096})
		if err != nil {
			b.Fatal(err)
		}
		for k := 0; k < 16; k++ {
			next := s.NextOffset()
			SetBaseOffset(batch, next)
			if err := s.Append(batch, []BatchInfo{{Len: len(batch), LastOffset: next + 31, MaxTimestamp: int64(k + 1)}}); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := s.Seal(); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
