package protocol

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// InitProducerId: v0-5
//
// Behaviour:
//   - Without a transactional ID and without an existing producer: a new
//     producer ID from Broker.AllocateProducerID (persisted, never reused),
//     epoch 0.
//   - Without a transactional ID but with the producer's current ID and epoch
//     (v3+, KIP-360, sent when an idempotent producer resets after an error):
//     the same ID with the epoch bumped, so the partitions' producer state
//     restarts its sequences. At the epoch limit (32767) a new ID with epoch 0
//     is allocated instead, as Kafka does for transactional producers. An ID
//     given without an epoch (or the reverse) is INVALID_REQUEST.
//   - With a transactional ID: the transaction coordinator answers
//     (txncoord.Coordinator.InitProducerID): a new ID at epoch 0 for a new
//     transactional ID, else the epoch bumped (a new ID at the epoch limit),
//     which fences older instances; an open transaction of an older instance
//     is aborted first (CONCURRENT_TRANSACTIONS meanwhile; clients retry).
//     v3+ with the client's current ID and epoch (KIP-360): the bump if they
//     are current (or the answer of the last bump, for a retry), else
//     PRODUCER_FENCED (v4+; INVALID_PRODUCER_EPOCH before). A timeout above
//     transaction.max.timeout.ms is INVALID_TRANSACTION_TIMEOUT;
//     NOT_COORDINATOR when another broker coordinates the ID.
//
// Version notes:
// * v1: no change; v2: flexible; v3: ProducerID/ProducerEpoch (KIP-360)
// * v4: PRODUCER_FENCED may be returned (transactions only); v5: KIP-890
//
// Differences from Kafka: Kafka hands an idempotent (non-transactional)
// producer a new ID on every call, ignoring the ID it sends; Strata bumps
// the epoch of the given ID (the ID is not checked against those it
// allocated, which is harmless: epochs only fence within one ID).
func init() { register(22, 0, 5, barrier, (*Server).handleInitProducerID, (*authz).initProducerID) }

func (s *Server) handleInitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		return s.txns.InitProducerID(ctx, req)
	}
	if req.Version >= 3 && (req.ProducerID >= 0) != (req.ProducerEpoch >= 0) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	if req.Version >= 3 && req.ProducerID >= 0 && req.ProducerEpoch < math.MaxInt16-1 {
		resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
		return resp, nil
	}
	id, err := s.broker.AllocateProducerID(ctx)
	if err != nil {
		resp.ErrorCode = errCode(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}

// initProducerID: a transactional producer needs WRITE on its ID; an
// idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
func (z *authz) initProducerID(r *kmsg.InitProducerIDRequest) (kmsg.Response, func(kmsg.Response)) {
	if r.TransactionalID != nil {
		return z.transactionalID(r, acl.Write, *r.TransactionalID)
	}
	if !z.cluster(acl.IdempotentWrite) && !z.a.AuthorizeAny(z.set, z.r, acl.Write, acl.Topic) {
		return errorResponse(r, errClusterAuth), nil
	}
	return nil, nil
}
