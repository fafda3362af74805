package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// AddOffsetsToTxn: v0-4 (txncoord.Coordinator.AddOffsetsToTxn)
//
// Behaviour: adds the group's __consumer_offsets partition
// (abs(hash(group)) % partitions) to the transaction, with
// AddPartitionsToTxn's checks and codes; INVALID_GROUP_ID for an empty
// group.
//
// Version notes: v1 no change; v2 PRODUCER_FENCED; v3 flexible; v4
// TRANSACTION_ABORTABLE (not returned).
func init() { register(25, 0, 4, barrier, (*Server).handleAddOffsetsToTxn, (*authz).addOffsetsToTxn) }

func (s *Server) handleAddOffsetsToTxn(ctx context.Context, req *kmsg.AddOffsetsToTxnRequest) (kmsg.Response, error) {
	return s.txns.AddOffsetsToTxn(ctx, req)
}

// addOffsetsToTxn: WRITE on the transactional ID, then READ on the group.
func (z *authz) addOffsetsToTxn(r *kmsg.AddOffsetsToTxnRequest) (kmsg.Response, func(kmsg.Response)) {
	if d, _ := z.transactionalID(r, acl.Write, r.TransactionalID); d != nil {
		return d, nil
	}
	return z.group(r, acl.Read, r.Group)
}
