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

// ParseRecords splits a decompressed records area into n records.
func ParseRecords(area []byte, n int32) ([]Record, error) {
	if n < 0 || int64(n) > int64(len(area)) {
		return nil, fmt.Errorf("%w: %d records in %d bytes", ErrUndecodable, n, len(area))
	}
	out := make([]Record, 0, n)
	pos := 0
	for i := int32(0); i < n; i++ {
		l, w := binary.Varint(area[pos:])
		if w <= 0 || l < 1 || l > int64(len(area)-pos-w) {
			return nil, fmt.Errorf("%w: record %d: bad length", ErrUndecodable, i)
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
			return nil, fmt.Errorf("%w: record %d: bad header", ErrUndecodable, i)
		}
		r.TimestampDelta, r.OffsetDelta = ts, int32(od)
		if kl >= 0 {
			r.Key = body[p : p+int(kl)]
			p += int(kl)
		}
		vl, ok := next()
		if !ok || vl < -1 || vl > int64(len(body)-p) {
			return nil, fmt.Errorf("%w: record %d: bad value length", ErrUndecodable, i)
		}
		r.Tombstone = vl < 0
		if vl >= 0 {
			r.Value = body[p : p+int(vl)]
		}
		out = append(out, r)
		pos += w + int(l)
	}
	return out, nil
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
// batches (already validated) has a key; compressed batches are opened
// (bounded). Control batches are not checked. A *KeyError (wrapping
// ErrMissingKey) names the first keyless record; ErrUndecodable when a
// batch does not open.
func CheckKeys(records []byte) error {
	spans, err := SplitBatches(records, 0)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUndecodable, err)
	}
	for _, sp := range spans {
		b := records[sp[0]:sp[1]]
		h, err := ParseHeader(b)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUndecodable, err)
		}
		if h.IsControl() {
			continue
		}
		_, recs, err := OpenBatch(b)
		if err != nil {
			return err
		}
		for i, r := range recs {
			if r.Key == nil {
				return &KeyError{Index: int32(i)}
			}
		}
	}
	return nil
}

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
