package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
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

func (z *authz) offsetFetch(r *kmsg.OffsetFetchRequest) (kmsg.Response, func(kmsg.Response)) {
	hide := func(topics []kmsg.OffsetFetchResponseTopic, all bool) []kmsg.OffsetFetchResponseTopic {
		keep := topics[:0]
		for _, t := range topics {
			if z.ok(acl.Describe, acl.Topic, t.Topic) {
				keep = append(keep, t)
				continue
			}
			if all {
				continue
			}
			for j := range t.Partitions {
				p := kmsg.NewOffsetFetchResponseTopicPartition()
				p.Partition, p.ErrorCode = t.Partitions[j].Partition, errTopicAuth
				t.Partitions[j] = p
			}
			keep = append(keep, t)
		}
		return keep
	}
	if r.Version < 8 {
		if !z.ok(acl.Describe, acl.Group, r.Group) {
			return errorResponse(r, errGroupAuth), nil
		}
		return nil, func(resp kmsg.Response) {
			or := resp.(*kmsg.OffsetFetchResponse)
			or.Topics = hide(or.Topics, r.Topics == nil)
		}
	}
	return nil, func(resp kmsg.Response) {
		or := resp.(*kmsg.OffsetFetchResponse)
		for i := range or.Groups {
			g := &or.Groups[i]
			if !z.ok(acl.Describe, acl.Group, g.Group) {
				g.Topics, g.ErrorCode = nil, errGroupAuth
				continue
			}
			all := true
			for _, rg := range r.Groups {
				if rg.Group == g.Group && rg.Topics != nil {
					all = false
				}
			}
			topics := make([]kmsg.OffsetFetchResponseTopic, 0, len(g.Topics))
			for _, gt := range g.Topics {
				var t kmsg.OffsetFetchResponseTopic
				t.Topic = gt.Topic
				if r.Version >= 10 && gt.Topic == "" {
					t.Topic = z.topicName(gt.TopicID)
				}
				topics = append(topics, t)
			}
			keep := g.Topics[:0]
			for j, gt := range g.Topics {
				if z.ok(acl.Describe, acl.Topic, topics[j].Topic) {
					keep = append(keep, gt)
					continue
				}
				if all {
					continue
				}
				for k := range gt.Partitions {
					p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					p.Partition, p.ErrorCode = gt.Partitions[k].Partition, errTopicAuth
					gt.Partitions[k] = p
				}
				keep = append(keep, gt)
			}
			g.Topics = keep
		}
	}
}
