package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-6
//
// Behaviour: a group key maps to partition abs(hash(group)) % n of
// __consumer_offsets (created on first use) and is answered with that
// partition's leader. Transaction and share keys get
// COORDINATOR_NOT_AVAILABLE: Strata has no such coordinators yet.
//
// Version notes:
//   - v1: coordinator type, error message; v2: no change; v3: flexible
//   - v4: batched keys (KIP-699); v5: no change (transactions); v6: share
//     groups (KIP-932)
func init() { regKey(10, 0, 6) }

func (s *Server) handleFindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) (kmsg.Response, error) {
	return s.groups.FindCoordinator(ctx, req), nil
}
