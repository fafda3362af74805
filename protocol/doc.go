// Package protocol serves the Kafka wire protocol for one Strata broker.
//
// It owns the TCP listener, request framing, the request header, API version
// negotiation, and one handler per Kafka API (files named after the API key,
// 00_produce.go ... 60_describe_cluster.go, as in franz-go's kfake). Every
// handler registers its version range in an init() next to the handler with
// regKey, so the ApiVersions answer is built from the handlers that exist and
// cannot claim a version nobody serves. Storage and cluster state live in
// replication.Broker and log.Partition, group state in groupcoord (the
// group handlers 08-16, 42, 47, 68, 69 are one-line calls into it; the
// server owns one groupcoord.Coordinator and closes it first on Close, so
// requests parked in a rebalance are answered at once); this package only
// translates.
//
// # Framing
//
//	request  : [size int32][header][body]
//	header   : api_key int16 | api_version int16 | correlation_id int32 |
//	           client_id nullable string (int16 length) |
//	           tagged fields (header v2, only when the API version is flexible)
//	response : [size int32][correlation_id int32][tagged fields (v1 header)][body]
//
// Fetch responses are written with writev (fetch_encode.go): the stored
// record sets are handed to the socket as the log returned them, not copied
// into the response buffer.
//
// The ApiVersions response header is always v0 (no tagged fields) even for
// flexible versions, because a client parses it before it knows what the
// broker supports.
//
// # Connections
//
// Each connection has one reader goroutine and one writer goroutine. The
// reader reads a frame (its size checked against Config.MaxRequestBytes
// before anything is allocated), parses the header and decodes the body with
// kmsg, then starts the handler in its own goroutine and queues the request
// for the writer. The writer waits for each queued request in turn and
// writes its response, so responses leave strictly in request order however
// the handlers interleave. Two limits bound a connection's memory: the
// queue holds at most Config.MaxInFlightPerConn requests, and the request
// bytes held by unanswered requests stay within Config.MaxRequestBytes
// (one request may always be in flight); the reader stops reading while
// either is exhausted. One Fetch runs at a time per connection and its
// response is capped at 55 MiB (Kafka's fetch.max.bytes). At most
// Config.MaxConnections connections are open; one idle for
// Config.ConnectionsMaxIdle is closed.
//
// Produce bodies are read into pooled, size-classed buffers instead of
// fresh zeroed allocations (bodypool.go; Config.NoBodyPool turns it off).
// The writer returns a body to its pool once the response is encoded (or
// skipped for acks=0), after the handler is done. This is safe because
// Broker.Produce writes the records to the segment before it returns and
// keeps no reference to them: a Produce path that hands the batch to
// anything outliving the call (a Raft log cache, an in-flight send to
// followers) must copy it first, or set NoBodyPool. Other requests' bodies
// stay plain allocations, since handlers may keep parts of them.
//
// Ordering between handlers on one connection: requests that change state
// (Produce, CreateTopics, DeleteTopics, CreatePartitions, InitProducerId,
// DeleteRecords, AlterConfigs, IncrementalAlterConfigs, ElectLeaders,
// and the group writes: OffsetCommit, JoinGroup, SyncGroup, LeaveGroup,
// DeleteGroups, OffsetDelete, ConsumerGroupHeartbeat)
// are barriers. Every request starts only once the last barrier before it
// has finished, so it sees that change, and barriers therefore run one
// after another in request order: an idempotent producer's pipelined
// batches are appended in the order they were sent. Read-only requests
// (Metadata, Fetch, ListOffsets, ...) run concurrently with each other and
// with a later barrier; a barrier does not wait for an earlier read, so a
// Produce is not held behind a long-polling Fetch on the same connection
// (Kafka, which handles one request per connection at a time, would hold
// it; seeing newer data in an earlier read is harmless).
//
// A Produce with acks=0 is processed but produces no response (if it
// failed, the connection is closed instead, as Kafka does). A frame that
// is too large (or has a negative size), an unknown API key, an unsupported
// version of any API but ApiVersions, or a body that does not parse closes
// the connection after the responses already queued are written, with a log
// line, as Kafka does. ApiVersions with a version we do not support is
// answered in the v0 format with UNSUPPORTED_VERSION and our API list, so
// the client can retry with a version we have (KIP-511).
//
// # Goroutines and locks
//
// Server.mu protects the listener and connection sets; conn.budgetMu the
// connection's request byte budget; they are never held together. The
// fetch session cache (fetch_session.go) is shared by all connections and
// has its own order: a session's mu before fetchSessions.mu; neither nests
// with the other locks. Other conn state is owned by its reader goroutine
// (barrier bookkeeping) or its writer goroutine (the socket's write side).
// Handlers share nothing else but the Broker, which is safe for concurrent
// use.
//
// Shutdown(ctx) stops the listeners and the readers, answers parked long
// polls at once, lets the writers finish what is queued (bounded by a
// grace period, at most half of ctx's remaining time), then closes every
// socket, cancelling the handlers still running, and waits for the
// goroutines until ctx is done: a handler blocked in the broker (a produce
// waiting for a commit its quorum cannot make) is left behind, counted by
// API in the error (ErrShutdownIncomplete), and returns once the broker
// closes. Close is Shutdown without a deadline. A client that closes its
// side (EOF) has its in-flight handlers cancelled.
//
// # Errors
//
// errors.go holds the one table that maps log. and replication. sentinel
// errors to Kafka error codes. A handler that panics (a bug, never bad
// input) is recovered, logged with its stack, and its connection closed.
package protocol
