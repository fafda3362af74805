package txncoord

import (
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/segment"
)

// This file is the on-disk format of __transaction_state: Kafka's own
// schemas (kmsg TxnMetadataKey / TxnMetadataValue), so Kafka's tools read
// Strata's partitions and the reverse.
//
//	key   int16 version = 0, string transactional_id
//	value int16 version = 0, int64 producer_id, int16 producer_epoch,
//	      int32 timeout_ms, int8 state, [topic, [partition]],
//	      int64 last_update_ms, int64 start_ms
//	a nil value is a tombstone: the transactional ID expired.
//
// States (int8, Kafka's TransactionState ids): 0 Empty, 1 Ongoing,
// 2 PrepareCommit, 3 PrepareAbort, 4 CompleteCommit, 5 CompleteAbort,
// 6 Dead, 7 PrepareEpochFence. Records are written as ordinary
// uncompressed v2 batches (producer ID -1) through Broker.Produce.

const (
	keyVersion   = 0 // on-disk format
	valueVersion = 0 // on-disk format; v1 (flexible, KIP-890 tags) is read too
	// maxTxnPartitions bounds the partitions of one transaction (and of a
	// decoded value): far above what a client adds, small enough to keep
	// one record well under max.message.bytes.
	maxTxnPartitions = 10000
	// maxRecordBatchBytes keeps a batch under the default max.message.bytes.
	maxRecordBatchBytes = 900 << 10
)

// ErrBadRecord is a __transaction_state record that does not decode.
var ErrBadRecord = errors.New("txncoord: bad __transaction_state record")

// Transaction states (on-disk format: Kafka's ids).
const (
	stateEmpty          int8 = 0
	stateOngoing        int8 = 1
	statePrepareCommit  int8 = 2
	statePrepareAbort   int8 = 3
	stateCompleteCommit int8 = 4
	stateCompleteAbort  int8 = 5
	stateDead           int8 = 6
	statePrepareFence   int8 = 7
)

// StateName is Kafka's name of a state, as DescribeTransactions and
// ListTransactions report it.
func StateName(s int8) string {
	switch s {
	case stateEmpty:
		return "Empty"
	case stateOngoing:
		return "Ongoing"
	case statePrepareCommit:
		return "PrepareCommit"
	case statePrepareAbort:
		return "PrepareAbort"
	case stateCompleteCommit:
		return "CompleteCommit"
	case stateCompleteAbort:
		return "CompleteAbort"
	case stateDead:
		return "Dead"
	case statePrepareFence:
		return "PrepareEpochFence"
	}
	return "Unknown"
}

// tp is one partition of a transaction.
type tp struct {
	topic     string
	partition int32
}

func encodeKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: keyVersion, TransactionalID: id}
	return k.AppendTo(nil)
}

func encodeValue(m *txnMeta) []byte {
	v := kmsg.TxnMetadataValue{
		Version:             valueVersion,
		PreviousProducerID:  -1,
		NextProducerID:      -1,
		NextProducerEpoch:   -1,
		ProducerID:          m.pid,
		ProducerEpoch:       m.epoch,
		TimeoutMillis:       m.timeoutMs,
		State:               kmsg.TransactionState(m.state),
		LastUpdateTimestamp: m.lastUpdateMs,
		StartTimestamp:      m.startMs,
	}
	if m.tv2 || m.nextPid >= 0 {
		// Version 1 (flexible, Kafka 4.0) carries KIP-890 part 2's tags.
		v.Version, v.ClientTransactionVersion, v.NextProducerID = 1, 2, m.nextPid
	}
	for _, t := range m.sortedTopics() {
		ps := make([]int32, 0, len(m.partitions[t]))
		for p := range m.partitions[t] {
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: t, Partitions: ps})
	}
	return v.AppendTo(nil)
}

