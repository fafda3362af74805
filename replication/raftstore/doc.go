// Package raftstore is raft's own storage on segment.FS, for the metadata
// quorum and the partition groups alike: LogFile (a raft.LogStore in one
// file of framed, CRC'd entries, held in memory too), StableFile (a
// raft.StableStore whose term saves never need disk space) and
// SnapshotStore (a raft.SnapshotStore). All go through segment.FS, so the
// crash tests run them on a MemFS that loses what was not fsync'd;
// raft-boltdb is not an allowed dependency, and hashicorp's
// FileSnapshotStore writes to the OS directly.
//
// Files: store.go (LogFile, StableFile and their on-disk layouts),
// snapshots.go (SnapshotStore), records.go (the record framing, shared
// with the broker's metadata.log, ErrStorage and SyncDir).
package raftstore
