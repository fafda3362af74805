package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch: v0-10
//
// Behaviour: committed offsets of the requested partitions (-1 when none),
// or of every partition with a commit when the topic list is null (v2+).
// An unknown group has no offsets and is no error.
//
// Version notes:
//   - v1: no change (Kafka-stored offsets); v2: top-level error, null topics
//   - v3: throttle; v5: leader epoch; v6: flexible
//   - v7: RequireStable (accepted; Strata has no transactional offset commits,
//     so no offset is ever pending and UNSTABLE_OFFSET_COMMIT never applies)
//   - v8: several groups per request; v9: KIP-848 member ID/epoch (accepted,
//     not checked); v10: topics by ID
func init() { register(9, 0, 10, concurrent, (*Server).handleOffsetFetch, (*authz).offsetFetch) }

func (s *Server) handleOffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	return s.groups.OffsetFetch(ctx, req)
}
