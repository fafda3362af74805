package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// ListTransactions: v0-1 (txncoord.Coordinator.ListTransactions)
//
// Behaviour: the transactions of every __transaction_state partition this
// broker leads (clients ask every broker), filtered by state names
// (unknown names are echoed in UnknownStateFilters), producer IDs and
// (v1) DurationFilterMillis: transactions running at least that long.
//
// Version notes: v2's TransactionalIDPattern is not offered.
func init() {
	register(66, 0, 1, concurrent, (*Server).handleListTransactions, (*authz).listTransactions)
}

func (s *Server) handleListTransactions(ctx context.Context, req *kmsg.ListTransactionsRequest) (kmsg.Response, error) {
	return s.txns.ListTransactions(ctx, req)
}

// listTransactions lists only the transactional IDs the principal may
// describe.
func (z *authz) listTransactions(*kmsg.ListTransactionsRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		lr := resp.(*kmsg.ListTransactionsResponse)
		keep := lr.TransactionStates[:0]
		for _, st := range lr.TransactionStates {
			if z.ok(acl.Describe, acl.TransactionalID, st.TransactionalID) {
				keep = append(keep, st)
			}
		}
		lr.TransactionStates = keep
	}
}
