package txncoord

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/coord"
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
)

// ErrBadRecord is a __transaction_state record that does not decode.
var ErrBadRecord = coord.ErrBadRecord

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
type record = coord.Record

// buildBatches packs records into uncompressed v2 batches.
func buildBatches(recs []record, nowMs int64) [][]byte { return coord.BuildBatches(recs, nowMs) }

func buildBatch(recs []record, nowMs int64) []byte { return coord.BuildBatch(recs, nowMs) }

// decodeBatches walks whole stored batches, calling fn for each data
// record at or after from; it returns the offset after the last batch.
// Control batches are skipped (never written here).
func decodeBatches(raw []byte, from int64, fn func(off int64, key, value []byte)) (int64, error) {
	return coord.DecodeBatches(raw, from, func(r coord.Decoded) error {
		if r.Control < 0 {
			fn(r.Offset, r.Key, r.Value)
		}
		return nil
	})
}
