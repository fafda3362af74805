package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// ListPartitionReassignments: v0
//
// Behaviour: the ongoing reassignments (all of them with Topics null, or
// of the named partitions; partitions not being reassigned, unknown ones
// included, are left out, as Kafka does), each with its replicas (the
// current ones plus those being added), the adding and the removing ones.
func init() {
	register(46, 0, 0, concurrent, (*Server).handleListPartitionReassignments,
		needsCluster(acl.Describe))
}

func (s *Server) handleListPartitionReassignments(_ context.Context, req *kmsg.ListPartitionReassignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	var want map[string]map[int32]bool
	if req.Topics != nil {
		want = map[string]map[int32]bool{}
		for _, rt := range req.Topics {
			if want[rt.Topic] == nil {
				want[rt.Topic] = map[int32]bool{}
			}
			for _, p := range rt.Partitions {
				want[rt.Topic][p] = true
			}
		}
	}
	byTopic := map[string]int{}
	for _, r := range s.broker.Reassignments() {
		if want != nil && !want[r.Topic][r.Partition] {
			continue
		}
		i, ok := byTopic[r.Topic]
		if !ok {
			st := kmsg.NewListPartitionReassignmentsResponseTopic()
			st.Topic = r.Topic
			resp.Topics = append(resp.Topics, st)
			i = len(resp.Topics) - 1
			byTopic[r.Topic] = i
		}
		sp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		sp.Partition = r.Partition
		sp.Replicas, sp.AddingReplicas, sp.RemovingReplicas = r.Replicas, nonNil(r.Adding), nonNil(r.Removing)
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
	}
	return resp, nil
}
