package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Errors about record batches. Corruption (length, CRC) and invalid records
// (count mismatch, record lengths that do not fit) are separate classes
// because Kafka answers them with different codes.
var (
	ErrCorrupt          = errors.New("segment: corrupt record batch")
	ErrInvalidRecord    = errors.New("segment: invalid record")
	ErrUnsupportedMagic = errors.New("segment: unsupported message format")
)

// On-disk and on-wire layout of a Kafka v2 RecordBatch header (see doc.go).
// These offsets are format constants: never change them.
const (
	OffBaseOffset      = 0  // int64
	OffBatchLength     = 8  // int32: bytes after this field
	OffLeaderEpoch     = 12 // int32: partitionLeaderEpoch (not covered by the CRC)
	OffMagic           = 16 // int8: always 2
	OffCRC             = 17 // uint32: CRC-32C of attributes..end
	OffAttributes      = 21 // int16
	OffLastOffsetDelta = 23 // int32
	OffBaseTimestamp   = 27 // int64
	OffMaxTimestamp    = 35 // int64
	OffProducerID      = 43 // int64
	OffProducerEpoch   = 51 // int16
	OffBaseSequence    = 53 // int32
	OffNumRecords      = 57 // int32

	// HeaderSize is the size of the fixed v2 batch header (on-disk format).
	HeaderSize = 61
	// LogOverhead is baseOffset + batchLength: the bytes not counted by
	// batchLength (on-disk format).
	LogOverhead = 12
	// minBatchLength is the smallest legal batchLength value: a header
	// with zero bytes of records.
	minBatchLength = HeaderSize - LogOverhead

	// MaxBatchSize is a hard sanity bound on one batch (header included),
	// whatever the topic's max.message.bytes: no length field above it is
	// ever trusted, so a corrupt length cannot become a huge allocation.
	MaxBatchSize = 64 << 20

	// Magic is the only record batch version Strata stores.
	Magic = 2

	// Attribute bits (on-wire format).
	AttrCompressionMask = 0x07
	AttrTimestampType   = 0x08 // 1 = LogAppendTime
	AttrTransactional   = 0x10
	AttrControl         = 0x20

	// maxRecordsPerBatch bounds the record walk of an uncompressed batch:
	// every record takes at least 7 bytes, so a batch cannot hold more
	// than MaxBatchSize/7 records.
	maxRecordsPerBatch = MaxBatchSize / 7
)

// castagnoli is the CRC-32C table Kafka uses for v2 batches.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the parsed fixed part of a v2 record batch.
type Header struct {
	BaseOffset      int64
	BatchLength     int32
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	NumRecords      int32
}

// Size is the whole batch's size in bytes, header included.
func (h *Header) Size() int64 { return int64(h.BatchLength) + LogOverhead }

// LastOffset is the offset of the batch's last record.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Compression is the codec number (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (h *Header) Compression() int { return int(h.Attributes & AttrCompressionMask) }

// IsLogAppendTime reports the timestamp type bit.
func (h *Header) IsLogAppendTime() bool { return h.Attributes&AttrTimestampType != 0 }

// IsControl reports a transaction marker batch.
func (h *Header) IsControl() bool { return h.Attributes&AttrControl != 0 }

// IsTransactional reports the transactional bit.
func (h *Header) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }

// LastSequence is the sequence number of the batch's last record, with
// Kafka's wrap-around at MaxInt32. -1 when the batch carries no sequence.
func (h *Header) LastSequence() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	return IncrementSequence(h.BaseSequence, h.LastOffsetDelta)
}

// IncrementSequence adds delta to seq, wrapping past MaxInt32 to 0 as
// Kafka's DefaultRecordBatch.incrementSequence does.
func IncrementSequence(seq, delta int32) int32 {
	if seq > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - seq) - 1
	}
	return seq + delta
}

