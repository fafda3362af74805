// Package transport is the replication transport: one Mux per broker
// carries the RPCs of every Raft group it runs (the metadata quorum's and
// each partition's) and the metadata requests brokers forward to the
// controller, over a few TCP connections per peer broker. Each group gets
// a Group from the Mux, its raft.Transport.
//
// It knows raft (hashicorp/raft's RPC types) and nodes (the IDs peers name
// and, with TLS, their certificates: internal/auth), and nothing else of
// Strata's: what a group holds, who may join, and what a forwarded request
// means are the broker's (package replication), which it asks through
// Config's hooks (Admit, AdmitFrom, CheckForward, ExpectPeer) and the
// forward handler.
//
// Files: mux.go (Config, the Mux: opening, groups, closing), server.go
// (the accepting side), client.go (the dialing side: lanes, calls),
// frames.go (reading and writing frames), group.go (a group's
// raft.Transport), pipeline.go (its AppendEntries pipeline), forward.go
// (forwarded requests), codec.go (the RPC encoding), validate.go (what a peer's
// frame must satisfy), tls.go (mutual TLS with node certificates),
// heartbeats.go (heartbeats coalesced per peer), commit.go (idle
// commit-index updates answered by the pipeline), catchup.go (sending a
// follower the rest of a backlog; waiting for a follower that is down),
// elections.go (the pre-vote gate), join_gate.go (a joining replica's
// votes held back until it caught up), recover.go (a panic in a
// connection's goroutine ends that connection, not the process),
// latency.go and stats.go (what the broker exports as metrics).
// Its tests run it alone (mux_test.go, ...) and under raft, with the
// in-process cluster of replication/internal/raftharness (harness_test.go,
// catchup_test.go).
//
// # Raft design
//
// One transport per broker (mux.go, codec.go). A Mux owns
// one TCP listener (the broker's replication listener) and, per peer
// broker, a fixed pool of connections: Config.ConnsPerPeer data lanes
// and one control lane. Every Raft group (the metadata group and each
// partition's group) gets a Group from the Mux: a raft.Transport
// whose RPCs carry the group id. A partition group's AppendEntries are
// pinned to one data lane (hash of the group id), so they, and its
// pipeline, stay in order. The control lane carries what must never wait
// behind record data: heartbeat rounds, votes, pre-votes and TimeoutNow
// of every group, all of the metadata group's traffic, and forwarded
// metadata requests (below, "Staying up under load"). Frames are
// length-prefixed and bounded (maxFrameBytes); the RPC structs are encoded
// by hand (no msgpack: not an allowed dependency), every length checked
// before allocating. Writes go through one buffered writer per connection,
// flushed when its queue is empty, so the heartbeats of hundreds of
// groups to one peer leave in a few syscalls (coalesced at the socket).
// InstallSnapshot streams on a connection of its own, never on the shared
// ones. Heartbeats take hashicorp's fast path (SetHeartbeatHandler) on the
// receiving side and never wait behind disk I/O.
//
//	frame:  | len u32 | kind u8 | reqID u64 | group (uvarint len + bytes) | body |
//	kind:   AppendEntries, RequestVote, RequestPreVote, TimeoutNow,
//	        InstallSnapshot (own connection, body then len bytes of data),
//	        Response (body = encoded response), Error (body = message)
//
// # Catch-up
//
// Catch-up (catchup.go): hashicorp/raft's pipeline sends a
// follower at most MaxAppendEntries entries per new entry on the leader,
// else one AppendEntries per CommitTimeout, so the end of a burst (or a
// follower back from an outage once producers pause) waited seconds per
// 64 entries. A pipeline whose follower acknowledges the last entry sent
// while the leader's log goes further appends a barrier entry, which
// makes raft send the rest at once (partition groups and the metadata
// group). A follower that is down: raft sleeps backoff(10 ms, failures,
// 12) before each retry, 10.24 s from the twelfth failure on, reset only
// by a success, and a dial to a stopped broker fails at once, so about
// 20 s into an outage the leader retried every 10 s and a broker back
// from it waited up to that long (heartbeats resume at once but do not cut
// raft's sleep short). Instead an AppendEntries whose dial fails waits
// until a dial to the peer succeeds (one redial loop per down peer, every
// 200 ms, only while someone waits) and is sent then, so raft sees one slow
// call, not a string of failures. The wait ends, and the call fails as
// before, when the group's raft changes state or shuts down, when the
// peer leaves its configuration, when the group or the Mux closes, or
// after 5 minutes; heartbeats, votes and snapshots fail at once as
// before. A 25 s outage (replication/restart_catchup_test.go): the
// restarted broker started 0.2-0.3 s after its restart with every
// metadata command and a replica caught up, against 6 s before.
package transport
