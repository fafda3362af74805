// Package segment owns one segment of a partition's log: the .log file of
// Kafka v2 record batches stored exactly as produced (after the leader
// stamped base offset and leader epoch), its sparse offset index and its
// time index, append, lookup, and recovery of a torn tail. It also defines
// the FS the storage engine writes through (fs.go), the operating system's
// implementation (osfs.go, with mmap on Linux) and an in-memory one with
// strict sync semantics and fault injection for crash tests (memfs.go),
// and ReplaceFile (replace.go), the one atomic replace of a small file
// (temp file, fsync, rename, fsync of the directory) every package that
// rewrites one uses. The batch format is exported once, here, for every
// package that reads or builds batches: the header layout (batch.go: the
// Off* offsets, HeaderSize, ParseHeader, AppendBatch), the records inside
// a batch (records.go) and the codecs with their bound on decompressed
// size (codec.go). It imports nothing else of Strata's.
//
// # Files
//
// A segment with base offset B (the offset of its first batch) is three
// files named like Kafka's, B zero-padded to 20 digits:
//
//	00000000000000000000.log        batches, back to back, as stored
//	00000000000000000000.index      sparse offset index
//	00000000000000000000.timeindex  sparse time index
//
// # Record batch (v2, on disk = on the wire), big-endian
//
//	 0                   8          12                 16 17          21
//	+-------------------+----------+------------------+--+-----------+
//	| baseOffset int64  | length   | partitionLeader  |mg| crc uint32|
//	|                   | int32    | Epoch int32      |=2| CRC-32C   |
//	+-------------------+----------+------------------+--+-----------+
//	 21     23               27                35                43
//	+------+----------------+-----------------+-----------------+
//	|attrs |lastOffsetDelta | baseTimestamp   | maxTimestamp    |
//	|int16 |int32           | int64           | int64           |
//	+------+----------------+-----------------+-----------------+
//	 43                51     53            57          61
//	+-----------------+------+-------------+-----------+----------
//	| producerId int64|epoch | baseSequence| numRecords| records...
//	|                 |int16 | int32       | int32     | (maybe compressed)
//	+-----------------+------+-------------+-----------+----------
//
//	length = bytes after the length field = whole batch - 12
//	crc    = CRC-32C (Castagnoli) of attrs .. end of records; baseOffset,
//	         length and partitionLeaderEpoch are NOT covered, so the
//	         leader may stamp them in place
//	attrs  = bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
//	         bit 3 timestamp type (1 = LogAppendTime), bit 4 transactional,
//	         bit 5 control
//	Invariant of a valid batch: numRecords == lastOffsetDelta+1 > 0
//	(a stored batch thinned by compaction: 0 < numRecords <= lastOffsetDelta+1).
//	Uncompressed records are each prefixed with a zigzag varint length;
//	those lengths must tile the records area exactly.
//
// # Offset index (.index): 8-byte entries, big-endian
//
//	+----------------------+----------------------+
//	| relativeOffset uint32| position uint32      |  x N
//	+----------------------+----------------------+
//
// relativeOffset is the last offset of the batch starting at position,
// minus B. An entry is added when more than index.interval.bytes were
// appended since the previous one, so position 0 is never indexed and an
// all-zero entry marks the end of the used part of a preallocated file.
//
// # Time index (.timeindex): 12-byte entries, big-endian
//
//	+---------------------------+----------------------+
//	| timestamp int64           | relativeOffset uint32|  x N
//	+---------------------------+----------------------+
//
// timestamp is the largest batch max timestamp so far in the segment,
// relativeOffset the last offset of the batch that holds it. Written
// together with offset entries (and once more when the segment is
// sealed) and only when the timestamp grows, so entries strictly increase.
//
// Index files are preallocated to segment.index.bytes and memory-mapped
// (MAP_SHARED) while the segment is active, and trimmed to their used size
// when it is sealed at roll or closed, as Kafka does. On Linux and MemFS
// the mapping is detached (index.go): the index holds no file descriptor,
// msync of the mapping makes its entries durable, and the file is opened
// again by path only to trim it. Opening an index looks for its end only
// within the file's length before preallocation (a new segment's indexes
// are not read at all), and the mapping is advised MADV_RANDOM: faulting
// in a fresh mapping with the device's read-ahead cost several ms per
// segment, ~30 s for 1,000 new partitions.
//
// # Invariants and recovery
//
//   - Sealed segments are fsync'd (log and indexes) before the next
//     segment is created, so only the last (active) segment of a
//     partition can have a torn tail.
//   - Open(active=true) scans from the last offset index entry that points
//     at a batch boundary (or from the start; OpenFrom also goes back to
//     the entry before a recovery point, so that everything not known to
//     be fsync'd is checked even if an index page reached the disk before
//     the log data it points at), reads each batch whole and
//     checks length, CRC-32C and offset continuity (each batch starts at
//     or after the previous one's end, relative offsets fit uint32), and
//     truncates the log at the first batch that fails. Index entries for
//     that range are rebuilt; a missing or inconsistent index is rebuilt
//     from the start (then every batch of the segment is checked).
//   - Write errors stick: after a failed write, truncate or fsync the
//     segment refuses further writes (Err); reopening recovers.
//   - No length read from disk or wire is trusted: every one is checked
//     against MaxBatchSize and the bytes actually present before use.
//
// # Concurrency
//
// A Segment has one owner (the log package, under its partition lock) for
// every method except ReadAt, which readers call without that lock while
// holding a reference (Acquire/Release). The log file is closed when the
// last reference goes, so Close or Remove never pull a file out from under
// a reader; on Unix a removed file stays readable through an open handle,
// and MemFS behaves the same.
//
// # Usage
//
//	s, _ := segment.Create(fsys, dir, 0, segment.Options{})
//	_ = s.Append(buf, []segment.BatchInfo{{Pos: 0, Len: len(buf), LastOffset: 4, MaxTimestamp: ts}})
//	pos, h, found, _ := s.Find(3, s.Size())
//	_ = s.Sync()
//	_ = s.Seal() // at roll
package segment
