package retention

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/strata-io/strata/segment"
)

// maxRecordsBytes bounds the decompressed records area of one batch the
// cleaner opens (Kafka's largest batch is max.message.bytes, compressed;
// compression ratios beyond 64x are not real data).
const maxRecordsBytes = 64 << 20

// keyHash identifies a record key in the cleaner's offset map (Kafka's
// SkimpyOffsetMap keeps an MD5 of the key; SHA-256 truncated to 16 bytes
// makes a collision, which would drop a live record, not a concern).
type keyHash [16]byte

func hashKey(k []byte) keyHash {
	sum := sha256.Sum256(k)
	var h keyHash
	copy(h[:], sum[:16])
	return h
}

// record is one record of a batch, as the cleaner sees it.
type record struct {
	raw         []byte // the whole record: length varint and body
	offsetDelta int32
	tsDelta     int64
	key         []byte // nil = no key
	tombstone   bool   // null value
	value       []byte // nil for a tombstone
}

// parseRecords splits a decompressed records area into n records.
func parseRecords(area []byte, n int32) ([]record, error) {
	if n < 0 || int64(n) > int64(len(area)) {
		return nil, fmt.Errorf("%w: %d records in %d bytes", ErrCorruptBatch, n, len(area))
	}
	out := make([]record, 0, n)
	pos := 0
	for i := int32(0); i < n; i++ {
		l, w := binary.Varint(area[pos:])
		if w <= 0 || l < 1 || l > int64(len(area)-pos-w) {
			return nil, fmt.Errorf("%w: record %d: bad length", ErrCorruptBatch, i)
		}
		body := area[pos+w : pos+w+int(l)]
		r := record{raw: area[pos : pos+w+int(l)]}
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
			return nil, fmt.Errorf("%w: record %d: bad header", ErrCorruptBatch, i)
		}
		r.tsDelta, r.offsetDelta = ts, int32(od)
		if kl >= 0 {
			r.key = body[p : p+int(kl)]
			p += int(kl)
		}
		vl, ok := next()
		if !ok || vl < -1 || vl > int64(len(body)-p) {
			return nil, fmt.Errorf("%w: record %d: bad value length", ErrCorruptBatch, i)
		}
		r.tombstone = vl < 0
		if vl >= 0 {
			r.value = body[p : p+int(vl)]
		}
		out = append(out, r)
		pos += w + int(l)
	}
	return out, nil
}

// batchRecords opens a stored batch: its header and its records.
func batchRecords(b []byte) (segment.Header, []record, error) {
	h, err := segment.ParseHeader(b)
	if err != nil {
		return h, nil, fmt.Errorf("%w: %v", ErrCorruptBatch, err)
	}
	if h.Size() != int64(len(b)) {
		return h, nil, fmt.Errorf("%w: batch of %d bytes says %d", ErrCorruptBatch, len(b), h.Size())
	}
	area, err := decompress(h.Compression(), b[segment.HeaderSize:], maxRecordsBytes)
	if err != nil {
		return h, nil, err
	}
	recs, err := parseRecords(area, h.NumRecords)
	return h, recs, err
}

// isControl reports a control batch (transaction marker).
func isControl(h *segment.Header) bool { return h.Attributes&(1<<5) != 0 }

// rebuildBatch writes a batch holding only the kept records of the stored
// batch b: the header is kept (base offset, last offset delta, timestamps,
// producer fields: offsets keep their gaps and producer state stays
// derivable), the records count, length and CRC are recomputed, and the
// records are compressed again with the batch's codec.
func rebuildBatch(b []byte, h segment.Header, kept []record) ([]byte, error) {
	var area []byte
	for _, r := range kept {
		area = append(area, r.raw...)
	}
	body, err := compress(h.Compression(), area)
	if err != nil {
		return nil, fmt.Errorf("%w: recompress: %v", ErrCorruptBatch, err)
	}
	out := make([]byte, segment.HeaderSize, segment.HeaderSize+len(body))
	copy(out, b[:segment.HeaderSize])
	out = append(out, body...)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[57:], uint32(len(kept)))
	binary.BigEndian.PutUint32(out[17:], segment.ComputeCRC(out))
	return out, nil
}

// ErrMissingKey is CheckKeys' error: a record without a key cannot be
// compacted (Kafka answers INVALID_RECORD).
var ErrMissingKey = errors.New("retention: compacted topic cannot accept a record without a key")

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
// ErrMissingKey) names the first keyless record; ErrCorruptBatch when a
// batch does not open.
func CheckKeys(records []byte) error {
	spans, err := segment.SplitBatches(records, 0)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptBatch, err)
	}
	for _, sp := range spans {
		b := records[sp[0]:sp[1]]
		h, err := segment.ParseHeader(b)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorruptBatch, err)
		}
		if isControl(&h) {
			continue
		}
		_, recs, err := batchRecords(b)
		if err != nil {
			return err
		}
		for i, r := range recs {
			if r.key == nil {
				return &KeyError{Index: int32(i)}
			}
		}
	}
	return nil
}
