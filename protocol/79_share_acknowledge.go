package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// ShareAcknowledge: v1-2 (KIP-932; v2 adds RENEW acknowledgements,
// KIP-1222, and AcquisitionLockTimeoutMillis)
//
// Behaviour:
//   - Acknowledges records a member acquired with ShareFetch, outside a
//     fetch, in the member's share session on this broker: the epoch must
//     be the session's next (0 is INVALID_SHARE_SESSION_EPOCH: a session is
//     opened only by ShareFetch); -1 acknowledges, then closes the session
//     and releases the member's other acquired records on its partitions.
//   - Per partition, all or none, answered once replicated: ACCEPT,
//     RELEASE (available again at once, or archived at the delivery count
//     limit), REJECT (archived), GAP (an offset with no record), RENEW
//     (v2 with IsRenewAck: the lock starts again).
//     INVALID_RECORD_STATE for a record the member does not hold under a
//     live lock; INVALID_REQUEST for a malformed batch.
//   - Errors: as ShareFetch (share_session.go; UNKNOWN_TOPIC_ID,
//     NOT_LEADER_OR_FOLLOWER per partition).
//
// Version notes:
// * v1: first version Kafka 4.x serves
// * v2: IsRenewAck, AcquisitionLockTimeoutMillis
func init() {
	register(79, 1, 2, concurrent, (*Server).handleShareAcknowledge, (*authz).shareAcknowledge)
}

func (s *Server) handleShareAcknowledge(ctx context.Context, req *kmsg.ShareAcknowledgeRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	if !s.shareEnabled() { // share.version 0: share groups are off (as Kafka 4.4)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp, nil
	}
	sl := s.share
	group, member := derefString(req.GroupID), derefString(req.MemberID)
	resp.AcquisitionLockTimeoutMillis = int32(sl.settings(group).part.LockMs)
	renew := req.Version >= 2 && req.IsRenewAck
	switch {
	case group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	case member == "" || len(member) > 36:
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	var parts []shareReqPart
	for _, rt := range req.Topics {
		ps := make([]int32, len(rt.Partitions))
		for i, p := range rt.Partitions {
			ps[i] = p.Partition
		}
		resolved := s.resolveShareTopic(rt.TopicID, ps)
		for i, p := range rt.Partitions {
			resolved[i].acks = shareAckBatches(p.AcknowledgementBatches, func(b kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
				return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
			})
		}
		parts = append(parts, resolved...)
	}
	skey := shareSessionKey{group, member}
	var closed []shareTPKey
	switch req.ShareSessionEpoch {
	case 0:
		resp.ErrorCode = kerr.InvalidShareSessionEpoch.Code
		return resp, nil
	case -1:
		var code int16
		if closed, code = sl.sessions.close(skey); code != 0 {
			resp.ErrorCode = code
			return resp, nil
		}
	default:
		if code := sl.sessions.check(skey, req.ShareSessionEpoch); code != 0 {
			resp.ErrorCode = code
			return resp, nil
		}
	}
	topics := map[[16]byte]int{}
	var hinted map[int32]bool
	s.shareAcks(ctx, parts, group, member, renew, func(p shareReqPart, code int16) {
		i, ok := topics[p.key.topicID]
		if !ok {
			i = len(resp.Topics)
			topics[p.key.topicID] = i
			t := kmsg.NewShareAcknowledgeResponseTopic()
			t.TopicID = p.key.topicID
			resp.Topics = append(resp.Topics, t)
		}
		sp := kmsg.NewShareAcknowledgeResponseTopicPartition()
		sp.Partition, sp.ErrorCode = p.key.partition, code
		sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
		if code == kerr.NotLeaderForPartition.Code {
			if t, ok := s.broker.TopicByID(p.key.topicID); ok {
				if leader, epoch, ok := s.leaderHint(t, p.key.partition); ok {
					sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
					hinted = addHinted(hinted, leader)
				}
			}
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
	})
	if closed != nil {
		s.shareRelease(ctx, closed, group, member)
	}
	for _, bi := range s.hintedBrokers(hinted) {
		ne := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
		ne.NodeID, ne.Host, ne.Port, ne.Rack = bi.NodeID, bi.Host, bi.Port, nullableString(bi.Rack)
		resp.NodeEndpoints = append(resp.NodeEndpoints, ne)
	}
	return resp, nil
}

func (z *authz) shareAcknowledge(r *kmsg.ShareAcknowledgeRequest) (kmsg.Response, func(kmsg.Response)) {
	if r.GroupID != nil && !z.ok(acl.Read, acl.Group, *r.GroupID) {
		return errorResponse(r, errGroupAuth), nil
	}
	keep, denied := z.splitTopics(len(r.Topics), acl.Read, func(i int) string { return z.topicName(r.Topics[i].TopicID) })
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		sr := resp.(*kmsg.ShareAcknowledgeResponse)
		for _, t := range gone {
			st := kmsg.NewShareAcknowledgeResponseTopic()
			st.TopicID = t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewShareAcknowledgeResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errTopicAuth
				st.Partitions = append(st.Partitions, sp)
			}
			sr.Topics = append(sr.Topics, st)
		}
	}
}
