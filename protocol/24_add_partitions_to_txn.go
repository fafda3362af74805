package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// AddPartitionsToTxn: v0-5 (txncoord.Coordinator.AddPartitionsToTxn)
//
// Behaviour: adds partitions to the producer's transaction, starting it
// (Empty/Complete -> Ongoing), and writes the new state to
// __transaction_state before answering. Per partition:
// UNKNOWN_TOPIC_OR_PARTITION for unknown ones (the others then
// OPERATION_NOT_ATTEMPTED), INVALID_PRODUCER_ID_MAPPING for an unknown
// transactional ID or another producer ID, PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH below v2) for another epoch,
// CONCURRENT_TRANSACTIONS while the previous transaction completes,
// NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when the ID's
// coordinator is elsewhere or loading.
//
// Version notes:
//   - v1: no change; v2: PRODUCER_FENCED; v3: flexible
//   - v4: batched transactions and VerifyOnly (KIP-890 part 1, sent by
//     brokers): VerifyOnly answers INVALID_TXN_STATE for a partition not in
//     the ongoing transaction and writes nothing
//   - v5: TRANSACTION_ABORTABLE may be returned (Strata does not)
func init() {
	register(24, 0, 5, barrier, (*Server).handleAddPartitionsToTxn, (*authz).addPartitionsToTxn)
}

func (s *Server) handleAddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) (kmsg.Response, error) {
	return s.txns.AddPartitionsToTxn(ctx, req)
}

// addPartitionsToTxn: v0-v3 (from clients) need WRITE on the
// transactional ID and on each topic; v4+ (from brokers) CLUSTER_ACTION.
// Kafka answers a partly denied request without adding anything: the
// denied topics get their error, the others OPERATION_NOT_ATTEMPTED.
func (z *authz) addPartitionsToTxn(r *kmsg.AddPartitionsToTxnRequest) (kmsg.Response, func(kmsg.Response)) {
	if r.Version >= 4 {
		return z.clusterOp(r, acl.ClusterAction)
	}
	txnDenied := !z.ok(acl.Write, acl.TransactionalID, r.TransactionalID)
	_, denied := z.splitTopics(len(r.Topics), acl.Write, func(i int) string { return r.Topics[i].Topic })
	if !txnDenied && len(denied) == 0 {
		return nil, nil
	}
	isDenied := map[int]bool{}
	for _, i := range denied {
		isDenied[i] = true
	}
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for i, t := range r.Topics {
		code := int16(55) // OPERATION_NOT_ATTEMPTED
		switch {
		case txnDenied:
			code = errTxnAuth
		case isDenied[i]:
			code = errTopicAuth
		}
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
