package protocol

// TxnOffsetCommit: v0-4 (groupcoord.Coordinator.TxnOffsetCommit)
//
// Behaviour: the offsets are written to the group's __consumer_offsets
// partition in a transactional batch of the producer, and stay pending
// (invisible to OffsetFetch; UNSTABLE_OFFSET_COMMIT for RequireStable)
// until the transaction's marker commits them or aborts them. From v3 the
// member ID and generation are checked (KIP-447): UNKNOWN_MEMBER_ID,
// ILLEGAL_GENERATION, FENCED_INSTANCE_ID. Per partition
// UNKNOWN_TOPIC_OR_PARTITION and OFFSET_METADATA_TOO_LARGE.
//
// Version notes: v1 no change; v2 leader epoch; v3 member fields and
// flexible; v4 TRANSACTION_ABORTABLE (not returned).
func init() { regKey(28, 0, 4) }