// decodeRecord decodes one stored record: the transactional ID and its
// state (nil for a tombstone). Never panics on bad input.
func decodeRecord(key, value []byte) (string, *txnMeta, error) {
	if len(key) < 2 {
		return "", nil, fmt.Errorf("%w: short key", ErrBadRecord)
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return "", nil, fmt.Errorf("%w: key: %v", ErrBadRecord, err)
	}
	if k.Version != keyVersion {
		return "", nil, fmt.Errorf("%w: key version %d", ErrBadRecord, k.Version)
	}
	if value == nil {
		return k.TransactionalID, nil, nil
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return "", nil, fmt.Errorf("%w: value: %v", ErrBadRecord, err)
	}
	if v.Version < 0 || v.Version > 1 {
		return "", nil, fmt.Errorf("%w: value version %d", ErrBadRecord, v.Version)
	}
	if st := int8(v.State); st < stateEmpty || st > statePrepareFence {
		return "", nil, fmt.Errorf("%w: state %d", ErrBadRecord, st)
	}
	m := &txnMeta{
		id: k.TransactionalID, pid: v.ProducerID, epoch: v.ProducerEpoch,
		lastPid: -1, lastEpoch: -1, nextPid: -1,
		timeoutMs: v.TimeoutMillis, state: int8(v.State),
		lastUpdateMs: v.LastUpdateTimestamp, startMs: v.StartTimestamp,
		partitions: map[string]map[int32]struct{}{},
	}
	if v.Version >= 1 {
		m.tv2 = v.ClientTransactionVersion >= 2
		if v.NextProducerID >= 0 {
			m.nextPid = v.NextProducerID
		}
	}
	n := 0
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			if n++; n > maxTxnPartitions {
				return "", nil, fmt.Errorf("%w: more than %d partitions", ErrBadRecord, maxTxnPartitions)
			}
			m.add(t.Topic, p)
		}
	}
	return k.TransactionalID, m, nil
}

// record is one key/value pair to write; Value nil is a tombstone.
type record struct{ Key, Value []byte }

// buildBatches packs records into uncompressed v2 batches.
func buildBatches(recs []record, nowMs int64) [][]byte {
	var out [][]byte
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && (n == 0 || size+len(recs[n].Key)+len(recs[n].Value)+32 < maxRecordBatchBytes) {
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
		kr := kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
		inner := kr.AppendTo(nil)[1:] // a zero Length encodes as one varint byte
		body = appendVarint(body, int64(len(inner)))
		body = append(body, inner...)
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: segment.Magic,
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: nowMs, MaxTimestamp: nowMs,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(recs)), Records: body,
	}
	raw := b.AppendTo(nil)
	putInt32(raw[8:], int32(len(raw)-12))
	putInt32(raw[17:], int32(segment.ComputeCRC(raw)))
	return raw
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

// maxRecordsPerBatch bounds the records decoded from one stored batch.
const maxRecordsPerBatch = 1 << 20

// decodeBatches walks whole stored batches, calling fn for each record at
// or after from; it returns the offset after the last batch. Compressed
// and control batches are skipped (never written here).
func decodeBatches(raw []byte, from int64, fn func(off int64, key, value []byte)) (int64, error) {
	next := from
	spans, err := segment.SplitBatches(raw, 1<<20)
	if err != nil {
		return next, fmt.Errorf("%w: %w", ErrBadRecord, err)
	}
	for _, sp := range spans {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw[sp[0]:sp[1]]); err != nil {
			return next, fmt.Errorf("%w: %w", ErrBadRecord, err)
		}
		if last := b.FirstOffset + int64(b.LastOffsetDelta); last+1 > next {
			next = last + 1
		}
		if b.Attributes&(segment.AttrCompressionMask|segment.AttrControl) != 0 || b.NumRecords <= 0 || b.NumRecords > maxRecordsPerBatch {
			continue
		}
		recs := b.Records
		for i := int32(0); i < b.NumRecords && len(recs) > 0; i++ {
			l, n := readVarint(recs)
			if n <= 0 || l < 0 || int64(len(recs)-n) < l {
				return next, fmt.Errorf("%w: record length", ErrBadRecord)
			}
			end := n + int(l)
			var r kmsg.Record
			if err := r.ReadFrom(recs[:end]); err != nil {
				return next, fmt.Errorf("%w: %w", ErrBadRecord, err)
			}
			recs = recs[end:]
			if off := b.FirstOffset + int64(r.OffsetDelta); off >= from {
				fn(off, r.Key, r.Value)
			}
		}
	}
	return next, nil
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
