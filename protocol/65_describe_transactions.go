package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// DescribeTransactions: v0 (txncoord.Coordinator.DescribeTransactions)
//
// Behaviour: per transactional ID its state (Kafka's names: Empty,
// Ongoing, PrepareCommit, ...), producer ID and epoch, timeout, start
// time and partitions; TRANSACTIONAL_ID_NOT_FOUND for an unknown one,
// NOT_COORDINATOR when another broker coordinates it.
func init() {
	register(65, 0, 0, concurrent, (*Server).handleDescribeTransactions, (*authz).describeTransactions)
}

func (s *Server) handleDescribeTransactions(ctx context.Context, req *kmsg.DescribeTransactionsRequest) (kmsg.Response, error) {
	return s.txns.DescribeTransactions(ctx, req)
}

// describeTransactions: DESCRIBE per transactional ID; a denied one
// answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing else.
func (z *authz) describeTransactions(*kmsg.DescribeTransactionsRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		for i := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
			st := &resp.(*kmsg.DescribeTransactionsResponse).TransactionStates[i]
			if !z.ok(acl.Describe, acl.TransactionalID, st.TransactionalID) {
				d := kmsg.NewDescribeTransactionsResponseTransactionState()
				d.TransactionalID, d.ErrorCode = st.TransactionalID, errTxnAuth
				*st = d
			}
		}
	}
}
