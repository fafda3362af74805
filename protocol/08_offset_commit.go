package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v0-10
//
// Behaviour: the group coordinator (groupcoord) validates the member
// fields, stores the offsets as records in __consumer_offsets and answers
// once they are committed. A commit with generation -1 and no member ID
// (kadm, kcat without -G, v0) is a "simple" commit, accepted while the
// group has no members.
//
// Version notes:
//   - v1: generation, member ID, per-partition timestamp (ignored)
//   - v2-4: retention time (ignored: offsets do not expire in Strata)
//   - v5: no retention time; v6: leader epoch; v7: group.instance.id
//   - v8: flexible; v9: KIP-848 (GROUP_ID_NOT_FOUND instead of
//     ILLEGAL_GENERATION for an unknown group with a generation)
//   - v10: topics by ID (UNKNOWN_TOPIC_ID)
func init() { register(8, 0, 10, barrier, (*Server).handleOffsetCommit, (*authz).offsetCommit) }

func (s *Server) handleOffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (kmsg.Response, error) {
	return s.groups.OffsetCommit(ctx, req)
}
