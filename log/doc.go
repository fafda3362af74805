// Package log owns one partition's log and the manager of every partition
// log in a data directory. A partition is an ordered list of segments
// (package segment), the log start offset, the high watermark and the log
// end offset, the idempotent-producer state, and the fetch waiters.
//
// # Offsets
//
//	 LogStart            HighWatermark (committed)    LogEnd (dirty)
//	    |  committed: readable  |  appended, uncommitted  |
//	    v                       v                         v
//	----[=======================|=========================)----
//
// Invariant: LogStart <= HighWatermark <= LogEnd. Append assigns offsets
// at LogEnd; Commit advances the high watermark (never backwards);
// TruncateTo removes an uncommitted tail (never below the high watermark);
// Read never returns a batch at or above the high watermark (an offset
// between the high watermark and the log end reads nothing; only offsets
// outside [LogStart, LogEnd] are out of range).
//
// # High watermark and log start across restarts
//
// The manager writes Kafka-style checkpoints per data directory
// (replication-offset-checkpoint and log-start-offset-checkpoint: tmp file,
// fsync, rename, directory fsync) on Close and every CheckpointInterval.
// On open, with one voter (the single-node default) every batch that
// survived recovery counts as committed, so the high watermark starts at
// the log end. With ManagerOptions.UseHighWatermarkCheckpoint (a
// replicated log) it starts at the checkpointed value, clamped to
// [LogStart, LogEnd] (at LogStart for a partition not in the checkpoint),
// and the replication layer commits the rest. The log
// start offset is max(checkpoint, first segment's base).
//
// # Durability
//
// Batches are written once, with one write call, into the active segment.
// fsync follows flush.messages (inline, in Append, with the partition lock
// released during the leader's fsync so that commits and reads go on;
// HoldFlush/ReleaseFlush let a caller storing several batches at once pay
// one fsync for all of them) and flush.ms (the manager's background
// flusher goroutine, stopped by Close). A segment
// is fsync'd when it is rolled (segment.bytes, segment.ms from the
// injected clock, full index), so recovery only ever scans the active
// segment's tail. A failed write or fsync sticks: the partition refuses
// appends with ErrStorage until it is reopened (which recovers).
//
// What this promises on one node: a batch survives a process crash once
// Append returned (it is in the page cache), and survives a power loss
// once it was fsync'd (flush.messages / flush.ms / roll / Flush / Close).
// Kafka's defaults never fsync by policy and lean on replication instead;
// a single node with those defaults can lose the last unflushed seconds of
// acknowledged data on power loss, never a batch in the middle of the log.
//
// # Producer state
//
// Derived from the log only. At each roll the state as of the new
// segment's base offset is written to "<offset>.snapshot" (CRC-checked,
// like Kafka's) and kept in memory, so TruncateTo within the active
// segment replays only that segment, and opening a partition replays batch
// headers (payloads skipped by length) only from the newest usable
// snapshot on; with none, from the log start. Per producer the last 5
// batches are kept for duplicate detection (ErrDuplicateSequence with the original
// offsets); sequence gaps give ErrOutOfOrderSequence, an older epoch
// ErrInvalidProducerEpoch, a newer epoch must start at 0, an unknown
// producer must start at 0 (Kafka 2.5+). The table is bounded
// (maxProducers, least recently written evicted).
//
// # Transactions
//
// Per producer, the first offset of its open transaction (txn.go): the
// last stable offset is the smallest, capped by the high watermark and
// held back by transactions whose marker is not committed yet. Abort
// markers add entries to the aborted-transaction index of their segment
// ("<base>.txnindex", Kafka's format, also held in memory); ReadCommitted
// reads below the LSO and returns the aborted transactions overlapping
// what it read. Append and AppendReplica track it alike; snapshots carry
// the open transactions; replayed segments re-derive their index entries.
//
// # Leader-epoch cache
//
// Each leader epoch's first offset, from the batches' partitionLeaderEpoch
// (EndOffsetForEpoch answers OffsetForLeaderEpoch). Persisted in the
// partition's leader-epoch-checkpoint on each new epoch, cut by TruncateTo
// and AdvanceLogStart, and rebuilt from every batch if the file is lost.
//
// # Files in a partition directory
//
//	00000000000000000000.log / .index / .timeindex   segments (package segment)
//	00000000000000001234.snapshot                     producer state at offset 1234
//	00000000000000000000.txnindex                     aborted transactions (txn.go)
//	leader-epoch-checkpoint                           epoch -> start offset
//	cleaned/, cleaner-swap                            a compaction in progress (compact.go)
//
// and per data directory: replication-offset-checkpoint,
// log-start-offset-checkpoint, cleaner-offset-checkpoint (each compacted
// partition's first dirty offset, a hint for the cleaner) and
// recovery-point-offset-checkpoint (the
// offset below which each partition is fsync'd: on open the active
// segment is CRC-checked from there, all of it when unknown; after
// recovery the active segment is fsync'd and the point moves to the end).
// segment.ms counts from the segment's creation or from the partition's
// open, by the injected clock.
//
// # Replication entry points
//
// AppendReplica (replica.go) writes a batch a leader already stamped, byte
// for byte, at the log end, updating producer state without refusing it;
// BatchAt reads the one batch at an offset, committed or not. Together
// with TruncateTo and Commit they let a Raft log store live on the
// segments (replication's doc.go, "Raft design").
//
// # Reading and deletion
//
// Read looks up the position under the partition's read lock, takes a
// reference on the segment, releases the lock and copies the bytes into a
// fresh buffer (reference-counted segments: a segment deleted by
// retention, truncation or Delete keeps its file open until the last
// reader releases it, so a reader never sees garbage; the bytes it
// returns are its own). Reads are bounded by the committed position
// (the first pending batch), never by the log end. ReadRegion (region.go)
// is Read without the copy: it returns the segment's reference and the
// file span of the batches, which Fetch sends to the socket with sendfile
// and the caller must Release. ReadUncommitted (for replication) reads up
// to the log end; those bytes may be truncated and overwritten, so it
// copies them under the partition's read lock instead.
//
// # Waiters
//
// Wait(offset) returns a channel shared by every waiter on that offset,
// closed when the high watermark passes it (or on close/delete). Nothing
// is registered per caller, so a waiter that times out leaves nothing
// behind; the table of offsets is bounded (maxWaitKeys), past which
// waiters share one channel closed on every advance.
//
// # Locks
//
// Lock order: Manager.adminMu (creating partitions shared, deleting and
// closing them exclusive; their disk I/O runs under it), Manager.ckMu (checkpoint writes), Manager.mu (the
// partition map only, never held across I/O), Partition.mu,
// Partition.waiters.mu. One writer at a time holds Partition.mu
// exclusively (Append, Commit, TruncateTo, Flush, roll, AdvanceLogStart);
// Read, Offsets, OffsetForTimestamp, MaxTimestamp take it shared (index
// lookups and batch header reads happen under it; Read's bulk copy happens
// after releasing it). Batch validation (CRC) runs before the lock is
// taken. Partition.cfg is an atomic pointer, read without the lock.
package log
