package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/replication"
)

// AlterPartitionReassignments: v0-1
//
// Behaviour (as Kafka's KRaft controller):
//   - Each named partition gets a target replica list (Replicas), or its
//     ongoing reassignment is cancelled (Replicas null;
//     NO_REASSIGNMENT_IN_PROGRESS when there is none). The answer comes
//     once the target is recorded in the replicated metadata; the move
//     runs in the background (replication/partition_reassign.go: the partition's
//     Raft group adds the new replicas, which catch up from the leader's
//     segments, then removes the old ones) and ListPartitionReassignments
//     shows it until it is done.
//   - Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; an empty,
//     duplicated or unregistered replica: INVALID_REPLICA_ASSIGNMENT.
//   - v1 AllowReplicationFactorChange false (KIP-860): a target with a
//     different number of replicas is INVALID_REPLICATION_FACTOR.
//
// Version notes: v0 is flexible; v1 adds AllowReplicationFactorChange.
func init() {
	register(45, 0, 1, concurrent, (*Server).handleAlterPartitionReassignments,
		needsCluster(acl.Alter))
}

func (s *Server) handleAlterPartitionReassignments(ctx context.Context, req *kmsg.AlterPartitionAssignmentsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	ctx, cancel := requestTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	resp.Topics = make([]kmsg.AlterPartitionAssignmentsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		t, known := s.broker.Topic(rt.Topic)
		st.Partitions = make([]kmsg.AlterPartitionAssignmentsResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			var err error
			switch {
			case !known || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				err = fmt.Errorf("%w: %s-%d", replication.ErrUnknownTopicOrPartition, rt.Topic, rp.Partition)
			case req.Version >= 1 && !req.AllowReplicationFactorChange && rp.Replicas != nil &&
				len(rp.Replicas) != len(t.Partitions[rp.Partition].Replicas):
				err = fmt.Errorf("%w: %d replicas for a partition of %d (AllowReplicationFactorChange is false)",
					replication.ErrInvalidReplicationFactor, len(rp.Replicas), len(t.Partitions[rp.Partition].Replicas))
			default:
				err = s.broker.AlterPartitionReassignment(ctx, rt.Topic, rp.Partition, rp.Replicas)
			}
			if err != nil {
				s.log.Info("partition reassignment refused", "topic", rt.Topic, "partition", rp.Partition, "err", err)
			}
			sp.ErrorCode, sp.ErrorMessage = errCode(err), errMessage(err)
		}
	}
	return resp, nil
}
