// Package retention owns topic configuration: Kafka's topic config names,
// types, defaults (Kafka 4.0, with noted exceptions) and the broker settings
// that supply those defaults (log.retention.hours, log.segment.bytes,
// message.max.bytes, ...), their validation, their resolution into a
// partition's log.Config, and the entries DescribeConfigs reports.
//
// # Resolution
//
// The effective value of a topic config is, first match wins:
//
//	topic override (DYNAMIC_TOPIC_CONFIG, source 1)
//	  -> broker synonyms in Kafka's priority order, scaled to the topic unit
//	     (log.retention.ms, then .minutes x 60000, then .hours x 3600000;
//	      STATIC_BROKER_CONFIG, source 4)
//	  -> built-in default (DEFAULT_CONFIG, source 5)
//
// A negative broker value (-1 = unlimited) is not scaled, as in Kafka.
//
// The broker settings themselves come in layers (layers.go), merged key by
// key before the synonyms are resolved: dynamic per broker
// (DYNAMIC_BROKER_CONFIG, 2) over the dynamic cluster default
// (DYNAMIC_DEFAULT_BROKER_CONFIG, 3) over static (4). Only the primary
// synonym of each topic config is dynamic (IsDynamicBrokerSetting), as in
// Kafka's DynamicLogConfig; replication stores the dynamic layers in the
// cluster metadata and passes the merge to LogConfig.
//
// # Differences from Kafka
//
//   - segment.bytes keeps Kafka 3's minimum of 14 bytes (Kafka 4.0 raised it
//     to 1 MiB) so that tests and small deployments can roll often.
//   - message.timestamp.after.max.ms defaults to one hour, as in Kafka 4.0.
//   - log.Config says "0 = unbounded" where Kafka says Long.MAX_VALUE, so
//     Long.MAX_VALUE maps to 0 and an explicit 0 maps to 1 ms.
//   - segment.jitter.ms and preallocate are accepted and reported but the
//     log does not use them yet.
//
// # Retention (cleanup.policy=delete)
//
// PlanDelete (policy.go) is a pure function of a partition's segment list,
// offsets, cleanup config and the time: it returns the actions (roll,
// delete-before) that Kafka's deleteOldSegments would take -- whole
// segments, oldest first, past retention.ms (newest record timestamp) or
// retention.bytes, or wholly below the log start offset; only committed
// ones; the active segment only by rolling it first. Tests:
// testdata/delete.txt.
//
// The Cleaner (cleaner.go) is the executor: one goroutine per broker,
// started by cmd, that every log.retention.check.interval.ms plans each
// partition of the log manager and carries the plan out through
// log.Partition (Roll, AdvanceLogStart). A partition's policy travels in
// log.Config.Cleanup, filled by LogConfig and replaced by the broker on
// every config change (SetConfig), so changes apply at the next check
// without a restart. log.cleaner.backoff.ms is dynamic too: SetBackoff
// resets the compaction ticker (cmd calls it when the broker's effective
// settings change). Fetches in progress are safe: readers hold a
// reference on a segment, and its file stays open until they release it.
//
// # Compaction (cleanup.policy=compact, compact,delete)
//
// PlanCompact (compact.go) is pure, like PlanDelete: the cleanable range
// ends at the first uncleanable offset (the active segment, a segment not
// wholly committed, or one with records newer than min.compaction.lag.ms);
// the partition is compacted when its dirty share (bytes from the
// cleaner's first dirty offset to that end, over all cleanable bytes)
// reaches min.cleanable.dirty.ratio, or its first dirty segment is older
// than max.compaction.lag.ms. Tests: testdata/compact.txt.
//
// The Cleaner compacts every log.cleaner.backoff.ms (unless
// log.cleaner.enable=false): it builds an offset map (key hash -> latest
// offset) over the dirty range, bounded at 2M keys (a full map ends the
// range at a segment boundary), then rewrites runs of sealed segments
// (grouped up to segment.bytes) keeping a keyed record only when no later
// record of its key exists, and a tombstone only while it is younger than
// delete.retention.ms (its own timestamp; Kafka counts from the cleaning
// that first saw it). Keyless records are kept. Records of aborted
// transactions go (the log's aborted-transaction index names them) and
// never count as a key's latest record; a transaction marker stays while
// a record of its transaction does, then for delete.retention.ms, as in
// Kafka's cleaner.
// Batches whose records all stay are copied byte for byte; thinned ones
// keep their base offset, last offset delta, timestamps and producer
// fields (offsets keep their gaps, producer state stays derivable) and are
// recompressed with their own codec (gzip, snappy incl. the Java client's
// xerial framing on read, lz4, zstd; decompressed size bounded at 64 MiB).
// Each cleaned run is swapped in atomically by log.Partition.SwapCleaned
// (write cleaned/, fsync, commit marker, swap, recovery at open finishes
// or discards it; see log/compact.go). The first dirty offset after a pass
// is the partition's CleanerPoint, checkpointed by the log manager in
// cleaner-offset-checkpoint, so a restart does not compact a clean log
// again. Internal topics such as
// __consumer_offsets are created with cleanup.policy=compact and are
// compacted like any other.
//
// # Not here yet
//
//   - A batch of an idempotent producer whose records all go is dropped
//     (Kafka keeps an empty batch to preserve the producer's sequence).
//   - file.delete.delay.ms / log.segment.delete.delay.ms are accepted and
//     reported, but deletion is immediate (reference counts, not a delay,
//     keep a deleted segment readable for fetches in progress).
//
// # Concurrency
//
// The config tables are immutable, built at init; every function is safe
// for concurrent use. A Cleaner has one goroutine; RunOnce passes are
// serialized by Cleaner.runMu (its only lock), and partitions are changed
// only through their own thread-safe methods.
//
// # Errors
//
// Validation errors wrap ErrUnknownConfig (no such key) or ErrInvalidValue
// (wrong type, out of range, not one of the valid values) and name the key;
// both map to Kafka's INVALID_CONFIG.
package retention
