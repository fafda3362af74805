package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// DeleteTopics: v0-6
//
// Behaviour:
//   - Deletes each named topic (v0-v5: TopicNames; v6: Topics by name or by
//     topic ID) with Broker.DeleteTopic, which removes its partition files.
//   - Errors per topic: UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID,
//     TOPIC_DELETION_DISABLED (delete.topic.enable=false), NOT_CONTROLLER;
//     INVALID_REQUEST when a v6 entry names both a name and an ID or neither
//     (Kafka: "topic name and topic id cannot both be set"), or a topic twice.
//   - Error messages from v5.
//
// controller_mutation_rate (KIP-599, quotas.go): each topic's partitions
// are charged before it is changed; from v5 a topic asked while the
// client's bucket is below zero gets THROTTLING_QUOTA_EXCEEDED, older
// versions are throttled instead.
//
// Version notes:
// * v1: throttle; v4: flexible; v5: error message; v6: topic IDs
func init() { register(20, 0, 6, barrier, (*Server).handleDeleteTopics, (*authz).deleteTopics) }

func (s *Server) handleDeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	ctx, cancel := requestTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	topics := req.Topics
	if req.Version < 6 {
		topics = make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
		for i := range req.TopicNames {
			topics[i].Topic = &req.TopicNames[i]
		}
	}
	seen := make(map[string]int, len(topics))
	for _, t := range topics {
		if t.Topic != nil {
			seen[*t.Topic]++
		}
	}
	for _, rt := range topics {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			if req.Version >= 5 {
				st.ErrorMessage = &msg
			}
		}
		var name string
		switch {
		case rt.Topic != nil && rt.TopicID != [16]byte{}:
			fail(kerr.InvalidRequest.Code, "topic name and topic id cannot both be set")
		case rt.Topic == nil && rt.TopicID == [16]byte{}:
			fail(kerr.InvalidRequest.Code, "neither topic name nor topic id is set")
		case rt.Topic != nil && seen[*rt.Topic] > 1:
			fail(kerr.InvalidRequest.Code, "topic is named more than once in the request")
		case rt.Topic == nil:
			t, ok := s.broker.TopicByID(rt.TopicID)
			if !ok {
				fail(kerr.UnknownTopicID.Code, "unknown topic id")
				break
			}
			name = t.Name
			st.Topic = &t.Name
		default:
			name = *rt.Topic
			if t, ok := s.broker.Topic(name); ok && req.Version >= 6 {
				st.TopicID = t.ID
			}
		}
		if st.ErrorCode == 0 {
			if t, ok := s.broker.Topic(name); ok {
				if code, msg := s.mutationQuota(ctx, req.Version >= 5, len(t.Partitions)); code != 0 {
					fail(code, msg) // KIP-599 (quotas.go)
				}
			}
		}
		if st.ErrorCode == 0 {
			// Share groups' records in flight go to their dead-letter
			// topics first (share_drain.go).
			s.share.drainTopic(ctx, name)
			if err := s.broker.DeleteTopic(ctx, name); err != nil {
				fail(errCode(err), err.Error())
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (z *authz) deleteTopics(r *kmsg.DeleteTopicsRequest) (kmsg.Response, func(kmsg.Response)) {
	if r.Version < 6 {
		keep, denied := z.splitTopics(len(r.TopicNames), acl.Delete, func(i int) string { return r.TopicNames[i] })
		if len(denied) == 0 {
			return nil, nil
		}
		gone := pick(r.TopicNames, denied)
		r.TopicNames = pick(r.TopicNames, keep)
		return nil, func(resp kmsg.Response) {
			dr := resp.(*kmsg.DeleteTopicsResponse)
			for _, n := range gone {
				st := kmsg.NewDeleteTopicsResponseTopic()
				name := n
				st.Topic, st.ErrorCode = &name, errTopicAuth
				dr.Topics = append(dr.Topics, st)
			}
		}
	}
	name := func(i int) string {
		if t := r.Topics[i]; t.Topic != nil {
			return *t.Topic
		}
		return z.topicName(r.Topics[i].TopicID)
	}
	keep, denied := z.splitTopics(len(r.Topics), acl.Delete, name)
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteTopicsResponse)
		for _, t := range gone {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.TopicID, st.ErrorCode = t.Topic, t.TopicID, errTopicAuth
			dr.Topics = append(dr.Topics, st)
		}
	}
}
