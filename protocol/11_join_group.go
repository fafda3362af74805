package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// JoinGroup: v0-9
//
// Behaviour: the classic rebalance protocol (groupcoord/group.go): the
// request waits until every member rejoined or the rebalance timeout
// passed; the leader gets every member's metadata and assigns in
// SyncGroup. The client ID and address are the member's (DescribeGroups).
//
// Version notes:
//   - v1: rebalance timeout; v2: throttle; v3: no change
//   - v4: MEMBER_ID_REQUIRED round trip for new dynamic members (KIP-394)
//   - v5: group.instance.id (static membership, KIP-345); v6: flexible
//   - v7: protocol type in the response; v8: reason (logged by nobody)
//   - v9: SkipAssignment (always false: a static leader that rejoins
//     triggers a rebalance instead)
func init() {
	register(11, 0, 9, barrier, (*Server).handleJoinGroup,
		needsGroup(acl.Read, func(r *kmsg.JoinGroupRequest) string { return r.Group }))
}

func (s *Server) handleJoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	ci := clientFrom(ctx)
	return s.groups.JoinGroup(ctx, req, ci.id, ci.host)
}
