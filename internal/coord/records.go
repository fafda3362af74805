package coord

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

// This file is the batch format every coordinator writes to its internal
// topic and reads back at load: ordinary uncompressed v2 batches whose
// base offset and leader epoch the log stamps at append, at most
// MaxBatchBytes each; the keys and values inside are the user's (Kafka's
// record schemas of that topic).

// MaxBatchBytes keeps every batch a coordinator writes under the default
// max.message.bytes (1 MiB + 12) with room to spare.
const MaxBatchBytes = 900 << 10

// maxRecordsPerBatch bounds the records decoded from one stored batch.
const maxRecordsPerBatch = 1 << 20

// ErrBadRecord is a stored batch or record that does not decode.
var ErrBadRecord = errors.New("coord: bad coordinator record")

// Record is one key/value pair to write; Value nil is a tombstone.
type Record struct {
	Key, Value []byte
}

// Decoded is one record read back from a coordinator partition.
type Decoded struct {
	Offset int64
	Key    []byte
	Value  []byte // nil = tombstone
	// ProducerID and Transactional describe the record's batch (a
	// transactional offset commit stays pending until its marker).
	ProducerID    int64
	Transactional bool
	// Control is the marker type of a control batch (0 abort, 1 commit),
	// -1 for a data record.
	Control int16
}

// BuildBatches packs records into batches of at most MaxBatchBytes (a
// single larger record gets a batch of its own).
func BuildBatches(recs []Record, nowMs int64) [][]byte {
	var out [][]byte
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && (n == 0 || size+len(recs[n].Key)+len(recs[n].Value)+32 < MaxBatchBytes) {
			size += len(recs[n].Key) + len(recs[n].Value) + 32
			n++
		}
		out = append(out, BuildBatch(recs[:n], nowMs))
		recs = recs[n:]
	}
	return out
}

// BuildBatch encodes recs as one non-transactional batch (producer ID -1).
func BuildBatch(recs []Record, nowMs int64) []byte {
	return buildBatch(recs, nowMs, -1, -1, 0)
}

// BuildTxnBatch encodes recs as one transactional batch of producer pid
// at epoch (its marker decides the records later).
func BuildTxnBatch(recs []Record, nowMs, pid int64, epoch int16) []byte {
	return buildBatch(recs, nowMs, pid, epoch, segment.AttrTransactional)
}

func buildBatch(recs []Record, nowMs, pid int64, epoch int16, attrs int16) []byte {
	var body []byte
	for i, r := range recs {
		body = appendRecord(body, kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value})
	}
	return segment.AppendBatch(nil, segment.Header{
		LeaderEpoch:     -1,
		Attributes:      attrs,
		LastOffsetDelta: int32(len(recs) - 1),
		BaseTimestamp:   nowMs,
		MaxTimestamp:    nowMs,
		ProducerID:      pid,
		ProducerEpoch:   epoch,
		BaseSequence:    -1,
		NumRecords:      int32(len(recs)),
	}, body)
}

// appendRecord encodes one v2 record with its true varint length.
func appendRecord(dst []byte, r kmsg.Record) []byte {
	r.Length = 0
	inner := r.AppendTo(nil)[1:] // a zero Length encodes as one varint byte
	dst = appendVarint(dst, int64(len(inner)))
	return append(dst, inner...)
}

func appendVarint(dst []byte, v int64) []byte {
	u := uint64((v << 1) ^ (v >> 63))
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// DecodeBatches parses whole stored batches, calling fn for each record at
// or after from, and returns the offset after the last batch. Compressed
// batches are skipped (coordinators never write them); a transaction
// marker is passed as one record with Control set. An error of fn stops
// the walk and is returned.
func DecodeBatches(raw []byte, from int64, fn func(Decoded) error) (next int64, err error) {
	next = from
	spans, err := segment.SplitBatches(raw, 1<<20)
	if err != nil {
		return next, fmt.Errorf("%w: %w", ErrBadRecord, err)
	}
	for _, sp := range spans {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw[sp[0]:sp[1]]); err != nil {
			return next, fmt.Errorf("%w: %w", ErrBadRecord, err)
		}
		last := b.FirstOffset + int64(b.LastOffsetDelta)
		if last+1 > next {
			next = last + 1
		}
		if b.Attributes&segment.AttrControl != 0 {
			if b.FirstOffset < from {
				continue
			}
			if ct := log.ControlType(raw[sp[0]:sp[1]]); ct >= 0 {
				if err := fn(Decoded{Offset: b.FirstOffset, ProducerID: b.ProducerID, Control: ct}); err != nil {
					return next, err
				}
			}
			continue
		}
		if b.Attributes&segment.AttrCompressionMask != 0 || b.NumRecords <= 0 || b.NumRecords > maxRecordsPerBatch {
			continue
		}
		txnl := b.Attributes&segment.AttrTransactional != 0
		recs := b.Records
		for i := int32(0); i < b.NumRecords && len(recs) > 0; i++ {
			var r kmsg.Record
			n, err := readRecord(recs, &r)
			if err != nil {
				return next, err
			}
			recs = recs[n:]
			off := b.FirstOffset + int64(r.OffsetDelta)
			if off < from {
				continue
			}
			if err := fn(Decoded{Offset: off, Key: r.Key, Value: r.Value, ProducerID: b.ProducerID, Transactional: txnl, Control: -1}); err != nil {
				return next, err
			}
		}
	}
	return next, nil
}

// readRecord decodes one length-prefixed v2 record, returning its size.
func readRecord(src []byte, r *kmsg.Record) (int, error) {
	l, n := readVarint(src)
	if n <= 0 || l < 0 || int64(len(src)-n) < l {
		return 0, fmt.Errorf("%w: record length", ErrBadRecord)
	}
	end := n + int(l)
	if err := r.ReadFrom(src[:end]); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadRecord, err)
	}
	return end, nil
}

func readVarint(b []byte) (int64, int) {
	var u uint64
	for i := 0; i < len(b) && i < 10; i++ {
		u |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
	}
	return 0, -1
}

// javaStringHashCode is Java's String.hashCode over UTF-16 code units,
// which Kafka uses to place a key: the coordinator partition must match
// Kafka's so that tools computing it agree.
func javaStringHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// PartitionFor is the coordinator partition of a key (group ID,
// transactional ID, share-group ID) among n: abs(hashCode) % n, with
// Kafka's Utils.abs (MinInt32 maps to 0).
func PartitionFor(key string, n int32) int32 {
	h := javaStringHashCode(key)
	if h == -2147483648 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}
