package log

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/strata-io/strata/segment"
)

// This file is the contract the rest of Strata codes against. The
// implementation lives in partition.go, manager.go, producer_state.go and
// waiters.go. Exported signatures here may grow but must not change shape
// without updating every caller (protocol, replication).

// Errors returned by Partition. The protocol layer maps them to Kafka codes
// in one table (protocol/errors.go).
var (
	ErrClosed               = errors.New("log: partition closed")
	ErrCorruptBatch         = errors.New("log: corrupt record batch")                // CORRUPT_MESSAGE
	ErrInvalidRecord        = errors.New("log: invalid record")                      // INVALID_RECORD
	ErrUnsupportedMagic     = errors.New("log: unsupported message format")          // UNSUPPORTED_FOR_MESSAGE_FORMAT
	ErrBatchTooLarge        = errors.New("log: batch larger than max.message.bytes") // MESSAGE_TOO_LARGE
	ErrInvalidTimestamp     = errors.New("log: timestamp out of range")              // INVALID_TIMESTAMP
	ErrOffsetOutOfRange     = errors.New("log: offset out of range")                 // OFFSET_OUT_OF_RANGE
	ErrOutOfOrderSequence   = errors.New("log: out of order sequence number")        // OUT_OF_ORDER_SEQUENCE_NUMBER
	ErrDuplicateSequence    = errors.New("log: duplicate sequence number")           // answered as success with the original offset
	ErrInvalidProducerEpoch = errors.New("log: invalid producer epoch")              // INVALID_PRODUCER_EPOCH
	ErrUnknownProducerID    = errors.New("log: unknown producer id")                 // UNKNOWN_PRODUCER_ID
	// ErrTransactionCoordinatorFenced: a transaction marker from a
	// coordinator older than the one that wrote the producer's last
	// marker (TRANSACTION_COORDINATOR_FENCED).
	ErrTransactionCoordinatorFenced = errors.New("log: transaction coordinator fenced")
	ErrStorage                      = errors.New("log: storage error") // KAFKA_STORAGE_ERROR
)

// Config is the per-partition configuration, derived from topic configs
// (retention package) and broker defaults. Zero values mean "use the
// default" as documented on each field.
type Config struct {
	SegmentBytes          int64         // segment.bytes; roll when the active segment would exceed it (default 1 GiB)
	SegmentMs             time.Duration // segment.ms / log.roll.ms; roll when the active segment is older (default 7 days)
	SegmentIndexBytes     int32         // segment.index.bytes; preallocated index size (default 10 MiB)
	IndexIntervalBytes    int32         // index.interval.bytes; bytes between sparse index entries (default 4096)
	FlushIntervalMessages int64         // flush.messages; fsync after this many messages (0 or MaxInt64 = never by count)
	FlushInterval         time.Duration // flush.ms; fsync when the oldest unflushed write is older (0 = never by time)
	MaxMessageBytes       int32         // max.message.bytes; largest batch accepted (default 1 MiB + 12)
	// MessageTimestampType is "CreateTime" or "LogAppendTime".
	MessageTimestampType string
	// TimestampBeforeMaxMs / TimestampAfterMaxMs bound CreateTime timestamps
	// (message.timestamp.before.max.ms / after.max.ms); 0 = unbounded.
	TimestampBeforeMaxMs int64
	TimestampAfterMaxMs  int64
	// Cleanup is the retention and compaction policy. The log does not
	// act on it; package retention's cleaner reads it from Config() and
	// deletes or compacts segments through the Partition's methods. The
	// zero value enforces nothing.
	Cleanup CleanupConfig
}

// CleanupConfig is a partition's retention and compaction policy, in
// Kafka's units and with Kafka's meanings (-1 = unlimited), filled by
// retention.LogConfig from the topic configs and broker defaults.
type CleanupConfig struct {
	Delete  bool // cleanup.policy contains delete: retention.ms / retention.bytes apply
	Compact bool // cleanup.policy contains compact
	// RetentionMs (retention.ms): a segment whose newest record is older
	// than this is deleted; -1 = no time limit.
	RetentionMs int64
	// RetentionBytes (retention.bytes): old segments are deleted while the
	// partition is larger than this; -1 = no size limit.
	RetentionBytes int64
	// DeleteRetentionMs (delete.retention.ms): how long a compacted
	// topic keeps tombstones (and transaction markers) once cleaned.
	DeleteRetentionMs int64
	// MinCleanableDirtyRatio (min.cleanable.dirty.ratio): dirty bytes /
	// total bytes above which the partition is compacted.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs / MaxCompactionLagMs (min/max.compaction.lag.ms):
	// a record is not compacted before it is MinCompactionLagMs old; a
	// partition whose oldest dirty record is MaxCompactionLagMs old is
	// compacted whatever its dirty ratio. Max <= 0 = no maximum.
	MinCompactionLagMs int64
	MaxCompactionLagMs int64
}

