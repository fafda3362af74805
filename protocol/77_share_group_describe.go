package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareGroupDescribe: v1 (KIP-932)
//
// Behaviour: state (Empty, Stable), group and assignment epochs, the
// assignor ("simple") and each member with its subscription and
// assignment (topic IDs and names). GROUP_ID_NOT_FOUND for an unknown
// group or one of another type.
//
// Version notes: v1 is the first version Kafka 4.x serves.
func init() { register(77, 1, 1, concurrent, (*Server).handleShareGroupDescribe, fillsOps) }

func (s *Server) handleShareGroupDescribe(ctx context.Context, req *kmsg.ShareGroupDescribeRequest) (kmsg.Response, error) {
	return s.groups.ShareGroupDescribe(ctx, req)
}
