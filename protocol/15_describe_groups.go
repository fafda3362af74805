package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups: v0-6
//
// Behaviour: state, protocol and members (with metadata and assignment
// while Stable or CompletingRebalance). An unknown group is "Dead".
//
// Version notes: v1: throttle; v2: no change; v3: authorized operations
// (when asked for, the principal's: acl_rules.go); v4: group.instance.id; v5: flexible; v6: error message and
// GROUP_ID_NOT_FOUND for an unknown group (KIP-1043).
func init() { register(15, 0, 6, concurrent, (*Server).handleDescribeGroups, fillsOps) }

func (s *Server) handleDescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) (kmsg.Response, error) {
	return s.groups.DescribeGroups(ctx, req)
}
