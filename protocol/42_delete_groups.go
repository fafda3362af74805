package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// DeleteGroups: v0-3
//
// Behaviour: an empty group's offsets and metadata are tombstoned in
// __consumer_offsets; NON_EMPTY_GROUP while it has members,
// GROUP_ID_NOT_FOUND for an unknown group.
//
// Version notes: v1: no change; v2: flexible; v3: error message.
func init() { register(42, 0, 3, barrier, (*Server).handleDeleteGroups, (*authz).deleteGroups) }

func (s *Server) handleDeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) (kmsg.Response, error) {
	return s.groups.DeleteGroups(ctx, req)
}

func (z *authz) deleteGroups(r *kmsg.DeleteGroupsRequest) (kmsg.Response, func(kmsg.Response)) {
	var keep, gone []string
	for _, g := range r.Groups {
		if z.ok(acl.Delete, acl.Group, g) {
			keep = append(keep, g)
		} else {
			gone = append(gone, g)
		}
	}
	if len(gone) == 0 {
		return nil, nil
	}
	r.Groups = keep
	return nil, func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteGroupsResponse)
		for _, g := range gone {
			res := kmsg.NewDeleteGroupsResponseGroup()
			res.Group, res.ErrorCode = g, errGroupAuth
			dr.Groups = append(dr.Groups, res)
		}
	}
}