// ParseHeader decodes the fixed header at the start of b. It checks only
// that b holds a whole header and that the magic byte is 2; it does not
// check the CRC or that the batch's bytes are all present.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		// Too short to even hold the magic byte? Report corruption; a
		// shorter v0/v1 message set is still caught below when present.
		if len(b) > OffMagic && b[OffMagic] != Magic {
			return h, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, int8(b[OffMagic]))
		}
		return h, fmt.Errorf("%w: %d bytes, shorter than a batch header", ErrCorrupt, len(b))
	}
	h.Magic = int8(b[OffMagic])
	if h.Magic != Magic {
		return h, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, h.Magic)
	}
	be := binary.BigEndian
	h.BaseOffset = int64(be.Uint64(b[OffBaseOffset:]))
	h.BatchLength = int32(be.Uint32(b[OffBatchLength:]))
	h.LeaderEpoch = int32(be.Uint32(b[OffLeaderEpoch:]))
	h.CRC = be.Uint32(b[OffCRC:])
	h.Attributes = int16(be.Uint16(b[OffAttributes:]))
	h.LastOffsetDelta = int32(be.Uint32(b[OffLastOffsetDelta:]))
	h.BaseTimestamp = int64(be.Uint64(b[OffBaseTimestamp:]))
	h.MaxTimestamp = int64(be.Uint64(b[OffMaxTimestamp:]))
	h.ProducerID = int64(be.Uint64(b[OffProducerID:]))
	h.ProducerEpoch = int16(be.Uint16(b[OffProducerEpoch:]))
	h.BaseSequence = int32(be.Uint32(b[OffBaseSequence:]))
	h.NumRecords = int32(be.Uint32(b[OffNumRecords:]))
	if h.BatchLength < minBatchLength || int64(h.BatchLength)+LogOverhead > MaxBatchSize {
		return h, fmt.Errorf("%w: batch length %d", ErrCorrupt, h.BatchLength)
	}
	return h, nil
}

// AppendBatch appends to dst a v2 batch of header h and records area recs
// (already compressed per h's attributes): the header's fields are written
// as h gives them but for Magic (always 2), BatchLength (len(recs)'s) and
// CRC (computed).
func AppendBatch(dst []byte, h Header, recs []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint64(b[OffBaseOffset:], uint64(h.BaseOffset))
	be.PutUint32(b[OffBatchLength:], uint32(HeaderSize-LogOverhead+len(recs)))
	be.PutUint32(b[OffLeaderEpoch:], uint32(h.LeaderEpoch))
	b[OffMagic] = Magic
	be.PutUint16(b[OffAttributes:], uint16(h.Attributes))
	be.PutUint32(b[OffLastOffsetDelta:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[OffBaseTimestamp:], uint64(h.BaseTimestamp))
	be.PutUint64(b[OffMaxTimestamp:], uint64(h.MaxTimestamp))
	be.PutUint64(b[OffProducerID:], uint64(h.ProducerID))
	be.PutUint16(b[OffProducerEpoch:], uint16(h.ProducerEpoch))
	be.PutUint32(b[OffBaseSequence:], uint32(h.BaseSequence))
	be.PutUint32(b[OffNumRecords:], uint32(h.NumRecords))
	dst = append(dst, recs...)
	SetCRC(dst[start:])
	return dst
}

// SetCRC recomputes and writes the CRC of one whole batch, after a change
// to a field it covers (attributes onwards).
func SetCRC(batch []byte) {
	binary.BigEndian.PutUint32(batch[OffCRC:], ComputeCRC(batch))
}

// ComputeCRC returns the CRC-32C of a whole batch's attributes..end.
func ComputeCRC(batch []byte) uint32 {
	return crc32.Checksum(batch[OffAttributes:], castagnoli)
}

// ValidateBatch fully checks one batch as received from the wire or read
// back from disk: b must be exactly one batch. It checks the magic, the
// length, the CRC-32C, the record count against the last offset delta and,
// for uncompressed batches, that the records' length prefixes tile the
// payload exactly. It never decompresses.
func ValidateBatch(b []byte) (Header, error) { return validateBatch(b, false) }

// ValidateStoredBatch is ValidateBatch for a batch read back from a
// segment, which compaction may have thinned: it has fewer records than
// its last offset delta says (0 < numRecords <= lastOffsetDelta+1), the
// offsets of the removed records left as a gap, as Kafka's cleaner does.
func ValidateStoredBatch(b []byte) (Header, error) { return validateBatch(b, true) }

func validateBatch(b []byte, compacted bool) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Size() != int64(len(b)) {
		return h, fmt.Errorf("%w: batch length %d but %d bytes", ErrCorrupt, h.BatchLength, len(b))
	}
	if crc := ComputeCRC(b); crc != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorrupt, h.CRC, crc)
	}
	if h.NumRecords <= 0 || h.LastOffsetDelta < 0 || int64(h.NumRecords) > int64(h.LastOffsetDelta)+1 ||
		(!compacted && int64(h.NumRecords) != int64(h.LastOffsetDelta)+1) {
		return h, fmt.Errorf("%w: %d records but last offset delta %d", ErrInvalidRecord, h.NumRecords, h.LastOffsetDelta)
	}
	if h.Compression() > 4 {
		return h, fmt.Errorf("%w: unknown compression codec %d", ErrInvalidRecord, h.Compression())
	}
	if h.Compression() == 0 {
		if err := walkRecords(b[HeaderSize:], h.NumRecords); err != nil {
			return h, err
		}
	}
	return h, nil
}

