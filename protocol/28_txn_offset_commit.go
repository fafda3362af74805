package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/groupcoord"
	"github.com/strata-io/strata/internal/acl"
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

// txnOffsetCommit needs WRITE on the transactional ID, READ on the group
// and on each topic.
func (z *authz) txnOffsetCommit(r *kmsg.TxnOffsetCommitRequest) (kmsg.Response, func(kmsg.Response)) {
	code := int16(0)
	switch {
	case !z.ok(acl.Write, acl.TransactionalID, r.TransactionalID):
		code = errTxnAuth
	case !z.ok(acl.Read, acl.Group, r.Group):
		code = errGroupAuth
	}
	_, denied := z.splitTopics(len(r.Topics), acl.Read, func(i int) string { return r.Topics[i].Topic })
	if code == 0 && len(denied) == 0 {
		return nil, nil
	}
	isDenied := map[int]bool{}
	for _, i := range denied {
		isDenied[i] = true
	}
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for i, t := range r.Topics {
		c := code
		if c == 0 {
			c = int16(55) // OPERATION_NOT_ATTEMPTED
			if isDenied[i] {
				c = errTopicAuth
			}
		}
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, c
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
