package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete: v0
//
// Behaviour: removes committed offsets of topics the group is not
// subscribed to (GROUP_SUBSCRIBED_TO_TOPIC otherwise); any topic of an
// empty group. NON_EMPTY_GROUP for an active group that does not speak the
// consumer protocol (its subscriptions cannot be read).
func init() { register(47, 0, 0, barrier, (*Server).handleOffsetDelete, (*authz).offsetDelete) }

func (s *Server) handleOffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) (kmsg.Response, error) {
	return s.groups.OffsetDelete(ctx, req)
}
