package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
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
