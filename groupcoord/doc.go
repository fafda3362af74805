// Package groupcoord is Strata's group coordinator: classic consumer groups
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, with static membership),
// committed offsets (OffsetCommit, OffsetFetch, OffsetDelete), and the
// group admin APIs (FindCoordinator, DescribeGroups, ListGroups,
// DeleteGroups), and KIP-848 consumer groups (ConsumerGroupHeartbeat,
// ConsumerGroupDescribe) with server-side uniform and range assignors.
// Transactional offset commits (TxnOffsetCommit) are held pending until
// the transaction coordinator's marker decides them (txn_offsets.go); the
// transaction coordinator itself is package txncoord. Share groups
// (KIP-932: ShareGroupHeartbeat, ShareGroupDescribe) have their membership
// and server-side assignment here (share.go, share_records.go); their
// share-partition state (acquired and acknowledged records) is package
// sharepart's. ShareMember answers whether a member is alive and what it
// is assigned; Config.ShareMemberGone is told when one leaves or expires.
//
// # Where state lives
//
// Every group's metadata and committed offsets are records in the internal
// compacted topic __consumer_offsets (created on the first FindCoordinator
// with offsets.topic.num.partitions partitions, cleanup.policy=compact),
// in Kafka's own formats (records.go), appended through Broker.Produce so
// they replicate like any partition. A group belongs to partition
// abs(javaHashCode(groupID)) % partitions (Kafka's formula), and its
// coordinator is that partition's leader. Nothing lives only in memory:
// the in-memory groups are a cache of the partition, rebuilt by replaying
// it whenever this broker starts leading it at a new leader epoch.
//
//	__consumer_offsets-N record       key (int16 version first)        value (nil = tombstone)
//	offset commit                     v1 OffsetCommitKey{group,topic,p} OffsetCommitValue v3
//	group metadata                    v2 GroupMetadataKey{group}        GroupMetadataValue v3
//	KIP-848 group, member, target,    v3, v5, v6, v7, v8 (records848.go, by hand: kmsg has no
//	current assignment                types for them)
//	share group, member, target,      v10-v14 (share_records.go, by hand, Kafka 4.4's
//	current assignment                ShareGroup* schemas)
//
// A KIP-848 group's committed offsets are kept on a classic group of the
// same ID that stays Empty, so the offset APIs treat both kinds alike.
//
// # Goroutines
//
// One goroutine per loaded coordinator partition (a shard: the core's,
// package internal/coord, with this package's state of it in shard.go)
// owns that partition's groups; nothing else touches them. The core does
// the routing, the load by replay, the leader-epoch checks and the writes;
// see its package doc for the contract. Requests reach a shard as calls on
// a bounded channel and timers as ticks every TickInterval (from
// Config.Clock: the wall clock unless a test injects one). One
// goroutine per partition rather than one for all because a shard's
// writes block on Broker.Produce (with Raft, on a quorum round trip):
// with one goroutine for all, every group's heartbeat would wait behind
// every other partition's commit. Partitions are independent, so shards
// never share state and need no locks between them.
//
// Invariant: a shard sends the replies an event produced only after that
// event's records are in the log (committed). If a write fails, its
// replies become NOT_COORDINATOR and the shard unloads; the next request
// reloads it from the log, so memory never stays ahead of the log.
//
// A shard is tied to the leader epoch it loaded at. A request that finds
// the partition led by this broker at a newer epoch stops the old shard,
// waits for it to finish, and replays the partition (requests meanwhile
// get COORDINATOR_LOAD_IN_PROGRESS); a request for a partition led
// elsewhere gets NOT_COORDINATOR, and a shard whose epoch is gone unloads
// at its next tick.
//
// # State machines
//
// group.go and offsets.go are pure: methods take (event, now) and fill an
// effects value with records and replies. They read no clock and do no
// I/O, so testdata/*.txt scripts drive them on an injected clock
// (script_test.go; run with -rewrite to regenerate, and read the diff).
//
// # Locks
//
// The shard map and the creation of the offsets topic are the core's
// (internal/coord: its mu and createMu, never held while waiting on a
// shard, never held together). This package has no lock of its own.
//
// # Differences from Kafka
//
//   - Offsets of an empty group expire after offsets.retention.minutes
//     counted from the later of the commit and the moment the group became
//     empty (Kafka counts only the latter for groups that had members).
//     Compacting __consumer_offsets is the retention package's job.
//   - KIP-848: the subscribed topics' metadata is not persisted
//     (ConsumerGroupPartitionMetadata); after a load the first heartbeat
//     compares the topics with what the target assignment covers and
//     bumps the epoch if they differ. Regex subscriptions (regex.go) are
//     resolved with Go's RE2 at each heartbeat whose metadata version
//     moved, not asynchronously, and their resolutions are not stored
//     (Kafka's ConsumerGroupRegularExpression records): a load resolves
//     them again. Static members follow Kafka: UNRELEASED_INSTANCE_ID
//     while the instance's member has not left with epoch -2, then the
//     newcomer takes its place and partitions at epoch 0.
//   - Share groups: the assignor balances as Kafka's "simple" one does
//     (fewer members than partitions: each partition to one member; more:
//     every partition shared) and keeps the previous target's pairs where
//     the balance allows, by its own rules (shareTopicAssignment), so the
//     pairs it picks may differ from Kafka's. The metadata hash of
//     ShareGroupMetadataValue is Strata's own, and
//     ShareGroupStatePartitionMetadata (key 15) is not written: share-
//     partition state lives with the partitions (sharepart).
//   - A commit of more than ~900 KiB of offsets is written as several
//     batches, so it is not atomic across them.
package groupcoord
