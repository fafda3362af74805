package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// CreatePartitions: v0-3
//
// Behaviour:
//   - Grows each topic to Count partitions with Broker.CreatePartitions, with
//     the replicas of the new partitions from Assignment when given (one entry
//     per new partition).
//   - ValidateOnly checks without changing anything.
//   - Per topic errors: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (count
//     not above the current one), INVALID_REPLICA_ASSIGNMENT (assignment
//     length is not the number of new partitions), NOT_CONTROLLER, and
//     INVALID_REQUEST for a topic named twice (Kafka: "Duplicate topic in
//     request"), each with a message.
//
// controller_mutation_rate (KIP-599, quotas.go): each topic's partitions
// are charged before it is changed; from v3 a topic asked while the
// client's bucket is below zero gets THROTTLING_QUOTA_EXCEEDED, older
// versions are throttled instead.
//
// Version notes:
// * v1: no change; v2: flexible; v3: no change
func init() { register(37, 0, 3, barrier, (*Server).handleCreatePartitions, (*authz).createPartitions) }

func (s *Server) handleCreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	ctx, cancel := requestTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	seen := make(map[string]int, len(req.Topics))
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		fail := func(code int16, msg string) { st.ErrorCode, st.ErrorMessage = code, &msg }
		t, ok := s.broker.Topic(rt.Topic)
		switch {
		case seen[rt.Topic] > 1:
			fail(kerr.InvalidRequest.Code, "duplicate topic in request")
		case !ok:
			fail(kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", rt.Topic))
		case rt.Count <= int32(len(t.Partitions)):
			fail(kerr.InvalidPartitions.Code, fmt.Sprintf("topic currently has %d partitions, which is higher than or equal to the requested %d", len(t.Partitions), rt.Count))
		case rt.Assignment != nil && len(rt.Assignment) != int(rt.Count)-len(t.Partitions):
			fail(kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("increasing the number of partitions by %d but %d assignments provided", int(rt.Count)-len(t.Partitions), len(rt.Assignment)))
		default:
			if code, msg := s.mutationQuota(ctx, req.Version >= 3, int(rt.Count)-len(t.Partitions)); code != 0 {
				fail(code, msg) // KIP-599 (quotas.go)
				break
			}
			var assignment [][]int32
			if rt.Assignment != nil {
				assignment = make([][]int32, len(rt.Assignment))
				for i, a := range rt.Assignment {
					assignment[i] = a.Replicas
				}
			}
			if err := s.broker.CreatePartitions(ctx, rt.Topic, rt.Count, assignment, req.ValidateOnly); err != nil {
				fail(errCode(err), err.Error())
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func (z *authz) createPartitions(r *kmsg.CreatePartitionsRequest) (kmsg.Response, func(kmsg.Response)) {
	keep, denied := z.splitTopics(len(r.Topics), acl.Alter, func(i int) string { return r.Topics[i].Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		cr := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range gone {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode = t.Topic, errTopicAuth
			cr.Topics = append(cr.Topics, st)
		}
	}
}
