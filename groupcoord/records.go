package groupcoord

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/coord"
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
// at most coord.MaxBatchBytes each.

const (
	keyVersionOffset = 1 // on-disk format: key version written for offsets
	keyVersionGroup  = 2 // on-disk format: key version of GroupMetadataKey
	// valueVersionOffset 3 carries the leader epoch and no expire timestamp.
	valueVersionOffset = 3
	// valueVersionGroup 3 carries static members' instance IDs.
	valueVersionGroup = 3
)

// ErrBadRecord is a record in __consumer_offsets that does not decode.
var ErrBadRecord = coord.ErrBadRecord

// record is one key/value pair to write; Value nil is a tombstone.
type record = coord.Record

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
func buildBatches(recs []record, nowMs int64) [][]byte { return coord.BuildBatches(recs, nowMs) }

func buildBatch(recs []record, nowMs int64) []byte { return coord.BuildBatch(recs, nowMs) }

// decodedRecord is one record read back from __consumer_offsets.
type decodedRecord = coord.Decoded

// decodeBatches parses whole stored batches, returning the records at or
// after from (coord.DecodeBatches).
func decodeBatches(raw []byte, from int64, fn func(decodedRecord) error) (next int64, err error) {
	return coord.DecodeBatches(raw, from, fn)
}
