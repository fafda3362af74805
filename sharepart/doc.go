// Package sharepart is the share-partition side of share groups (KIP-932):
// the per-record state of one share group on one partition (state.go),
// the leader's decisions over it -- acquire, acknowledge, release, renew,
// expire (leader.go) -- and the replicated form of both: deltas, applied
// by every replica in the partition's log order, and snapshots.
//
// # Where the state lives
//
// The share-partition state belongs with the partition's leader, who
// serves ShareFetch and ShareAcknowledge (Kafka's share-partition leader).
// It is replicated through the partition's own Raft group: each
// ShareFetch or ShareAcknowledge that changes a partition's state is one
// side-log entry of that group (a Delta, never one per record), which
// every replica applies to its Registry; the group's snapshots carry the
// whole Registry. A new leader therefore has the state already, with no
// replay of another topic (Kafka keeps it in __share_group_state through
// its share coordinator; docs/ARCHITECTURE.md says why Strata does not).
//
// # Pure state, injected time
//
// State and Registry change only by applying deltas; the leader computes
// a delta from the current state, the log's batches and the time it is
// given (unix milliseconds: the stored lock deadlines are wall-clock, as
// Kafka's), proposes it, and answers the client once it is applied. No
// function here reads a clock, so scripted tests (testdata/*.txt) drive
// time.
package sharepart
