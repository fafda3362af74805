package groupcoord

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

// This file is the on-disk format of __consumer_offsets: Kafka's own key and
// value schemas (kmsg OffsetCommitKey/Value, GroupMetadataKey/Value), so
// that Kafka's tools read Strata's partitions and the reverse. The key's
// leading int16 tells the record type:
//
//	key version 0, 1  OffsetCommitKey    (group, topic, partition) -> OffsetCommitValue
//	key version 2     GroupMetadataKey   (group)                   -> GroupMetadataValue
//	a nil value is a tombstone: the offset or the group is gone.
//
// Records are written as ordinary uncompressed v2 batches (producer ID -1),
// at most maxRecordsBatchBytes each.

const (
	keyVersionOffset = 1 // on-disk format: key version written for offsets
	keyVersionGroup  = 2 // on-disk format: key version of GroupMetadataKey
	// valueVersionOffset 3 carries the leader epoch and no expire timestamp.
	valueVersionOffset = 3
	// valueVersionGroup 3 carries static members' instance IDs.
	valueVersionGroup = 3

	// maxRecordsBatchBytes keeps every batch we write under the default
	// max.message.bytes (1 MiB + 12) with room to spare.
	maxRecordsBatchBytes = 900 << 10
)

// ErrBadRecord is a record in __consumer_offsets that does not decode.
var ErrBadRecord = errors.New("groupcoord: bad __consumer_offsets record")

// record is one key/value pair to write; Value nil is a tombstone.
type record struct {
	Key, Value []byte
}

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: keyVersionOffset, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func offsetRecord(group, topic string, partition int32, o offsetEntry) record {
	v := kmsg.OffsetCommitValue{
		Version:         valueVersionOffset,
		Offset:          o.Offset,
		LeaderEpoch:     o.LeaderEpoch,
		Metadata:        o.Metadata,
		CommitTimestamp: o.CommitMs,
	}
	return record{Key: offsetKey(group, topic, partition), Value: v.AppendTo(nil)}
}

func offsetTombstone(group, topic string, partition int32) record {
	return record{Key: offsetKey(group, topic, partition)}
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: keyVersionGroup, Group: group}
	return k.AppendTo(nil)
}

func groupTombstone(group string) record { return record{Key: groupKey(group)} }

// buildBatches packs records into uncompressed v2 batches whose base
// offset and leader epoch the log stamps at append.
func buildBatches(recs []record, nowMs int64) [][]byte {
	var out [][]byte
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && (n == 0 || size+len(recs[n].Key)+len(recs[n].Value)+32 < maxRecordsBatchBytes) {
			size += len(recs[n].Key) + len(recs[n].Value) + 32
			n++
		}
		out = append(out, buildBatch(recs[:n], nowMs))
		recs = recs[n:]
	}
	return out
}

func buildBatch(recs []record, nowMs int64) []byte {
	var body []byte
	for i, r := range recs {
		body = appendRecord(body, kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value})
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                segment.Magic,
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       nowMs,
		MaxTimestamp:         nowMs,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              body,
	}
	raw := b.AppendTo(nil)
	// Length counts the bytes after itself: everything but offset+length.
	putInt32(raw[8:], int32(len(raw)-12))
	putInt32(raw[17:], int32(segment.ComputeCRC(raw)))
	return raw
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

func putInt32(b []byte, v int32) {
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

// decodedRecord is one record read back from __consumer_offsets.
type decodedRecord struct {
	Offset int64
	Key    []byte
	Value  []byte // nil = tombstone
	// ProducerID and Transactional describe the record's batch: a
	// transactional offset commit stays pending until its marker.
	ProducerID    int64
	Transactional bool
	// Control is the marker type of a control batch (0 abort, 1 commit),
	// -1 for a data record.
	Control int16
}

// maxRecordsPerBatch bounds the records decoded from one stored batch.
const maxRecordsPerBatch = 1 << 20

// decodeBatches parses whole stored batches, returning the records at or
// after from. Compressed batches are skipped (Strata never writes them
// here); a transaction marker is passed as one record with Control set.
func decodeBatches(raw []byte, from int64, fn func(decodedRecord) error) (next int64, err error) {
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
				if err := fn(decodedRecord{Offset: b.FirstOffset, ProducerID: b.ProducerID, Control: ct}); err != nil {
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
			if err := fn(decodedRecord{Offset: off, Key: r.Key, Value: r.Value, ProducerID: b.ProducerID, Transactional: txnl, Control: -1}); err != nil {
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
