package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
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
