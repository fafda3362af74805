// Package protocol serves the Kafka wire protocol for one Strata broker.
//
// It owns the TCP listener, request framing, the request header, API version
// negotiation, and one handler per Kafka API (files named after the API key,
// as in franz-go's kfake: the list under "APIs" below). Every handler file
// registers, in its init(), the versions it serves, its handler, whether
// its requests are barriers and its ACL rule (register, dispatch.go):
// dispatch, the barrier rule, authorization and the ApiVersions answer all
// come from that one registration, so the broker cannot claim a version
// nobody serves nor serve an API without saying who may call it (the
// shared rules and how they combine: acl_rules.go). Storage and cluster
// state live in replication.Broker and log.Partition, group state in
// groupcoord (the group handlers 08-16, 42, 47, 68, 69 are one-line calls
// into it; the server owns one groupcoord.Coordinator and closes it first
// on Close, so requests parked in a rebalance are answered at once); this
// package only translates.
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
// into the response buffer; a large committed record set goes from the
// segment file to the socket with sendfile (fetch_sendfile.go, a
// log.Region released once it is sent).
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
// are barriers (marked in the list under "APIs"). Every request starts only once the last barrier before it
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
// # APIs
//
// Every API served, as registered (TestDocListsEveryAPI fails when this
// list and the registry differ, and prints the list to paste here):
//
//	key API                              versions order      file
//	  0 Produce                          3-13     barrier    00_produce.go
//	  1 Fetch                            4-18     concurrent 01_fetch.go
//	  2 ListOffsets                      0-11     concurrent 02_list_offsets.go
//	  3 Metadata                         0-13     concurrent 03_metadata.go
//	  8 OffsetCommit                     0-10     barrier    08_offset_commit.go
//	  9 OffsetFetch                      0-10     concurrent 09_offset_fetch.go
//	 10 FindCoordinator                  0-6      concurrent 10_find_coordinator.go
//	 11 JoinGroup                        0-9      barrier    11_join_group.go
//	 12 Heartbeat                        0-4      concurrent 12_heartbeat.go
//	 13 LeaveGroup                       0-5      barrier    13_leave_group.go
//	 14 SyncGroup                        0-5      barrier    14_sync_group.go
//	 15 DescribeGroups                   0-6      concurrent 15_describe_groups.go
//	 16 ListGroups                       0-5      concurrent 16_list_groups.go
//	 17 SASLHandshake                    0-1      barrier    17_sasl_handshake.go
//	 18 ApiVersions                      0-4      concurrent 18_api_versions.go
//	 19 CreateTopics                     0-7      barrier    19_create_topics.go
//	 20 DeleteTopics                     0-6      barrier    20_delete_topics.go
//	 21 DeleteRecords                    0-2      barrier    21_delete_records.go
//	 22 InitProducerID                   0-5      barrier    22_init_producer_id.go
//	 23 OffsetForLeaderEpoch             0-4      concurrent 23_offset_for_leader_epoch.go
//	 24 AddPartitionsToTxn               0-5      barrier    24_add_partitions_to_txn.go
//	 25 AddOffsetsToTxn                  0-4      barrier    25_add_offsets_to_txn.go
//	 26 EndTxn                           0-5      barrier    26_end_txn.go
//	 27 WriteTxnMarkers                  0-1      barrier    27_write_txn_markers.go
//	 28 TxnOffsetCommit                  0-5      barrier    28_txn_offset_commit.go
//	 29 DescribeACLs                     1-3      concurrent 29_describe_acls.go
//	 30 CreateACLs                       1-3      barrier    30_create_acls.go
//	 31 DeleteACLs                       1-3      barrier    31_delete_acls.go
//	 32 DescribeConfigs                  0-4      concurrent 32_describe_configs.go
//	 33 AlterConfigs                     0-2      barrier    33_alter_configs.go
//	 35 DescribeLogDirs                  0-4      concurrent 35_describe_log_dirs.go
//	 36 SASLAuthenticate                 0-2      barrier    36_sasl_authenticate.go
//	 37 CreatePartitions                 0-3      barrier    37_create_partitions.go
//	 42 DeleteGroups                     0-3      barrier    42_delete_groups.go
//	 43 ElectLeaders                     0-2      barrier    43_elect_leaders.go
//	 44 IncrementalAlterConfigs          0-1      barrier    44_incremental_alter_configs.go
//	 45 AlterPartitionAssignments        0-1      concurrent 45_alter_partition_reassignments.go
//	 46 ListPartitionReassignments       0-0      concurrent 46_list_partition_reassignments.go
//	 47 OffsetDelete                     0-0      barrier    47_offset_delete.go
//	 48 DescribeClientQuotas             0-1      concurrent 48_describe_client_quotas.go
//	 49 AlterClientQuotas                0-1      barrier    49_alter_client_quotas.go
//	 50 DescribeUserSCRAMCredentials     0-0      concurrent 50_describe_user_scram_credentials.go
//	 51 AlterUserSCRAMCredentials        0-0      barrier    51_alter_user_scram_credentials.go
//	 55 DescribeQuorum                   0-2      concurrent 55_describe_quorum.go
//	 57 UpdateFeatures                   0-2      barrier    57_update_features.go
//	 60 DescribeCluster                  0-2      concurrent 60_describe_cluster.go
//	 61 DescribeProducers                0-0      concurrent 61_describe_producers.go
//	 64 UnregisterBroker                 0-0      barrier    64_unregister_broker.go
//	 65 DescribeTransactions             0-0      concurrent 65_describe_transactions.go
//	 66 ListTransactions                 0-1      concurrent 66_list_transactions.go
//	 68 ConsumerGroupHeartbeat           0-1      barrier    68_consumer_group_heartbeat.go
//	 69 ConsumerGroupDescribe            0-1      concurrent 69_consumer_group_describe.go
//	 74 ListConfigResources              0-1      concurrent 74_list_config_resources.go
//	 76 ShareGroupHeartbeat              1-1      barrier    76_share_group_heartbeat.go
//	 77 ShareGroupDescribe               1-1      concurrent 77_share_group_describe.go
//	 78 ShareFetch                       1-2      concurrent 78_share_fetch.go
//	 79 ShareAcknowledge                 1-2      concurrent 79_share_acknowledge.go
//	 83 InitializeShareGroupState        0-0      concurrent share_admin.go
//	 86 DeleteShareGroupState            0-0      concurrent share_admin.go
//	 87 ReadShareGroupStateSummary       0-1      concurrent share_admin.go
//	 90 DescribeShareGroupOffsets        0-1      concurrent share_admin.go
//	 91 AlterShareGroupOffsets           0-0      concurrent share_admin.go
//	 92 DeleteShareGroupOffsets          0-0      concurrent share_admin.go
//
// # Errors
//
// errors.go holds the one table that maps log. and replication. sentinel
// errors to Kafka error codes. A handler that panics (a bug, never bad
// input) is recovered, logged with its stack, and its connection closed;
// a goroutine a handler starts for one partition recovers its own panic
// and fails only that partition with UNKNOWN_SERVER_ERROR (recover.go).
package protocol
