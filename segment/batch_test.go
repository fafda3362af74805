package segment

import (
	"encoding/binary"
	"errors"
	"testing"
)

// buildBatch makes an uncompressed v2 batch of n records with values of
// valueLen bytes, base offset 0 and timestamps starting at ts.
func buildBatch(n int, valueLen int, ts int64) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		var body []byte
		body = append(body, 0)                            // attributes
		body = binary.AppendVarint(body, 0)               // timestamp delta
		body = binary.AppendVarint(body, int64(i))        // offset delta
		body = binary.AppendVarint(body, -1)              // key: null
		body = binary.AppendVarint(body, int64(valueLen)) // value
		for j := 0; j < valueLen; j++ {
			body = append(body, byte(i+j))
		}
		body = binary.AppendVarint(body, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	b := make([]byte, HeaderSize, HeaderSize+len(recs))
	be := binary.BigEndian
	be.PutUint32(b[OffBatchLength:], uint32(HeaderSize-LogOverhead+len(recs)))
	b[OffMagic] = Magic
	be.PutUint32(b[OffLastOffsetDelta:], uint32(n-1))
	be.PutUint64(b[OffBaseTimestamp:], uint64(ts))
	be.PutUint64(b[OffMaxTimestamp:], uint64(ts))
	be.PutUint64(b[OffProducerID:], ^uint64(0))
	be.PutUint16(b[OffProducerEpoch:], 0xffff)
	be.PutUint32(b[OffBaseSequence:], 0xffffffff)
	be.PutUint32(b[OffNumRecords:], uint32(n))
	b = append(b, recs...)
	be.PutUint32(b[OffCRC:], ComputeCRC(b))
	return b
}

func TestValidateBatch(t *testing.T) {
	b := buildBatch(3, 10, 1000)
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.NumRecords != 3 || h.LastOffsetDelta != 2 || h.MaxTimestamp != 1000 {
		t.Fatalf("header %+v", h)
	}
	SetBaseOffset(b, 77)
	SetLeaderEpoch(b, 5)
	if h, err = ValidateBatch(b); err != nil || h.BaseOffset != 77 || h.LeaderEpoch != 5 {
		t.Fatalf("after stamping: %+v %v", h, err)
	}
	SetLogAppendTime(b, 5000)
	if h, err = ValidateBatch(b); err != nil || !h.IsLogAppendTime() || h.MaxTimestamp != 5000 {
		t.Fatalf("after LogAppendTime: %+v %v", h, err)
	}

	bad := append([]byte(nil), b...)
	bad[len(bad)-1] ^= 1
	if _, err := ValidateBatch(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("crc flip: %v", err)
	}
	bad = append([]byte(nil), b...)
	bad[OffMagic] = 1
	if _, err := ValidateBatch(bad); !errors.Is(err, ErrUnsupportedMagic) {
		t.Fatalf("magic: %v", err)
	}
	if _, err := ValidateBatch(b[:len(b)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short: %v", err)
	}
	bad = append([]byte(nil), b...)
	binary.BigEndian.PutUint32(bad[OffNumRecords:], 4)
	binary.BigEndian.PutUint32(bad[OffCRC:], ComputeCRC(bad))
	if _, err := ValidateBatch(bad); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("count: %v", err)
	}
}

func TestSplitBatches(t *testing.T) {
	a, b := buildBatch(1, 5, 1), buildBatch(2, 100, 2)
	blob := append(append([]byte(nil), a...), b...)
	spans, err := SplitBatches(blob, 0)
	if err != nil || len(spans) != 2 || spans[1][0] != len(a) || spans[1][1] != len(blob) {
		t.Fatalf("%v %v", spans, err)
	}
	if _, err := SplitBatches(blob[:len(blob)-3], 0); err == nil {
		t.Fatal("truncated blob accepted")
	}
	if _, err := SplitBatches(blob, 1); err == nil {
		t.Fatal("batch limit ignored")
	}
}

func TestIncrementSequence(t *testing.T) {
	if got := IncrementSequence(2147483647, 1); got != 0 {
		t.Fatal(got)
	}
	if got := IncrementSequence(2147483646, 3); got != 1 {
		t.Fatal(got)
	}
	if got := IncrementSequence(5, 3); got != 8 {
		t.Fatal(got)
	}
}

func FuzzValidateBatch(f *testing.F) {
	f.Add(buildBatch(1, 1, 1))
	f.Add(buildBatch(3, 20, 7))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ValidateBatch(b)
		if err == nil {
			if h.Size() != int64(len(b)) || ComputeCRC(b) != h.CRC {
				t.Fatal("accepted an inconsistent batch")
			}
			// Reading record timestamps of an accepted batch never panics
			// and never visits more records than the header claims.
			n := int32(0)
			RecordTimestamps(b, h, func(i int32, ts int64) bool {
				if i != n || i >= h.NumRecords {
					t.Fatalf("record index %d out of order or beyond %d records", i, h.NumRecords)
				}
				n++
				return true
			})
		}
		SplitBatches(b, 16)
	})
}

// TestAppendBatchRoundTrip: AppendBatch writes every header field where
// ParseHeader reads it, and a batch that validates.
func TestAppendBatchRoundTrip(t *testing.T) {
	plain := buildBatch(3, 10, 500)
	want, err := ParseHeader(plain)
	if err != nil {
		t.Fatal(err)
	}
	want.BaseOffset, want.LeaderEpoch, want.ProducerID, want.ProducerEpoch, want.BaseSequence = 7, 3, 42, 2, 9
	want.Attributes = AttrTransactional
	b := AppendBatch([]byte("prefix"), want, plain[HeaderSize:])
	got, err := ValidateBatch(b[6:])
	if err != nil {
		t.Fatal(err)
	}
	want.CRC, want.Magic = got.CRC, Magic
	if got != want || string(b[:6]) != "prefix" {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
