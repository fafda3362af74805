package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-6
//
// Behaviour: a group key maps to partition abs(hash(group)) % n of
// __consumer_offsets (created on first use) and is answered with that
// partition's leader; a transaction key (type 1) the same way with
// __transaction_state (txncoord). Share keys get COORDINATOR_NOT_AVAILABLE:
// Strata has no share coordinator yet.
//
// Version notes:
//   - v1: coordinator type, error message; v2: no change; v3: flexible
//   - v4: batched keys (KIP-699); v5: no change (transactions); v6: share
//     groups (KIP-932)
func init() {
	register(10, 0, 6, concurrent, (*Server).handleFindCoordinator, (*authz).findCoordinator)
}

func (s *Server) handleFindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
	if req.CoordinatorType != 1 {
		return s.groups.FindCoordinator(ctx, req), nil
	}
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, k := range keys {
		co := s.txns.FindCoordinator(ctx, k)
		if req.Version < 4 {
			resp.ErrorCode, resp.ErrorMessage = co.ErrorCode, co.ErrorMessage
			resp.NodeID, resp.Host, resp.Port = co.NodeID, co.Host, co.Port
			break
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return resp, nil
}