// AppendResult is what a successful Append reports.
type AppendResult struct {
	BaseOffset     int64 // offset of the first record appended (or of the original, for a duplicate)
	LastOffset     int64
	LogAppendTime  int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset int64
	Duplicate      bool // a retried idempotent batch: nothing was written, offsets are the original's
}

// Offsets is a consistent view of a partition's offsets.
// Invariant: LogStart <= HighWatermark <= LogEnd.
type Offsets struct {
	LogStart      int64 // first offset still stored
	HighWatermark int64 // first offset not yet committed; consumers read below it
	LogEnd        int64 // next offset Append will assign (the dirty offset)
	// LastStable is the last stable offset (LSO): the first offset that
	// is part of a transaction not yet decided at the high watermark, or
	// the high watermark when none is. read_committed consumers read
	// below it. Invariant: LogStart <= LastStable <= HighWatermark.
	LastStable int64
}

// ReadResult is the answer to Read: whole stored batches, byte-identical to
// what producers sent (apart from base offset and leader epoch, which the
// leader stamps at append).
type ReadResult struct {
	Records []byte // zero or more whole batches; empty when offset == HighWatermark
	Offsets Offsets
	// Aborted lists the aborted transactions that overlap the returned
	// records (ReadCommitted only), so consumers drop their batches.
	Aborted []AbortedTxn
}

// ProducerInfo describes one producer's state in a partition, for
// DescribeProducers and for rebuilding state.
type ProducerInfo struct {
	ProducerID    int64
	ProducerEpoch int16
	LastSequence  int32
	LastTimestamp int64
	LastOffset    int64
	// TxnStartOffset is the first offset of the producer's open
	// transaction in this partition, -1 when none.
	TxnStartOffset int64
}

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	Dir    string           // the data directory (log.dirs, first entry)
	FS     segment.FS       // nil = the real operating-system filesystem
	Logger *slog.Logger     // nil = slog.Default()
	Now    func() time.Time // nil = time.Now; injected for tests

	// DefaultConfig is the configuration of partitions found on disk at
	// start, until Open applies theirs (broker defaults).
	DefaultConfig Config
	// UseHighWatermarkCheckpoint makes a reopened partition start at its
	// checkpointed high watermark (replication-offset-checkpoint) instead
	// of its log end. Leave false for a single voter, where everything
	// recovered is committed; a replicated log sets it and lets Raft
	// commit the rest.
	UseHighWatermarkCheckpoint bool
	// FlushCheckInterval is how often the background flusher looks for
	// partitions past flush.ms (default 200ms).
	FlushCheckInterval time.Duration
	// CheckpointInterval is how often the checkpoints are written
	// (default 5s, replica.high.watermark.checkpoint.interval.ms).
	CheckpointInterval time.Duration
	// ProducerIDExpiration is producer.id.expiration.ms: a producer with no
	// open transaction whose last batch is older is forgotten (checked
	// every ProducerIDExpirationCheck, default 10 minutes,
	// producer.id.expiration.check.interval.ms). 0 = never.
	ProducerIDExpiration      time.Duration
	ProducerIDExpirationCheck time.Duration
}

var _ = slog.Default

// RecordError names the record of a batch that made Append fail (its index
// within the batch), for Produce's per-record RecordErrors. It wraps the
// sentinel (ErrInvalidTimestamp, ErrInvalidRecord), so errors.Is still works.
type RecordError struct {
	Index int32
	Err   error
}

func (e *RecordError) Error() string      { return fmt.Sprintf("record %d: %v", e.Index, e.Err) }
func (e *RecordError) Unwrap() error      { return e.Err }
func (e *RecordError) RecordIndex() int32 { return e.Index }
