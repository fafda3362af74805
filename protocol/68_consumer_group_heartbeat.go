package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// ConsumerGroupHeartbeat: v0-1 (KIP-848)
//
// Behaviour: the next-generation consumer group protocol
// (groupcoord/consumer.go): members heartbeat their subscription and owned
// partitions; the coordinator computes the assignment with a server-side
// assignor ("uniform", the default, or "range") and hands each member its
// partitions once their previous owners revoked them.
//
// Regex subscriptions (SubscribedTopicRegex, v1) are evaluated on the
// broker with Go's RE2 against whole topic names (internal topics
// included, as in Kafka) and re-evaluated when topics are created or
// deleted; an invalid one is INVALID_REGULAR_EXPRESSION
// (groupcoord/regex.go). Static members (InstanceId) get Kafka's
// UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID and UNKNOWN_MEMBER_ID
// answers.
//
// Version notes: v1: the client chooses its member ID; regex subscriptions.
func init() {
	register(68, 0, 1, barrier, (*Server).handleConsumerGroupHeartbeat,
		needsGroup(acl.Read, func(r *kmsg.ConsumerGroupHeartbeatRequest) string { return r.Group }))
}

func (s *Server) handleConsumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest) (kmsg.Response, error) {
	ci := clientFrom(ctx)
	return s.groups.ConsumerGroupHeartbeat(ctx, req, ci.id, ci.host)
}
