package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxRecordsBytes bounds the decompressed records area of one batch that
// OpenBatch opens (Kafka's largest batch is max.message.bytes, compressed;
// compression ratios beyond 64x are not real data).
const MaxRecordsBytes = 64 << 20

// Record is one record of a batch, parsed (on-wire format v2).
type Record struct {
	Raw            []byte // the whole record: length varint and body
	OffsetDelta    int32
	TimestampDelta int64
	Key            []byte // nil = no key
	Tombstone      bool   // null value
	Value          []byte // nil for a tombstone
}

// minRecordLen is the smallest record on the wire: a length varint and
// attributes, timestamp delta, offset delta, key length, value length and
// header count of one byte each.
const minRecordLen = 7

// ParseRecords splits a decompressed records area into n records. The
// slice is sized from what area can hold, never from n alone.
func ParseRecords(area []byte, n int32) ([]Record, error) {
	if n < 0 || int64(n) > int64(len(area)) {
		return nil, fmt.Errorf("%w: %d records in %d bytes", ErrUndecodable, n, len(area))
	}
	out := make([]Record, 0, min(int(n), len(area)/minRecordLen+1))
	err := WalkRecords(area, n, func(_ int32, r Record) bool {
		out = append(out, r)
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WalkRecords calls fn with each of the n records of a decompressed
// records area, in order, until fn returns false; it allocates nothing.
// A record that does not parse, or an area that ends before n records,
// is ErrUndecodable.
func WalkRecords(area []byte, n int32, fn func(i int32, r Record) bool) error {
	if n < 0 || int64(n) > int64(len(area)) {
		return fmt.Errorf("%w: %d records in %d bytes", ErrUndecodable, n, len(area))
	}
	pos := 0
	for i := int32(0); i < n; i++ {
		l, w := binary.Varint(area[pos:])
		if w <= 0 || l < 1 || l > int64(len(area)-pos-w) {
			return fmt.Errorf("%w: record %d: bad length", ErrUndecodable, i)
		}
		body := area[pos+w : pos+w+int(l)]
		r := Record{Raw: area[pos : pos+w+int(l)]}
		p := 1 // attributes
		next := func() (int64, bool) {
			if p >= len(body) {
				return 0, false
			}
			v, vw := binary.Varint(body[p:])
			if vw <= 0 {
				return 0, false
			}
			p += vw
			return v, true
		}
		ts, ok1 := next()
		od, ok2 := next()
		kl, ok3 := next()
		if !ok1 || !ok2 || !ok3 || kl < -1 || kl > int64(len(body)-p) {
			return fmt.Errorf("%w: record %d: bad header", ErrUndecodable, i)
		}
		r.TimestampDelta, r.OffsetDelta = ts, int32(od)
		if kl >= 0 {
			r.Key = body[p : p+int(kl)]
			p += int(kl)
		}
		vl, ok := next()
		if !ok || vl < -1 || vl > int64(len(body)-p) {
			return fmt.Errorf("%w: record %d: bad value length", ErrUndecodable, i)
		}
		r.Tombstone = vl < 0
		if vl >= 0 {
			r.Value = body[p : p+int(vl)]
		}
		pos += w + int(l)
		if !fn(i, r) {
			return nil
		}
	}
	return nil
}

// OpenBatch opens one whole stored batch b: its header and its records,
// decompressed (at most MaxRecordsBytes).
func OpenBatch(b []byte) (Header, []Record, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, nil, fmt.Errorf("%w: %v", ErrUndecodable, err)
	}
	if h.Size() != int64(len(b)) {
		return h, nil, fmt.Errorf("%w: batch of %d bytes says %d", ErrUndecodable, len(b), h.Size())
	}
	area, err := Decompress(h.Compression(), b[HeaderSize:], MaxRecordsBytes)
	if err != nil {
		return h, nil, err
	}
	recs, err := ParseRecords(area, h.NumRecords)
	return h, recs, err
}

// ErrMissingKey is CheckKeys' error: a record without a key cannot be
// compacted (Kafka answers INVALID_RECORD).
var ErrMissingKey = errors.New("segment: compacted topic cannot accept a record without a key")

// KeyError names the keyless record CheckKeys found (its index in its
// batch, for Produce's per-record errors).
type KeyError struct {
	Index int32
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("%v (record %d of its batch)", ErrMissingKey, e.Index)
}

func (e *KeyError) Unwrap() error { return ErrMissingKey }

// RecordIndex is the index of the keyless record in its batch.
func (e *KeyError) RecordIndex() int32 { return e.Index }

// CheckKeys checks, as Kafka's LogValidator does for a topic whose
// cleanup.policy contains compact, that every record of the produced
// batches has a key. Each batch is checked as Kafka's log checks it
// before anything is decompressed: its size against maxMessageBytes
// (ErrBatchTooLarge), then its length, CRC and record count
// (ValidateBatch's errors); only then is it opened, its records at most
// DecompressLimit(maxMessageBytes) bytes (ErrRecordsTooLarge) and walked
// without a slice sized from the count the batch claims. Control batches
// are not opened. A *KeyError (wrapping ErrMissingKey) names the first
// keyless record; ErrUndecodable when a batch does not open.
func CheckKeys(records []byte, maxMessageBytes int) error {
	spans, err := SplitBatches(records, 0)
	if err != nil {
		return err
	}
	limit := DecompressLimit(maxMessageBytes)
	for _, sp := range spans {
		b := records[sp[0]:sp[1]]
		if maxMessageBytes > 0 && len(b) > maxMessageBytes {
			return fmt.Errorf("%w: batch of %d bytes, max.message.bytes %d", ErrBatchTooLarge, len(b), maxMessageBytes)
		}
		h, err := ValidateBatch(b)
		if err != nil {
			return err
		}
		if h.IsControl() {
			continue
		}
		var missing int32 = -1
		decompressSlots <- struct{}{}
		area, err := Decompress(h.Compression(), b[HeaderSize:], limit)
		if err == nil {
			err = WalkRecords(area, h.NumRecords, func(i int32, r Record) bool {
				if r.Key == nil {
					missing = i
					return false
				}
				return true
			})
		}
		<-decompressSlots
		if err != nil {
			return err
		}
		if missing >= 0 {
			return &KeyError{Index: missing}
		}
	}
	return nil
}

// decompressSlots bounds the produced batches CheckKeys holds decompressed
// at once, broker-wide, so what they hold is at most
// cap(decompressSlots) x DecompressLimit however many clients produce.
var decompressSlots = make(chan struct{}, 2)

// ErrBatchTooLarge is CheckKeys' error for a batch larger than
// max.message.bytes (Kafka's MESSAGE_TOO_LARGE).
var ErrBatchTooLarge = errors.New("segment: batch larger than max.message.bytes")

// RecordTimes is the offset and timestamp of every record of one stored
// batch, in order.
type RecordTimes struct {
	Offsets    []int64
	Timestamps []int64
}

// BatchRecordTimes opens the stored batch at the start of b (decompressing
// it) and returns each record's offset and timestamp: ListOffsets answers
// a timestamp query with a record, not a batch, as Kafka does
// (FileRecords.searchForTimestamp, RecordBatch.offsetOfMaxTimestamp). A
// LogAppendTime batch gives every record the batch's max timestamp.
func BatchRecordTimes(b []byte) (RecordTimes, error) {
	var rt RecordTimes
	h, err := ParseHeader(b)
	if err != nil {
		return rt, fmt.Errorf("%w: %v", ErrUndecodable, err)
	}
	if h.Size() > int64(len(b)) {
		return rt, fmt.Errorf("%w: batch of %d bytes holds %d", ErrUndecodable, h.Size(), len(b))
	}
	_, recs, err := OpenBatch(b[:h.Size()])
	if err != nil {
		return rt, err
	}
	rt.Offsets = make([]int64, len(recs))
	rt.Timestamps = make([]int64, len(recs))
	for i, r := range recs {
		rt.Offsets[i] = h.BaseOffset + int64(r.OffsetDelta)
		rt.Timestamps[i] = h.BaseTimestamp + r.TimestampDelta
		if h.IsLogAppendTime() {
			rt.Timestamps[i] = h.MaxTimestamp
		}
	}
	return rt, nil
}
