package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe: v0-1 (KIP-848)
//
// Behaviour: epochs, assignor, and each member's current and target
// assignment. GROUP_ID_NOT_FOUND for an unknown or classic group.
//
// Version notes: v1: member type (always 1, consumer).
func init() { register(69, 0, 1, concurrent, (*Server).handleConsumerGroupDescribe, fillsOps) }

func (s *Server) handleConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) (kmsg.Response, error) {
	return s.groups.ConsumerGroupDescribe(ctx, req)
}
