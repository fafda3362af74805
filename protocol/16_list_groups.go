package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// ListGroups: v0-5
//
// Behaviour: the groups this broker coordinates (loading its partitions of
// __consumer_offsets if needed).
//
// Version notes: v1: throttle; v2: no change; v3: flexible; v4: state
// filter (case-insensitive); v5: type filter (KIP-848; every group here is
// "classic").
func init() { register(16, 0, 5, concurrent, (*Server).handleListGroups, (*authz).listGroups) }

func (s *Server) handleListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) (kmsg.Response, error) {
	return s.groups.ListGroups(ctx, req)
}

// listGroups: every group with DESCRIBE on the cluster, else only those
// the principal may describe.
func (z *authz) listGroups(*kmsg.ListGroupsRequest) (kmsg.Response, func(kmsg.Response)) {
	if z.cluster(acl.Describe) {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		lr := resp.(*kmsg.ListGroupsResponse)
		keep := lr.Groups[:0]
		for _, g := range lr.Groups {
			if z.ok(acl.Describe, acl.Group, g.Group) {
				keep = append(keep, g)
			}
		}
		lr.Groups = keep
	}
}
