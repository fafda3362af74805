package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

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
// TRANSACTION_ABORTABLE (not returned); v5 (KIP-890 part 2): the epoch is
// bumped by every EndTxn and the markers carry the new epoch; the response
// names the producer ID and epoch to continue with (a new ID at epoch 0
// once the epochs are exhausted); an abort with no transaction open
// succeeds (and bumps); a retry of an answered EndTxn (the previous epoch)
// gets the same answer.
func init() { register(26, 0, 5, barrier, (*Server).handleEndTxn, (*authz).endTxn) }

func (s *Server) handleEndTxn(ctx context.Context, req *kmsg.EndTxnRequest) (kmsg.Response, error) {
	return s.txns.EndTxn(ctx, req)
}

// endTxn: WRITE on the transactional ID.
func (z *authz) endTxn(r *kmsg.EndTxnRequest) (kmsg.Response, func(kmsg.Response)) {
	return z.transactionalID(r, acl.Write, r.TransactionalID)
}
