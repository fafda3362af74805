package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// compressBatch re-encodes an uncompressed batch's records with codec.
func compressBatch(t *testing.T, b []byte, codec int) []byte {
	t.Helper()
	body, err := Compress(codec, b[HeaderSize:])
	if err != nil {
		t.Fatal(err)
	}
	out := append(append([]byte(nil), b[:HeaderSize]...), body...)
	be := binary.BigEndian
	be.PutUint16(out[OffAttributes:], be.Uint16(out[OffAttributes:])|uint16(codec))
	be.PutUint32(out[OffBatchLength:], uint32(len(out)-LogOverhead))
	be.PutUint32(out[OffCRC:], ComputeCRC(out))
	return out
}

// TestCodecsOpenBatch: every codec's batch opens to the same records,
// within the decompression limit only; keyless records are found.
func TestCodecsOpenBatch(t *testing.T) {
	plain := buildBatch(3, 100, 1000)
	for codec := CodecNone; codec <= CodecZstd; codec++ {
		b := compressBatch(t, plain, codec)
		if _, err := ValidateBatch(b); err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		h, recs, err := OpenBatch(b)
		if err != nil || len(recs) != 3 || h.Compression() != codec {
			t.Fatalf("codec %d: %d records, %v", codec, len(recs), err)
		}
		for i, r := range recs {
			if r.Key != nil || r.Tombstone || len(r.Value) != 100 || r.OffsetDelta != int32(i) {
				t.Fatalf("codec %d record %d: %+v", codec, i, r)
			}
		}
		area, err := Decompress(codec, b[HeaderSize:], len(plain)-HeaderSize)
		if err != nil || !bytes.Equal(area, plain[HeaderSize:]) {
			t.Fatalf("codec %d: decompress at the exact limit: %v", codec, err)
		}
		if codec != CodecNone {
			if _, err := Decompress(codec, b[HeaderSize:], len(plain)-HeaderSize-1); !errors.Is(err, ErrUndecodable) {
				t.Fatalf("codec %d: decompress past the limit: %v", codec, err)
			}
		}
		var ke *KeyError
		if err := CheckKeys(b, 0); !errors.As(err, &ke) || ke.Index != 0 || !errors.Is(err, ErrMissingKey) {
			t.Fatalf("codec %d: CheckKeys %v", codec, err)
		}
		rt, err := BatchRecordTimes(b)
		if err != nil || len(rt.Offsets) != 3 || rt.Offsets[2] != 2 || rt.Timestamps[0] != 1000 {
			t.Fatalf("codec %d: record times %+v %v", codec, rt, err)
		}
	}
	if _, err := Decompress(7, nil, 10); !errors.Is(err, ErrUndecodable) {
		t.Fatalf("unknown codec: %v", err)
	}
}
