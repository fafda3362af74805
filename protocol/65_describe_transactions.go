package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
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
