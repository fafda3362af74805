package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/groupcoord"
)

// TxnOffsetCommit: v0-4 (groupcoord.Coordinator.TxnOffsetCommit)
//
// Behaviour: the offsets are written to the group's __consumer_offsets
// partition in a transactional batch of the producer, and stay pending
// (invisible to OffsetFetch; UNSTABLE_OFFSET_COMMIT for RequireStable)
// until the transaction's marker commits them or aborts them. From v3 the
// member ID and generation are checked (KIP-447): UNKNOWN_MEMBER_ID,
// ILLEGAL_GENERATION, FENCED_INSTANCE_ID. Per partition
// UNKNOWN_TOPIC_OR_PARTITION and OFFSET_METADATA_TOO_LARGE.
//
// Version notes: v1 no change; v2 leader epoch; v3 member fields and
// flexible; v4 TRANSACTION_ABORTABLE (not returned); v5 (KIP-890 part 2):
// the group's __consumer_offsets partition is added to the transaction by
// the broker (no AddOffsetsToTxn from the client).
func init() { register(28, 0, 5, barrier, (*Server).handleTxnOffsetCommit, (*authz).txnOffsetCommit) }

func (s *Server) handleTxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (kmsg.Response, error) {
	if req.Version >= 5 && req.Group != "" && req.TransactionalID != "" {
		code := int16(0)
		ot, err := s.groups.EnsureOffsetsTopic(ctx)
		if err != nil || len(ot.Partitions) == 0 {
			code = kerr.CoordinatorNotAvailable.Code
		} else {
			p := groupcoord.PartitionFor(req.Group, int32(len(ot.Partitions)))
			if code, err = s.txns.AddImplicit(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, groupcoord.OffsetsTopic, p); err != nil {
				return nil, err
			}
		}
		if code != 0 {
			resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
			for _, t := range req.Topics {
				rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		}
	}
	return s.groups.TxnOffsetCommit(ctx, req)
}
