package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// DescribeProducers: v0
//
// Behaviour: per partition this broker leads, the producers in its
// producer state (derived from the log): ID, epoch, last sequence, last
// timestamp and the first offset of the open transaction
// (CurrentTxnStartOffset, -1 none). CoordinatorEpoch is -1 (not tracked).
// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER per partition.
func init() {
	register(61, 0, 0, concurrent, (*Server).handleDescribeProducers, (*authz).describeProducers)
}

func (s *Server) handleDescribeProducers(_ context.Context, req *kmsg.DescribeProducersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range req.Topics {
		rt := kmsg.DescribeProducersResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			lp, err := s.broker.Partition(t.Topic, p)
			if err != nil {
				rp.ErrorCode = errCode(err)
				if rp.ErrorCode == 0 {
					rp.ErrorCode = kerr.UnknownServerError.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			for _, pi := range lp.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pi.ProducerID, int32(pi.ProducerEpoch), pi.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.LastTimestamp, -1, pi.TxnStartOffset
				rp.ActiveProducers = append(rp.ActiveProducers, ap)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// describeProducers: READ per topic; a denied topic's partitions answer
// TOPIC_AUTHORIZATION_FAILED.
func (z *authz) describeProducers(*kmsg.DescribeProducersRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		for i := range resp.(*kmsg.DescribeProducersResponse).Topics {
			t := &resp.(*kmsg.DescribeProducersResponse).Topics[i]
			if !z.ok(acl.Read, acl.Topic, t.Topic) {
				for j := range t.Partitions {
					p := kmsg.NewDescribeProducersResponseTopicPartition()
					p.Partition, p.ErrorCode = t.Partitions[j].Partition, errTopicAuth
					t.Partitions[j] = p
				}
			}
		}
	}
}
