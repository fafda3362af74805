package log

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/segment"
)

// TestCompressedBatchesByteIdentical stores real compressed batches (gzip,
// snappy, lz4, zstd built with the codecs clients use) and reads them back
// byte for byte.
func TestCompressedBatchesByteIdentical(t *testing.T) {
	c := newClock()
	m := testManager(t, segment.NewMemFS(), c)
	defer m.Close()
	p, _ := m.Open(tp0, Config{})
	var want [][]byte
	for codec := int8(0); codec <= 4; codec++ {
		b := makeBatch(t, spec{n: 20, valueLen: 200, ts: 100, codec: codec, pid: 77, seq: int32(codec) * 20})
		res, err := p.Append(b, 9)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		p.Commit(res.LastOffset + 1)
		want = append(want, b)
	}
	for i, w := range want {
		r, err := p.Read(int64(i*20), 1)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Records, w) {
			t.Fatalf("codec %d: read back differs", i)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(r.Records); err != nil {
			t.Fatal(err)
		}
		if rb.FirstOffset != int64(i*20) || rb.PartitionLeaderEpoch != 9 || rb.Attributes&7 != int16(i) || rb.NumRecords != 20 {
			t.Fatalf("codec %d: header %+v", i, rb)
		}
	}
}
