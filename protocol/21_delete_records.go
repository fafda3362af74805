package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// DeleteRecords: v0-2
//
// Behaviour:
//   - Each partition's log start offset moves to the requested offset
//     (Broker.DeleteRecords); -1 means the high watermark. The answer's
//     LowWatermark is the new log start offset. Segments wholly below it
//     are deleted at once; fetches already reading them finish.
//   - An offset above the high watermark or negative other than -1:
//     OFFSET_OUT_OF_RANGE. An offset at or below the current log start
//     succeeds and returns the current log start (the log start never
//     moves back).
//   - A topic whose cleanup.policy does not contain delete:
//     POLICY_VIOLATION, as Kafka.
//   - Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; a partition
//     this broker does not lead: NOT_LEADER_OR_FOLLOWER. LowWatermark is -1
//     on any error.
//   - The work is done before answering, so TimeoutMillis is not needed.
//
// Version notes:
//   - v1: no change (throttle behaviour); v2: flexible
func init() { register(21, 0, 2, barrier, (*Server).handleDeleteRecords, (*authz).deleteRecords) }

func (s *Server) handleDeleteRecords(ctx context.Context, req *kmsg.DeleteRecordsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			if !validTopicName(rt.Topic) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			lw, err := s.broker.DeleteRecords(ctx, rt.Topic, rp.Partition, rp.Offset)
			if err != nil {
				sp.ErrorCode = errCode(err)
				s.log.Debug("delete records failed", "topic", rt.Topic, "partition", rp.Partition, "offset", rp.Offset, "err", err)
				continue
			}
			sp.LowWatermark = lw
		}
	}
	return resp, nil
}

func (z *authz) deleteRecords(r *kmsg.DeleteRecordsRequest) (kmsg.Response, func(kmsg.Response)) {
	keep, denied := z.splitTopics(len(r.Topics), acl.Delete, func(i int) string { return r.Topics[i].Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteRecordsResponse)
		for _, t := range gone {
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewDeleteRecordsResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.LowWatermark = p.Partition, errTopicAuth, -1
				st.Partitions = append(st.Partitions, sp)
			}
			dr.Topics = append(dr.Topics, st)
		}
	}
}
