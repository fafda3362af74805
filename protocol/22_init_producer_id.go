package protocol

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
//   - With a transactional ID: COORDINATOR_NOT_AVAILABLE. Strata has no
//     transaction coordinator yet, and that is the code a Kafka broker gives
//     while no coordinator for the ID is available; clients retry it until
//     their transaction timeout and then fail.
//
// Version notes:
// * v1: no change; v2: flexible; v3: ProducerID/ProducerEpoch (KIP-360)
// * v4: PRODUCER_FENCED may be returned (transactions only); v5: KIP-890
//
// Differences from Kafka: Kafka hands an idempotent (non-transactional)
// producer a new ID on every call, ignoring the ID it sends; Strata bumps
// the epoch of the given ID (the ID is not checked against those it
// allocated, which is harmless: epochs only fence within one ID).
func init() { regKey(22, 0, 5) }

func (s *Server) handleInitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
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
