package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// keyedRecords is an uncompressed records area of n minimal keyed records
// (key "k", empty value): the shape that compresses best.
func keyedRecords(n int) []byte {
	rec := []byte{0, 0, 0, 2, 'k', 0, 0} // attributes, ts, offset delta, key len 1, key, value len 0, headers
	var area []byte
	for i := 0; i < n; i++ {
		area = binary.AppendVarint(area, int64(len(rec)))
		area = append(area, rec...)
	}
	return area
}

// bomb is a compressed batch of n keyed records claiming n records, CRC
// correct unless badCRC.
func bomb(t *testing.T, codec, n int, badCRC bool) []byte {
	t.Helper()
	body, err := Compress(codec, keyedRecords(n))
	if err != nil {
		t.Fatal(err)
	}
	h := Header{Attributes: int16(codec), LastOffsetDelta: int32(n - 1), NumRecords: int32(n), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b := AppendBatch(nil, h, body)
	if badCRC {
		b[OffCRC] ^= 0xff
	}
	return b
}

// allocated runs fn and returns the bytes it allocated.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecompressLimit: every codec stops at the limit with
// ErrRecordsTooLarge, allocating about the limit, not what the data
// decompresses to (zstd's declared content size is refused before
// anything is allocated).
func TestDecompressLimit(t *testing.T) {
	area := keyedRecords(4 << 20) // 32 MiB decompressed
	const limit = 1 << 20
	for codec := CodecGzip; codec <= CodecZstd; codec++ {
		data, err := Compress(codec, area)
		if err != nil {
			t.Fatal(err)
		}
		var derr error
		n := allocated(func() { _, derr = Decompress(codec, data, limit) })
		if !errors.Is(derr, ErrRecordsTooLarge) || !errors.Is(derr, ErrUndecodable) {
			t.Fatalf("codec %d: %v", codec, derr)
		}
		// The limit's output grown by doubling, and the codec's own
		// buffers (lz4 frames' blocks are up to 4 MiB, read and
		// decoded), more under -race; the records are 32 MiB.
		if n > 4*limit+12<<20 {
			t.Fatalf("codec %d: %d compressed bytes refused at a %d-byte limit allocated %d bytes", codec, len(data), limit, n)
		}
		t.Logf("codec %d: %d bytes compressed, refused after allocating %d bytes", codec, len(data), n)
	}
	// A zstd stream without a declared content size (an 8 MiB window)
	// grows its output from what decodes, and stops at zstdMinMemory.
	var buf bytes.Buffer
	w, _ := zstd.NewWriter(&buf)
	w.Write(area)
	w.Close()
	var derr error
	n := allocated(func() { _, derr = Decompress(CodecZstd, buf.Bytes(), limit) })
	if !errors.Is(derr, ErrRecordsTooLarge) || n > 7*zstdMinMemory { // cumulative: 1+2+...+16 MiB of growth and the block buffers
		t.Fatalf("zstd stream: %v after %d bytes", derr, n)
	}
	t.Logf("zstd stream without content size: %d bytes compressed, refused after allocating %d bytes", buf.Len(), n)
	if got := DecompressLimit(1<<20 + 12); got != 32<<20+384 {
		t.Fatalf("DecompressLimit(default) = %d", got)
	}
	if got := DecompressLimit(100 << 20); got != MaxRecordsBytes {
		t.Fatalf("DecompressLimit(100 MiB) = %d", got)
	}
	if got := DecompressLimit(1000); got != 1<<20 {
		t.Fatalf("DecompressLimit(1000) = %d", got)
	}
}

// TestCheckKeysOrder is issue 19's probe: a small zstd batch to a
// compacted topic whose records decompress to far more, claiming millions
// of records. A bad CRC is found before anything is decompressed; an
// oversized batch before its CRC; with a good CRC the records decompress
// within DecompressLimit(max.message.bytes) and are walked without an
// array sized from the claimed count.
func TestCheckKeysOrder(t *testing.T) {
	const n = 2 << 20 // 16 MiB of records
	good := bomb(t, CodecZstd, n, false)
	bad := bomb(t, CodecZstd, n, true)
	t.Logf("zstd batch of %d bytes, %d records", len(good), n)

	var err error
	a := allocated(func() { err = CheckKeys(bad, 1<<20) })
	if !errors.Is(err, ErrCorrupt) || a > 1<<20 {
		t.Fatalf("bad CRC: %v after %d bytes allocated", err, a)
	}
	a = allocated(func() { err = CheckKeys(good, len(good)-1) })
	if !errors.Is(err, ErrBatchTooLarge) || a > 1<<20 {
		t.Fatalf("over max.message.bytes: %v after %d bytes allocated", err, a)
	}
	// max.message.bytes 256 KiB: the limit is 8 MiB, the records 16 MiB.
	a = allocated(func() { err = CheckKeys(good, 256<<10) })
	if !errors.Is(err, ErrRecordsTooLarge) || a > 24<<20 {
		t.Fatalf("decompressed past the limit: %v after %d bytes allocated", err, a)
	}
	t.Logf("refused past an 8 MiB limit after allocating %d bytes", a)
	// The default limit (32 MiB) holds them: accepted, and what was
	// allocated is about the records area, not 2M Records.
	a = allocated(func() { err = CheckKeys(good, 1<<20+12) })
	if err != nil || a > 40<<20 {
		t.Fatalf("within the limit: %v after %d bytes allocated", err, a)
	}
	t.Logf("accepted within the default limit after allocating %d bytes", a)

	// A count above what the records hold: ErrUndecodable, nothing sized
	// from the count. The header's count must match its last offset delta
	// (ValidateBatch), so both claim more.
	body, _ := Compress(CodecZstd, keyedRecords(1000))
	h := Header{Attributes: CodecZstd, LastOffsetDelta: 1 << 30, NumRecords: 1<<30 + 1, ProducerID: -1}
	lie := AppendBatch(nil, h, body)
	a = allocated(func() { err = CheckKeys(lie, 1<<20) })
	if !errors.Is(err, ErrUndecodable) || a > 1<<20 {
		t.Fatalf("claimed count: %v after %d bytes allocated", err, a)
	}
}

// TestParseRecordsCapacity: the records slice is sized from the area, not
// from a claimed count.
func TestParseRecordsCapacity(t *testing.T) {
	area := keyedRecords(10)
	if _, err := ParseRecords(area, int32(len(area))); !errors.Is(err, ErrUndecodable) {
		t.Fatalf("claimed count: %v", err)
	}
	var recs []Record
	a := allocated(func() { recs, _ = ParseRecords(area, 10) })
	if len(recs) != 10 || string(recs[9].Key) != "k" || cap(recs) > len(area)/minRecordLen+1 || a > 4096 {
		t.Fatalf("%d records, cap %d, %d bytes", len(recs), cap(recs), a)
	}
}
