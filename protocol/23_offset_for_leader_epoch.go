package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/replication"
)

// OffsetForLeaderEpoch: v0-4
//
// Behaviour, per partition (KIP-101, KIP-320):
//   - The answer is the end offset of the requested LeaderEpoch from the
//     partition's leader-epoch cache (log.Partition.EndOffsetForLeaderEpoch):
//     for the latest epoch the log end offset; for an older one the start
//     offset of the next epoch, paired with the largest epoch <= the one
//     requested that this log wrote in; for an epoch older than every
//     epoch still in the log, the requested epoch and the first known
//     epoch's start. An epoch newer than every known one (the written
//     ones and the current leader epoch), or negative: LeaderEpoch -1,
//     EndOffset -1 with no error (UNDEFINED_EPOCH_OFFSET, as Kafka).
//   - The partition's current leader epoch counts as started at the log
//     end even before a batch of it is written, as Kafka's leader puts its
//     epoch in its cache on election: asking for the current epoch on a
//     new leader gets the log end, not "undefined" (which clients read as
//     a diverged log).
//   - CurrentLeaderEpoch (v2+, -1 = not checked) against the partition's
//     leader epoch: older is FENCED_LEADER_EPOCH, newer is
//     UNKNOWN_LEADER_EPOCH (this broker's metadata is behind), as in Fetch.
//   - Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; a partition
//     this broker does not lead: NOT_LEADER_OR_FOLLOWER. Kafka answers
//     only from the leader for consumers and followers alike.
//   - ReplicaID (v3+): -1 is a consumer, >= 0 a follower broker (-2, kmsg's
//     default, a debugging client). As in Kafka it picks only the ACL
//     checked (CLUSTER_ACTION, or DESCRIBE on the topic: the ACL rule
//     offsetForLeaderEpoch, below);
//     every value is answered alike.
//
// Version notes:
//   - v1: LeaderEpoch in the response; v2: CurrentLeaderEpoch, throttle;
//     v3: ReplicaID; v4: flexible. (Kafka 4.0 removed v0-v1; we keep them
//     for 2.x clients.)
//
// Differences from Kafka: the leader-epoch cache is the log's, derived
// from the batches; Kafka's leader writes its new epoch into the cache on
// election, ours is computed at answer time (above) and the file only
// gains the epoch with the first batch.
func init() {
	register(23, 0, 4, concurrent, (*Server).handleOffsetForLeaderEpoch, (*authz).offsetForLeaderEpoch)
}

func (s *Server) handleOffsetForLeaderEpoch(_ context.Context, req *kmsg.OffsetForLeaderEpochRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(rt.Partitions))
		topic, topicOK := s.broker.Topic(rt.Topic)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			if !topicOK {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			s.offsetForLeaderEpoch(req.Version, topic, rp, sp)
		}
	}
	return resp, nil
}

func (s *Server) offsetForLeaderEpoch(version int16, topic replication.TopicInfo, rp *kmsg.OffsetForLeaderEpochRequestTopicPartition, sp *kmsg.OffsetForLeaderEpochResponseTopicPartition) {
	current := int32(-1) // CurrentLeaderEpoch from v2
	if version >= 2 {
		current = rp.CurrentLeaderEpoch
	}
	p, pi, code := s.leaderPartition(topic, rp.Partition, current)
	if code != 0 {
		sp.ErrorCode = code
		return
	}
	sp.LeaderEpoch, sp.EndOffset = p.EndOffsetForLeaderEpoch(rp.LeaderEpoch, pi.LeaderEpoch)
}

func (z *authz) offsetForLeaderEpochDenied(r *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range r.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, errClusterAuth
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// offsetForLeaderEpoch: a follower's (ReplicaID >= 0) needs CLUSTER_ACTION;
// a client's DESCRIBE per topic.
func (z *authz) offsetForLeaderEpoch(r *kmsg.OffsetForLeaderEpochRequest) (kmsg.Response, func(kmsg.Response)) {
	if r.ReplicaID >= 0 && !z.cluster(acl.ClusterAction) {
		return z.offsetForLeaderEpochDenied(r), nil
	}
	return nil, func(resp kmsg.Response) {
		for i := range resp.(*kmsg.OffsetForLeaderEpochResponse).Topics {
			t := &resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[i]
			if !z.ok(acl.Describe, acl.Topic, t.Topic) {
				for j := range t.Partitions {
					p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
					p.Partition, p.ErrorCode = t.Partitions[j].Partition, errTopicAuth
					t.Partitions[j] = p
				}
			}
		}
	}
}
