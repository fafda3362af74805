package protocol

// EndTxn: v0-4 (txncoord.Coordinator.EndTxn)
//
// Behaviour: commits or aborts the ongoing transaction: PrepareCommit /
// PrepareAbort is written to __transaction_state, a marker (control
// batch) is written to every partition of the transaction, then
// CompleteCommit / CompleteAbort. The answer waits for the markers, so
// once a client hears it the outcome is visible to read_committed
// consumers and to OffsetFetch. A retried EndTxn of a finished
// transaction with the same outcome succeeds; the other outcome, or no
// transaction, is INVALID_TXN_STATE; a fenced producer gets
// PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below v2).
//
// Version notes: v1 no change; v2 PRODUCER_FENCED; v3 flexible; v4
// TRANSACTION_ABORTABLE (not returned). v5 (KIP-890 part 2, an epoch bump
// per transaction) is not offered: Strata does not finalize the
// transaction.version feature, so clients use the v1 protocol.
func init() { regKey(26, 0, 4) }
