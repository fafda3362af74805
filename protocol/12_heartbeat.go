package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// Heartbeat: v0-4
//
// Behaviour: keeps a classic member's session alive; REBALANCE_IN_PROGRESS
// tells it to rejoin, ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID /
// FENCED_INSTANCE_ID that it is out of the group.
//
// Version notes: v1: throttle; v2: no change; v3: group.instance.id;
// v4: flexible.
func init() {
	register(12, 0, 4, concurrent, (*Server).handleHeartbeat,
		needsGroup(acl.Read, func(r *kmsg.HeartbeatRequest) string { return r.Group }))
}

func (s *Server) handleHeartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) (kmsg.Response, error) {
	return s.groups.Heartbeat(ctx, req)
}
