package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// SyncGroup: v0-5
//
// Behaviour: the leader's assignment is stored (a group metadata record in
// __consumer_offsets) and handed to every member; followers wait for it.
//
// Version notes: v1: throttle; v2: no change; v3: group.instance.id;
// v4: flexible; v5: protocol type and name, checked against the group's
// (INCONSISTENT_GROUP_PROTOCOL).
func init() {
	register(14, 0, 5, barrier, (*Server).handleSyncGroup,
		needsGroup(acl.Read, func(r *kmsg.SyncGroupRequest) string { return r.Group }))
}

func (s *Server) handleSyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (kmsg.Response, error) {
	return s.groups.SyncGroup(ctx, req)
}
