// Package coord is the core every Strata coordinator is built on: the
// group coordinator (groupcoord, on __consumer_offsets, share groups'
// membership included) and the transaction coordinator (txncoord, on
// __transaction_state). Each keeps its state in a compacted internal
// topic and serves it from memory; this package owns everything about
// that which is not specific to the state. (Share-partition state does
// not go through it: it is replicated in each partition's own Raft group,
// package sharepart, and there is no __share_group_state topic.)
//
// # What a user supplies
//
//   - Config.Topic, its partition count, replication factor and topic
//     configs: the topic is created on first use (EnsureTopic, Find), and
//     a key (group ID, transactional ID, share-group ID) belongs to
//     partition PartitionFor(key, n) -- Kafka's abs(Java hashCode) % n, so
//     that Kafka's tools compute the same coordinator.
//   - Config.NewState, returning a State per shard: Replay(record) applies
//     one stored record while loading; Loaded() runs once replay is done;
//     Tick(now) runs every Config.TickInterval; Stopped() runs as the
//     shard ends, to answer whatever still waits outside Call.
//   - The handling of each request: a function run on the key's shard
//     with CallKey (or DoKey; Call and Do for a shard in hand), which
//     changes the state, writes its records with
//     Shard.Write (or WriteTxn) and then replies -- at once, or later from
//     another call or a tick (the reply function may be kept).
//   - Keys and values of its records (Kafka's schemas of the topic); the
//     batches around them are this package's (BuildBatches,
//     DecodeBatches: uncompressed v2, producer ID -1 unless WriteTxn).
//
// # What the core guarantees
//
//   - One shard per partition of the topic that this broker leads, tied
//     to the leader epoch it loaded at, and a single goroutine per shard:
//     Replay, Loaded, Tick, Stopped and every call run on it, one at a
//     time, so the state needs no locks. Calls wait on a bounded queue
//     (1024); more wait in their senders.
//   - Load: a shard replays the partition from its log start to the log
//     end seen when it started, waiting (up to Config.LoadTimeout) for
//     that tail to commit, before it takes any call. Until then Route
//     waits up to Config.LoadWait and answers
//     COORDINATOR_LOAD_IN_PROGRESS; clients retry it.
//   - Routing: a key whose partition this broker does not lead, or a
//     shard that stopped before replying, gets NOT_COORDINATOR (the
//     client looks the coordinator up again). With RequireElectedEpoch,
//     the placeholder leader epoch 0 of a partition whose first leader
//     is not recorded yet gets COORDINATOR_LOAD_IN_PROGRESS instead of a
//     shard that would be replaced at the elected epoch.
//   - New leader epoch: a request that finds the partition led at a
//     newer epoch stops the old shard, and the new one replays the log
//     only after the old one's goroutine (and so its writes) ended; a
//     request whose shard stopped under it because of such a move is
//     followed once to the new shard (Route, CallKey) rather than
//     answered NOT_COORDINATOR, as after a restart's re-election. Every
//     tick checks that this broker still leads at the shard's epoch and
//     unloads the shard when it does not.
//   - Write then reply: Shard.Write returns once the records are
//     committed (replicated through Raft by replication.Broker.Produce);
//     a handler replies after it, so no client sees state that is not in
//     the log. A failed write stops the shard (its memory is ahead of the
//     log); the next request reloads it from the log.
//   - Time: every timer of the core (ticks, load deadline, load wait)
//     comes from Config.Clock, Real by default; scripted tests pass a
//     Fake and advance it.
package coord
