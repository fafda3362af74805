package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// LeaveGroup: v0-5
//
// Behaviour: removes members (one in v0-2; a batch by member or instance
// ID from v3, KIP-345) and rebalances the rest.
//
// Version notes: v1: throttle; v2: no change; v3: batched members with
// per-member errors; v4: flexible; v5: reason.
func init() {
	register(13, 0, 5, barrier, (*Server).handleLeaveGroup,
		needsGroup(acl.Read, func(r *kmsg.LeaveGroupRequest) string { return r.Group }))
}

func (s *Server) handleLeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) (kmsg.Response, error) {
	return s.groups.LeaveGroup(ctx, req)
}
