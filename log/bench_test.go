package log

import (
	"fmt"
	"testing"
)

// BenchmarkPartitionAppend appends and commits batches on the real
// filesystem (no fsync policy), reporting MB/s and records/s.
func BenchmarkPartitionAppend(b *testing.B) {
	for _, bc := range []struct {
		name      string
		n, valLen int
	}{{"1KiB", 8, 100}, {"100B", 3, 10}} {
		b.Run(bc.name, func(b *testing.B) {
			m, err := OpenManager(ManagerOptions{Dir: b.TempDir(), Logger: quietLogger})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			p, _ := m.Open(tp0, Config{})
			batch := makeBatch(b, spec{n: bc.n, valueLen: bc.valLen, ts: 1})
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := p.Append(batch, 1)
				if err != nil {
					b.Fatal(err)
				}
				p.Commit(res.LastOffset + 1)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*bc.n)/b.Elapsed().Seconds(), "records/s")
			_ = fmt.Sprint(len(batch))
		})
	}
}

// BenchmarkPartitionRead reads ~64 KiB of committed 1 KiB batches from a
// spread of offsets, as fetches do (copy into a fresh buffer).
func BenchmarkPartitionRead(b *testing.B) {
	m, err := OpenManager(ManagerOptions{Dir: b.TempDir(), Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	p, _ := m.Open(tp0, Config{})
	batch := makeBatch(b, spec{n: 8, valueLen: 100, ts: 1})
	const batches = 20000
	for i := 0; i < batches; i++ {
		res, err := p.Append(batch, 1)
		if err != nil {
			b.Fatal(err)
		}
		p.Commit(res.LastOffset + 1)
	}
	b.SetBytes(64 << 10)
	b.ResetTimer()
	var records int
	for i := 0; i < b.N; i++ {
		off := int64((i * 7919) % (batches * 8))
		r, err := p.Read(off, 64<<10)
		if err != nil || len(r.Records) == 0 {
			b.Fatal(err)
		}
		records += len(r.Records) / len(batch) * 8
	}
	b.StopTimer()
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}
