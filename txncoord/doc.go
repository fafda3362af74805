// Package txncoord is Strata's transaction coordinator (KIP-98, with the
// epoch rules of KIP-360 and KIP-588 and the produce-side verification of
// KIP-890 part 1): InitProducerId for transactional IDs, AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn, the transaction markers, transaction timeouts,
// DescribeTransactions and ListTransactions. TxnOffsetCommit lives with
// the group coordinator (groupcoord/txn_offsets.go), which this package
// tells when a marker lands on __consumer_offsets.
//
// # Where state lives
//
// Every transactional ID's state is a record in the internal compacted
// topic __transaction_state (transaction.state.log.num.partitions,
// default 50, created on first use), in Kafka's format (records.go),
// written through Broker.Produce so it replicates like any partition. An
// ID belongs to partition abs(javaHashCode(id)) % partitions, and its
// coordinator is that partition's leader. Memory is a cache of the
// partition, rebuilt by replaying it whenever this broker starts leading
// it at a new leader epoch (the coordinator core's load, internal/coord).
//
// # Goroutines
//
// One goroutine per loaded partition (a shard: the core's, package
// internal/coord, shared with groupcoord; this package's state of it in
// shard.go) owns that partition's transactions (the pure state machine of
// txn.go); requests reach it as calls on a bounded channel, timers as
// ticks every transaction.abort.timed.out.transaction.cleanup.interval.ms
// (from Config.Clock). The core does the routing, the load by replay, the
// leader-epoch checks and the writes; see its package doc. Markers are
// written by one goroutine per completing transaction (at most
// maxMarkerJobs per shard), which hands the completion back to the shard
// as a call; a shard never waits on a marker.
//
// Invariant: a reply goes out only after the records behind it are in
// the log. A failed write unloads the shard, and the next request reloads
// it from the log, so memory is never ahead of the log. EndTxn is answered
// once every marker is written and CompleteCommit/CompleteAbort is logged,
// so the outcome is visible to read_committed consumers and OffsetFetch
// when the client hears it. A transaction found in PrepareCommit or
// PrepareAbort by a load has its markers written again (a marker written
// twice is harmless: the second ends nothing).
//
// # Markers
//
// A marker is a control batch (log.MarkerBatch) carrying the producer's
// ID and epoch, appended through Broker.Produce on the partition's leader:
// directly when this broker leads it, else with WriteTxnMarkers (API 27)
// to the leader over a kgo client (markers.go), as Kafka's brokers do.
// Markers are retried with backoff until written, the partition is
// deleted, or the shard unloads.
//
// # Epochs and fencing
//
// InitProducerId bumps the producer epoch (a new producer ID once the
// epoch is exhausted); an instance with an older epoch gets PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH for older request versions) from the
// coordinator, and INVALID_PRODUCER_EPOCH from partitions once a marker
// with the newer epoch lands there. An ongoing transaction found by a new
// instance's InitProducerId, or open longer than its
// transaction.timeout.ms, is aborted with a further epoch bump.
// transactional.id.expiration.ms forgets idle IDs (a tombstone).
//
// # Metrics
//
// metrics.go: transactions by state (read from the loaded shards at
// scrape time), markers written and failed, timeouts, expired IDs.
//
// # Locks
//
// The shard map and the creation of the topic are the core's
// (internal/coord); remoteMarkers.mu guards its client. None is held while waiting on
// a shard or on I/O, and none is taken while another is held.
//
// # Differences from Kafka
//
//   - KIP-890 part 2 is served when ApiVersions finalizes transaction.version
//     2 (Config.TransactionVersion, the default): Produce v12+ and
//     TxnOffsetCommit v5+ add their partition (AddImplicit: in process, or
//     AddPartitionsToTxn to a remote coordinator), EndTxn v5 bumps the epoch
//     (endTxnV2; NextProducerID when exhausted). The level is a setting, not
//     a feature changed at run time by UpdateFeatures.
//   - Produce-side verification (v < 12) asks the coordinator in-process
//     when this broker coordinates the ID, and skips it otherwise (Kafka
//     sends AddPartitionsToTxn v4 VerifyOnly to the coordinator).
//   - EndTxn is answered after the markers, not after PrepareCommit: slower
//     by one round of marker writes, and nothing a client can observe is
//     left pending.
//   - The lastProducerId/lastProducerEpoch of KIP-360 (retried bumps) are
//     not persisted: a retry that crosses a coordinator move is fenced.
package txncoord
