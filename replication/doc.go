// Package replication owns the cluster metadata (topics, partitions and
// their replica assignments, topic configs, broker registrations, producer-ID
// blocks) and the partitions this broker hosts; protocol talks to it through
// Broker (api.go, broker.go).
//
// # Units
//
// Broker is a thin façade: it embeds two units and starts and stops them
// together (broker.go, shutdown.go). Each unit's files carry its prefix.
//
//   - The metadata quorum (metadataQuorum, metadata_*.go): the metadata
//     Raft group and the image it applies commands to, the single writer
//     that validates and proposes commands (topics, configs, ACLs, SCRAM
//     credentials, quotas, features, registrations, reassignment targets),
//     forwarding to the controller, and what the controller serves
//     (DescribeQuorum, joins of broker-only nodes, fencing).
//   - The partition replicas (partitionReplicas, partition_*.go): the
//     partitions this broker hosts -- their logs and Raft groups, the local
//     effects of applied commands (partition_effects.go), leader reports,
//     reassignment steps, leadership transfers and rebalance, share-group
//     state, DeleteRecords and the data directory's free space.
//
// What both use -- the settings, the logger, the replication transport,
// the lifecycle flags and the disk state -- is a shared node (node.go).
// The quorum reaches the replicas only through the replicaEffects
// interface (metadata_quorum.go): an applied command's effects, and the
// opens and removals a writer does on the proposer. The replicas read the
// quorum's image and propose through it (leader reports, reassignment
// steps). TestUnitsKeepTheirFiles holds both rules.
//
// # Metadata: a Raft group, one voter by default
//
// The cluster metadata is replicated by the metadata Raft group
// (metadata_raft.go; design below). With no controller.quorum.voters the
// group has one voter, this broker: the same code, committing as soon as
// an entry is fsync'd. Every local partition runs its own Raft group
// among its replicas (partition_group.go; one voter, this broker, with
// replication factor 1: the same code). Produce proposes the batch to the
// group, whose LogStore appends it to the segments on the leader
// (stamping the term as leader epoch) and as stamped on the followers,
// and answers once it is committed and applied (the high watermark has
// moved past it). Raft is handed the producer's buffer itself: it reads
// an entry's data only until the entry's future is answered (the leader's
// StoreLogs writes it to the segment; followers are sent the stamped batch
// read back from the segment), and Produce always waits for the future,
// so protocol may reuse the buffer after Produce returns
// (partition_group_test.go overwrites the buffers and checks every
// replica).
//
//   - metadata_fsm.go: a deterministic state machine. image.Apply(Command)
//     returns a new immutable image; no clock, randomness or I/O inside
//     (topic IDs and producer-ID blocks are chosen by the proposer and
//     carried in the command).
//   - metadata_raft_fsm.go: raft.FSM over image.Apply; snapshots encode the
//     image. raftstore/: raft's log, stable and snapshot stores in
//     <log.dirs> (metadata-raft.log,
//     metadata-raft.state, metadata-snapshots/), CRC-checked, torn tails
//     cut at open.
//   - metadata_log.go: the foundation's metadata.log format; a data dir
//     that has one is migrated into the raft log at first start (the file
//     is renamed metadata.log.migrated).
//   - metadata_properties.go: <log.dirs>/meta.properties as in Kafka (version,
//     cluster.id generated at first start, node.id); a node.id mismatch fails
//     start-up.
//
// All files go through BrokerConfig.FS (segment.FS; the OS by default), so
// crash tests run the broker and the log manager on one segment.MemFS and
// drop every write not yet fsync'd (crash_test.go). A failed write or fsync
// of the raft log sticks (ErrMetadataStorage): metadata changes fail until
// a restart, since its tail is then unknown.
//
// Local effects (opening a new topic's logs, removing a deleted topic's,
// applying configs) follow applied commands on every broker (onApply,
// partition_effects.go, on raft's FSM goroutine). While a broker starts they are held back: raft
// replays committed commands one by one, and replaying an old
// DeleteTopic could remove the directory of a later topic of the same
// name. start() instead reconciles the disk with the caught-up image once,
// then turns effects on.
//
// Caught up means as of the controller (waitCaughtUp, metadata_raft.go).
// Before NewBroker returns -- so before the broker is ready, answers
// Metadata or loads a group coordinator -- a broker that is not the
// controller asks it for a read index over the Mux (kindForward with
// ReadIndex: the controller appends a barrier, so that everything
// committed before is applied there, and answers with its image's count
// of applied commands, image.applied, the same on every broker at the
// same place of the log, snapshots included) and waits, within
// StartTimeout, until its own image counts as many; the controller
// itself does a Barrier. A broker's own commit index is no such bound:
// back from an outage it learns the leader's commit index only up to the
// last entry it holds, and the leader's first AppendEntries may carry only
// part of what it missed (issue 15: a restarted broker answered Metadata
// with the leaders it had before it was killed, and loaded a group
// coordinator from them). A controller from before read indexes refuses
// the request (a command of no type); the broker then starts once it
// applied its own commit index, as it used to.
//
// # Invariants
//
//   - A metadata command is committed (fsync'd by a majority; by this
//     broker alone with one voter) and applied here before the call that
//     proposed it returns.
//   - A new topic's metadata is committed before its logs are created; a
//     deleted topic leaves the metadata before its logs are removed, and a
//     deletion interrupted by a crash is finished at the next start
//     (CmdDeleteTopic without CmdDeleteTopicDone). So a restart never
//     resurrects a deleted topic, and a recreated topic never inherits old
//     data (leftover directories of the name are removed first). Each
//     partition directory names its topic ID (Kafka's partition.metadata),
//     so a broker that was down during a deletion deletes the stray
//     directories at its next start, or when the recreated name's
//     partition opens (partition_meta.go).
//   - Producer IDs are handed out from blocks reserved in the metadata, so
//     they are unique across restarts (a restart skips the rest of a block).
//   - Topic IDs are random version-4 UUIDs, never zero, never reused.
//
// # Concurrency
//
// Broker.mu serializes this broker's metadata writers (validate against
// the image, propose, wait for apply; and the producer-ID block); readers
// load the current image from an atomic.Pointer (published by the FSM)
// and never block. TopicInfo values handed out share slices and maps with
// the image and must not be modified. Lock order: Broker.mu, then (on the
// FSM goroutine, never waiting for raft) Broker.effMu, then the log
// package's locks (log.Manager.Open/Delete). The FSM goroutine never
// takes Broker.mu: a writer holding it waits for that goroutine.
// A partition's guard (partition_guard.go: its open and its removal
// never interleave) comes after effMu, Broker.groupsMu (the map of
// running partition groups) after both, and groupsMu is never held while
// calling raft. Under effMu the metadata
// FSM goroutine starts and shuts down partition groups (before a log is
// deleted); a partition group's goroutines never take effMu or
// Broker.mu, so that wait always ends. Produce takes no broker lock
// beyond a read of groupsMu.
//
// Close (CloseContext, shutdown.go) hands leaderships to live replicas
// within its context, then, before taking Broker.mu, closes b.stop and
// the Mux: the writer holding Broker.mu returns at once (its forward or
// its wait for a commit fails), and no group's raft.Shutdown waits for an
// RPC to a peer that stopped answering.
//
// # Raft design
//
// One transport per broker: a Mux (package replication/transport, its doc
// tells the wire and the lanes) carries every group's RPCs and the
// forwarded metadata requests over a few connections per peer broker.
//
// Raft timing (raftconf.New in raftconf/config.go sets every raft.Config
// field explicitly). hashicorp/raft costs each leader, per follower, one
// heartbeat every HeartbeatTimeout/10..2/10 and one commit-index
// AppendEntries every CommitTimeout..2x; each follower arms a timer every
// HeartbeatTimeout, each leader one every LeaderLeaseTimeout. Partition
// groups (raftconf.PartitionTimingFor; strata.partition.heartbeat.timeout.ms, 2 s
// by default): followers wait 2-4 s for their leader; a leader runs with
// twice that heartbeat timeout (partitionGroup.fitTiming reloads raft's
// config on each change of role), so it heartbeats each follower every
// 400-800 ms; the lease is 2 s; idle followers get the commit index every
// 6-12 s (a DeleteRecords sends a barrier entry so that every replica
// applies it at once; a follower whose heartbeats resume after an outage
// is sent what it missed at once, as raft alone would retry it only on
// the next entry or CommitTimeout). The metadata group has faster values.
// Heartbeats to one peer are coalesced (transport/heartbeats.go): the Mux
// holds them up to 50 ms and sends one frame per peer; the peer hands
// each to its group's raft heartbeat handler and answers all in one
// frame; a steady group's heartbeat is answered at once with the peer's
// last answer while it travels (same term, a success from a round sent
// within a second, the peer heard from within a second). An idle
// commit-index update that repeats what the follower acknowledged is
// answered by the pipeline itself while the follower's broker is heard
// from (transport/commit.go). Other frames without entries are flushed
// lazily (2 ms) so they share syscalls. Measured: `strata bench idle`
// (1,000 partitions at RF 3 on 3 brokers) and idle_test.go
// (STRATA_IDLE_GROUPS=1000, raft and the Mux alone); figures in
// docs/PERFORMANCE.md. What is left is mostly the kernel's: every raft
// timer fires at an instant of its own, and each wakes a thread. Hence the
// broker's idle mode (internal/procs): with no client request and no
// batch stored for 10 s, one scheduler P and 5 ms of timer slack, so the
// kernel batches those wakes; partitionStore.StoreLogs and every Kafka
// request call procs.Touch, which ends it.
//
// Metadata group (the controller quorum, as KRaft). Voters are
// controller.quorum.voters (Kafka syntax id@host:port,...; the port is the
// replication listener); empty = this broker alone, one voter, the same
// code. The FSM is image.Apply: a Command is one raft log entry (the JSON
// of metadata_log.go's records), applied in index order on every broker;
// local effects (open or delete a partition's log, start or stop its Raft
// group) follow the applied image on each broker, never the proposer's
// call. Raft's own storage for this group: a small file LogStore and
// StableStore of ours (raftstore/; raft-boltdb is not an allowed
// dependency) and a SnapshotStore on segment.FS (hashicorp's
// FileSnapshotStore writes to the OS directly); a snapshot is the image
// encoded as JSON. Writers (CreateTopic, ...) propose on the leader; a
// broker that is not the leader forwards the command to it over the Mux
// (kindForward; a producer-ID block gets its start from the controller's
// image) and waits until it has applied the command itself, so a caller
// reads its own write (cluster_test.go: three brokers, writes on a
// follower, controller loss and return).
// Partition leadership is replicated metadata, as in KRaft (below,
// "Leaders and epochs").
//
// Partition groups. One raft group per partition among its replicas; the
// group id is the topic id and partition. The term is the leader epoch
// written into each batch. Raft's log is the partition's segments:
//
//	raft index:  5     6        7       8      9
//	entry:      [cmd] [noop]  [cmd]   [cmd] [config]
//	              |     |       |       |      |
//	segments:   b@100   |     b@130   b@131    |     (one batch per cmd entry)
//	side log:         6:noop                 9:config (Raft's own entries)
//
// The rules:
//
//   - A command entry IS one record batch at its offset; the data is written
//     once, into the active segment. Raft's own entries (no-op,
//     configuration, barrier) go to a small side log in the partition
//     directory (raft-side.log, CRC-framed like metadata.log), each with
//     the log end offset at its place. The raft index -> offset map is
//     derived, never stored: from an anchor (snapshot index i = offset o),
//     indexes not in the side log are the next batches in offset order.
//     It is kept in memory for the tail raft still reads (bounded; no
//     raft.NewLogCache: it would hold the leader's unstamped entries) and
//     rebuilt at open by a header-only scan (log.ScanHeadersFrom).
//   - Leader: Broker.Produce calls raft ApplyLog(batch as sent, extension
//     "unstamped"). The LogStore's StoreLogs sees the extension only on the
//     leader (GetLog never returns it) and calls log.Partition.Append, which
//     checks producer sequences, assigns the offset and stamps the term.
//     A batch that Append refuses (duplicate, out of order sequence) becomes
//     a side-log entry carrying the error and the original offsets, so the
//     index sequence stays dense and every replica applies the same thing.
//     Followers store what GetLog returned: already stamped batches, written
//     as they are (log.Partition.AppendReplica: the stamped offset,
//     producer state updated, nothing refused). raft reads each batch back
//     several times within milliseconds (once per follower to send it, once
//     more for the term of the entry before a send, once on each follower
//     to apply it): a small memo per partition (partition_memo.go) keeps
//     the last batches appended or read, in memory only, so those reads
//     are not preads; a follower decodes a lone entry without copying it
//     out of its frame (transport/codec.go).
//   - Commit index -> high watermark: FSM.Apply of a command entry calls
//     Partition.Commit(last+1) and returns the offsets; the producer is
//     answered from the ApplyFuture (acks=1 and acks=all alike). FSM.Apply
//     does no I/O: the bytes are already in the segment.
//   - DeleteRange of a suffix (raft's conflict rule) -> Partition.TruncateTo
//     (never below the high watermark: raft never deletes committed
//     entries) and cuts the side log; DeleteRange of a prefix (after a
//     snapshot) only moves the anchor: retention, not raft, deletes
//     segments.
//   - A snapshot is "everything up to index i is in the segments": Persist
//     writes only (i, term, offset, log start). Opening it for
//     InstallSnapshot streams the leader's batches (below, "Snapshots and
//     catch-up").
//   - StableStore (current term, vote) is a small file per partition
//     (raftstore.StableFile, as for the metadata group): 4 KiB
//     reserved when the group opens, two CRC'd slots rewritten in place in
//     turn, one fsync per Set: a term save never needs disk space (raft
//     panics when it cannot save its term), so a full disk cannot stop it.
//
// Single node: the same code, one voter; Apply commits as soon as the
// entry is stored.
//
// Rooms: transport/ (the Mux: every group's raft.Transport, doc.go there),
// raftconf/ (every raft.Config field, the timings, raft's log lines),
// raftstore/ (raft's LogStore, StableStore and SnapshotStore on
// segment.FS, for both kinds of group), internal/raftharness (for tests only: an in-process cluster of raft
// nodes over real Muxes on 127.0.0.1, with Partition/Disconnect/Heal
// through a fault-injecting dialer, Restart). Files here:
// metadata_raft_fsm.go (raft.FSM over image.Apply, image
// snapshots), metadata_raft.go (the broker's metadata group),
// partition_store.go (the partition LogStore and FSM),
// partition_group.go (running a group per local partition; its files are
// in <partition dir>/raft/: raft-side.log, raft-state, snapshots/),
// partition_snapshots.go, partition_leaders.go, partition_transfer.go,
// metadata_reassign.go (below), partition_rebalance.go (leader balance), metadata_describe_quorum.go (the
// metadata quorum as DescribeQuorum reports it: each member asked for its
// last index over the Mux).
//
// Leaders and epochs (partition_leaders.go). A group's leader is the
// partition's leader and its term the leader epoch. The preferred replica
// (the first) starts the first election at once (a ReloadConfig that
// lowers HeartbeatTimeout wakes raft's follower loop), so a new partition
// has a leader in milliseconds where the assignment put it. Raft's
// observations (state changes, failed and resumed heartbeats) arrive on
// one channel per broker; a new leader reports (leader, epoch = term, ISR
// = the voters its heartbeats reach) to the controller, batched, as
// CmdPartitionLeaders, applied only if the epoch is not older: every
// broker's Metadata, Fetch epoch checks and group coordinator routing use
// that replicated image. Until a new partition's first report is applied,
// the image holds its first replica at epoch 0 as a placeholder, which
// Metadata answers as LEADER_NOT_AVAILABLE: each broker applies the image a
// moment after the controller, and a client that took the placeholder
// would be fenced by the elected epoch. That moment is short because the
// controller announces each commit (announceCommits, metadata_raft.go): a
// follower learns a commit index only from the next AppendEntries, so
// after a proposal commits the controller appends a barrier, sent at once,
// instead of leaving the others a CommitTimeout (100-200 ms) behind.
// CreateTopics and CreatePartitions answer once the
// new partitions have reported leaders. Reports are committed without the
// writer lock (commitUnlocked): a writer holding it may be waiting for
// them.
//
// A leader keeps reporting until the replicated image shows its (leader,
// epoch), across controller changes. A report the controller did not take
// is sent again 200 ms later, to whichever broker is controller by then,
// with a "not recorded in the metadata yet; retrying" line, whatever the
// answer: not the controller, no controller, or "shutting down" -- the
// answer of a controller that stops while a forwarded report waits on its
// proposal (ErrShuttingDown comes back as its sentinel; the entry may or
// may not commit). That is the controller's shutdown, not this broker's:
// only this broker closing ends the reporter. (It used to end on any
// ErrShuttingDown, so a controller's clean stop, whose handoff makes new
// leaders that report to it while it stops, silenced the other brokers'
// reporters for good and the metadata kept the old leaders.) Reports are
// idempotent, so a report sent again after an ambiguous answer costs one
// no-op command. Every second (leaderSweepInterval) the reporter, when its
// queue is empty, also compares the groups it leads with its image: a
// leadership missing from the image at two sweeps in a row (time for a
// report just committed to be applied here) is reported again and logged
// ("still not in the metadata; reporting them again"), so a report lost
// any other way is not lost for good. The sweep reads a few atomics and
// one map entry per group led, and compares leader, epoch and the ISR as
// the metadata would record it: heartbeat observations report ISR
// changes, but such a report is dropped when the image it is compared
// with still waits for an earlier report in flight, and the sweep sends
// it again. A leader forgets the followers it marked failed when it
// becomes leader: raft reports a follower resuming only from the
// heartbeat goroutine of the term that saw it fail.
//
// Snapshots and catch-up (partition_snapshots.go). A partition snapshot
// at index i is the position "every batch below offset o is in the
// segments" (a few bytes; the data is never written twice). A follower
// that needs entries the leader no longer has (raft's log compacted after
// a snapshot, or batches removed by retention or compaction: GetLog then
// returns raft.ErrLogNotFound) gets InstallSnapshot, whose stream Open
// generates from the leader's segments (header, then the batches from the
// log start to o, sized beforehand from the indexes: log.SpanBytes). The
// follower's sink marks the install in its stable store, resets the
// partition (log.ResetTo) and appends every batch as the leader stored it;
// at Close it commits, fsyncs, records the position and clears the mark.
// A crash mid-install leaves the mark: the replica starts empty and is
// sent everything again.
//
// The removal limit (log/removal.go). The index -> offset map is rebuilt
// at open from the newest snapshot on, so batches from that snapshot's
// offset on must stay as they are: the group sets the partition's removal
// limit to it, and retention, DeleteRecords and compaction move the log
// start at once but remove or rewrite only segments below the limit. The
// retention cleaner asks the group for a snapshot when the limit holds it
// back (raft.Snapshot on the cleaner's goroutine, never the FSM's).
//
// DeleteRecords is a raft entry (extDeleteRecords, in the side log) that
// every replica's FSM applies: the log start moves on every replica.
//
// Share-partition state (partition_share_state.go, package sharepart) lives in the
// partition's own group: each ShareFetch or ShareAcknowledge that changes
// it is one side entry (extShareState: the leader epoch it was computed
// at, then a sharepart delta) that every replica's FSM applies, in log
// order, to the partition's sharepart.Registry (one per group, made when
// it opens); like every side entry it takes no offset. ShareApply and
// ShareApplyAt propose a delta on the leader and return once it is
// applied there; ShareApplyAt's entry is applied only at the term it was
// computed at (a leader deposed and re-elected meanwhile is fenced, the
// same on every replica). ShareLeader gives the leader its registry and
// epoch after a barrier once per term, so it holds every entry committed
// before. Snapshots carry the registry (a share section after the header,
// kinds 2 and 3; none when it is empty, so older snapshots read as an
// empty registry), locally and in the install stream; Restore replaces
// it, and a restart rebuilds it from the newest snapshot plus the side
// entries raft applies after it.
//
// Moving leadership (partition_transfer.go): ElectLeaders (preferred)
// asks the current leader (over the Mux's forward channel when it is
// another broker) for a raft leadership transfer to the first replica; a
// broker stopping cleanly transfers each of its leaderships first
// (Broker.Close, bounded to 15 s). The controller gives leaderships back
// to preferred replicas on its own (partition_rebalance.go; Kafka's
// auto.leader.rebalance.enable and leader.imbalance.*), through the same
// transfer.
//
// Reassignment (metadata_reassign.go): AlterPartitionReassignments records a
// target (CmdReassign); the partition's leader changes the group's
// configuration one server at a time (AddNonvoter for joining replicas,
// which open an empty, non-bootstrapped group the leader fills, and
// AddVoter once one has caught up with the commit index; RemoveServer
// for leaving ones, after handing leadership over if it leaves itself),
// then, once a barrier has committed the configuration that equals the
// target, records CmdReassignDone; brokers no longer among the replicas
// stop the group and delete the log (at once, or at their next start). A
// joining replica neither grants nor asks votes until its log reaches
// the leader's last index as of the first entries it was sent
// (transport/join_gate.go): a broker removed (log deleted) and added back would
// otherwise vote, with an empty configuration, for a candidate holding
// only an old part of the log (docs/RELIABILITY.md, seed 11).
//
// StoreLogs on a follower is as durable as the topic's flush policy
// (flush.messages=1 for Raft's strict rule), like Kafka's replication;
// the entries of one StoreLogs call share one fsync (log.HoldFlush), taken
// before StoreLogs returns, so before raft counts any of them stored.
// The side log (share state, delete-records, raft's own entries) follows
// the same policy (flush.messages counts its entries, flush.ms their age),
// with one rule more: it is fsync'd before a batch is appended after it,
// so a crash may lose its tail but never an entry before a surviving
// batch (which would shift every later index; TestPartitionSideLogCrash-
// LeavesNoHole). Share state had fsync'd every acquisition and
// acknowledgement (a share fetch's latency on one broker); Kafka writes
// it without fsync too. The vote is always fsync'd. The commit rule is a
// majority of the voters; min.insync.replicas is accepted and not used.
//
// # Staying up under load
//
// Many raft groups on few cores have a metastable failure: a burst delays
// heartbeats, elections add work, and the cluster never settles
// (docs/ARCHITECTURE.md tells the storm of issue 15 and what caused it).
// The transport's defences:
//
//   - lanes: heartbeats, votes and the metadata group never queue behind
//     AppendEntries frames (up to maxFrameBytes) or a data lane's write
//     lock; each side reads the control lane on its own goroutine;
//   - a call that times out fails its connection only when nothing came
//     back on it for the whole wait (clientConn.wait): a vote waiting for a
//     busy raft loop does not take every group's pipeline down with it;
//   - heartbeats that raise a group's term (raft fsyncs it) are answered
//     off the lane's reader (handleHeartbeats);
//   - elections are gated (transport/elections.go): a partition group's
//     refused pre-vote rounds back off (1, 2, 4, 8 s, jittered) and a
//     broker has at most maxPreVoteRounds in flight; a held-back round is
//     answered "not granted", so the gate only delays elections;
//   - less disk per election and per new partition: the stable store
//     writes in place (one fsync per Set, not a replaced file), and a new topic's
//     partitions are created side by side on the FSM goroutine (openLogs);
//   - a steady group's heartbeat is answered from its follower's last
//     answer while that broker is heard from (transport/heartbeats.go), so
//     a leader keeps its lease through late heartbeats.
//
// strata_raft_elections_total, strata_raft_prevotes_total,
// strata_raft_prevotes_deferred_total and
// strata_raft_leader_changes_total (metrics.go) show an election rate;
// internal/e2e's TestClusterStableUnderBurst checks it falls to zero.
//
// # Not yet
//
// Brokers outside the metadata voter set (every broker is a voter; 9 at
// most), a leader's ISR that also drops followers that are reachable but
// behind (replica.lag.time.max.ms; today only unreachable ones leave it),
// ACLs and credentials.
package replication
