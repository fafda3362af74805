// Package replication owns the cluster metadata (topics, partitions and
// their replica assignments, topic configs, broker registrations, producer-ID
// blocks) and the partitions this broker hosts; protocol talks to it through
// Broker (api.go, broker.go).
//
// # Foundation: one node, one voter
//
// Today the metadata "quorum" and every partition "group" have one voter,
// this broker, and commit at once. The Raft issue replaces the insides
// (a metadata Raft group, one Raft group per partition whose LogStore is the
// partition's segments) without changing Broker's signatures. The metadata
// is already shaped for that:
//
//   - metadata_fsm.go: a deterministic state machine. image.Apply(Command)
//     returns a new immutable image; no clock, randomness or I/O inside
//     (topic IDs and producer-ID blocks are chosen by the caller and carried
//     in the command). Raft will carry the same commands.
//   - metadata_log.go: the commands, persisted in <log.dirs>/metadata.log,
//     one CRC-32C-checked record each, fsync'd before the command takes
//     effect, replayed at start; a torn tail is truncated (diagram there).
//   - meta_properties.go: <log.dirs>/meta.properties as in Kafka (version,
//     cluster.id generated at first start, node.id); a node.id mismatch fails
//     start-up.
//
// Both files go through BrokerConfig.FS (segment.FS; the OS by default), so
// crash tests run the broker and the log manager on one segment.MemFS and
// drop every write not yet fsync'd (crash_test.go). A failed write or fsync
// of metadata.log sticks (ErrMetadataStorage): metadata changes fail until
// a restart replays the file, since its tail is then unknown.
//
// Produce is Partition lookup + log.Partition.Append + Commit(last+1): with
// one voter, a write is committed as soon as it is in the log.
//
// # Invariants
//
//   - A metadata command is durable in metadata.log before its image is
//     published, and published before the call that made it returns.
//   - A new topic's metadata is durable before its logs are created; a
//     deleted topic leaves the metadata (durably) before its logs are
//     removed, and a deletion interrupted by a crash is finished at the next
//     start (CmdDeleteTopic without CmdDeleteTopicDone). So a restart never
//     resurrects a deleted topic, and a recreated topic never inherits old
//     data (leftover directories of the name are removed first).
//   - Producer IDs are handed out from blocks reserved in metadata.log, so
//     they are unique across restarts (a restart skips the rest of a block).
//   - Topic IDs are random version-4 UUIDs, never zero, never reused.
//
// # Concurrency
//
// One writer, many lock-free readers. Broker.mu serializes every metadata
// change (and the metadata log, and the producer-ID block); readers load
// the current image from an atomic.Pointer and never block. TopicInfo
// values handed out share slices and maps with the image and must not be
// modified. Broker.mu is the package's only mutex; the log package's locks
// are taken inside it (log.Manager.Open/Delete) but never the other way.
//
// # Not yet
//
// Raft (the metadata quorum and per-partition groups), more than one
// broker, leader epochs other than 0, ACLs and credentials, metadata
// snapshots (metadata.log grows with every command; it is small because
// commands are rare), dynamic broker configs.
package replication
