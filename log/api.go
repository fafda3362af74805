package log

import (
	"errors"
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
	ErrStorage              = errors.New("log: storage error")                       // KAFKA_STORAGE_ERROR
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
}

// ReadResult is the answer to Read: whole stored batches, byte-identical to
// what producers sent (apart from base offset and leader epoch, which the
// leader stamps at append).
type ReadResult struct {
	Records []byte // zero or more whole batches; empty when offset == HighWatermark
	Offsets Offsets
}

// ProducerInfo describes one producer's state in a partition, for
// DescribeProducers and for rebuilding state.
type ProducerInfo struct {
	ProducerID    int64
	ProducerEpoch int16
	LastSequence  int32
	LastTimestamp int64
	LastOffset    int64
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
}

var _ = slog.Default
