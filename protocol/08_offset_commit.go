package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
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

func (z *authz) offsetCommit(r *kmsg.OffsetCommitRequest) (kmsg.Response, func(kmsg.Response)) {
	groupDenied := !z.ok(acl.Read, acl.Group, r.Group)
	name := func(i int) string {
		if r.Version >= 10 {
			return z.topicName(r.Topics[i].TopicID)
		}
		return r.Topics[i].Topic
	}
	keep, denied := z.splitTopics(len(r.Topics), acl.Read, name)
	code := errTopicAuth
	if groupDenied {
		keep, denied, code = nil, append(keep, denied...), errGroupAuth
	}
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	add := func(resp *kmsg.OffsetCommitResponse) {
		for _, t := range gone {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
	if len(keep) == 0 {
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		add(resp)
		return resp, nil
	}
	return nil, func(resp kmsg.Response) { add(resp.(*kmsg.OffsetCommitResponse)) }
}
