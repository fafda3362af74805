package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
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

// offsetDelete: DELETE on the group, else the whole request fails; READ
// per topic.
func (z *authz) offsetDelete(r *kmsg.OffsetDeleteRequest) (kmsg.Response, func(kmsg.Response)) {
	if d, _ := z.group(r, acl.Delete, r.Group); d != nil {
		return d, nil
	}
	keep, denied := z.splitTopics(len(r.Topics), acl.Read, func(i int) string { return r.Topics[i].Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		or := resp.(*kmsg.OffsetDeleteResponse)
		for _, t := range gone {
			st := kmsg.NewOffsetDeleteResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetDeleteResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errTopicAuth
				st.Partitions = append(st.Partitions, sp)
			}
			or.Topics = append(or.Topics, st)
		}
	}
}