// walkRecords checks that n records' varint length prefixes exactly cover
// recs. Bounded by n, which ValidateBatch already tied to the batch size.
func walkRecords(recs []byte, n int32) error {
	if int64(n) > maxRecordsPerBatch || int64(n) > int64(len(recs)) {
		return fmt.Errorf("%w: %d records in %d bytes", ErrInvalidRecord, n, len(recs))
	}
	pos := 0
	for i := int32(0); i < n; i++ {
		l, w := binary.Varint(recs[pos:])
		if w <= 0 {
			return fmt.Errorf("%w: record %d: bad length varint", ErrInvalidRecord, i)
		}
		pos += w
		if l < 0 || l > int64(len(recs)-pos) {
			return fmt.Errorf("%w: record %d: length %d exceeds batch", ErrInvalidRecord, i, l)
		}
		pos += int(l)
	}
	if pos != len(recs) {
		return fmt.Errorf("%w: %d trailing bytes after %d records", ErrInvalidRecord, len(recs)-pos, n)
	}
	return nil
}

// SplitBatches cuts a records blob into its batches without trusting any
// length: each length is bounded by MaxBatchSize and by what remains. It
// returns the batches' [start,end) bounds within records. At most maxBatches
// are accepted (0 = no limit beyond the blob's size).
func SplitBatches(records []byte, maxBatches int) ([][2]int, error) {
	var out [][2]int
	pos := 0
	for pos < len(records) {
		if maxBatches > 0 && len(out) >= maxBatches {
			return nil, fmt.Errorf("%w: more than %d batches", ErrCorrupt, maxBatches)
		}
		rest := records[pos:]
		if len(rest) < LogOverhead+5 {
			return nil, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(rest))
		}
		if rest[OffMagic] != Magic {
			return nil, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, int8(rest[OffMagic]))
		}
		l := int64(int32(binary.BigEndian.Uint32(rest[OffBatchLength:])))
		if l < minBatchLength || l+LogOverhead > MaxBatchSize || l+LogOverhead > int64(len(rest)) {
			return nil, fmt.Errorf("%w: batch length %d with %d bytes left", ErrCorrupt, l, len(rest))
		}
		end := pos + int(l+LogOverhead)
		out = append(out, [2]int{pos, end})
		pos = end
	}
	return out, nil
}

// SetBaseOffset writes the base offset in place (not covered by the CRC).
func SetBaseOffset(batch []byte, off int64) {
	binary.BigEndian.PutUint64(batch[OffBaseOffset:], uint64(off))
}

// SetLeaderEpoch writes partitionLeaderEpoch in place (not covered by the CRC).
func SetLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[OffLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime stamps the batch as LogAppendTime with max timestamp ts
// and recomputes the CRC, as a Kafka broker does for such topics.
func SetLogAppendTime(batch []byte, ts int64) {
	be := binary.BigEndian
	attrs := be.Uint16(batch[OffAttributes:]) | AttrTimestampType
	be.PutUint16(batch[OffAttributes:], attrs)
	be.PutUint64(batch[OffMaxTimestamp:], uint64(ts))
	SetCRC(batch)
}

// RecordTimestamps calls fn with the index and absolute timestamp of each
// record of an uncompressed, already validated batch (ValidateBatch), in
// order, until fn returns false. Compressed batches are not opened here:
// it returns ErrInvalidRecord for them, and callers fall back to the
// header's base and max timestamps.
func RecordTimestamps(batch []byte, h Header, fn func(i int32, ts int64) bool) error {
	if h.Compression() != 0 {
		return fmt.Errorf("%w: compressed batch", ErrInvalidRecord)
	}
	recs := batch[HeaderSize:]
	pos := 0
	for i := int32(0); i < h.NumRecords && pos < len(recs); i++ {
		l, w := binary.Varint(recs[pos:])
		if w <= 0 || l < 2 || l > int64(len(recs)-pos-w) {
			return fmt.Errorf("%w: record %d: bad length", ErrInvalidRecord, i)
		}
		rec := recs[pos+w : pos+w+int(l)]
		// record: attributes int8, timestampDelta varlong, offsetDelta varint, ...
		delta, dw := binary.Varint(rec[1:])
		if dw <= 0 {
			return fmt.Errorf("%w: record %d: bad timestamp delta", ErrInvalidRecord, i)
		}
		if !fn(i, h.BaseTimestamp+delta) {
			return nil
		}
		pos += w + int(l)
	}
	return nil
}
