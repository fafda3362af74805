package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// ShareGroupHeartbeat: v1 (KIP-932)
//
// Behaviour: share-group membership (groupcoord/share.go): a member joins
// with epoch 0 and its subscribed topics, heartbeats with its epoch (or
// the one before it), leaves with -1. The coordinator assigns partitions
// on the server ("simple": fewer members than partitions spreads them,
// more members share each partition) and answers the assignment when it
// changed or the request was full (SubscribedTopicNames set). Members
// that miss group.share.session.timeout.ms are removed; the group holds
// at most group.share.max.size members (GROUP_MAX_SIZE_REACHED). A group
// ID in use by a classic or consumer group is GROUP_ID_NOT_FOUND.
//
// Version notes: v1 is the first version Kafka 4.x serves (v0 was the
// early-access version); the client chooses its member ID.
func init() {
	register(76, 1, 1, barrier, (*Server).handleShareGroupHeartbeat,
		needsGroup(acl.Read, func(r *kmsg.ShareGroupHeartbeatRequest) string { return r.GroupID }))
}

func (s *Server) handleShareGroupHeartbeat(ctx context.Context, req *kmsg.ShareGroupHeartbeatRequest) (kmsg.Response, error) {
	if !s.shareEnabled() { // share.version 0: share groups are off (as Kafka 4.4)
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp, nil
	}
	ci := clientFrom(ctx)
	return s.groups.ShareGroupHeartbeat(ctx, req, ci.id, ci.host)
}
