package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/segment"
)

// ListOffsets: v0-11
//
// Behaviour, by requested Timestamp:
//   - -2 (earliest) and -4 (earliest local, v8+): the log start offset.
//   - -1 (latest): the high watermark (read_uncommitted) or the last stable
//     offset (read_committed: the first offset of a transaction not yet
//     decided, or the high watermark).
//   - -3 (max timestamp, v7+): the offset and timestamp of the record with the
//     largest timestamp (the first such record of its batch, as Kafka 3.8+);
//     offset -1 / timestamp -1 for an empty log.
//   - -5 (earliest tiered, v9+) and -6 (earliest pending upload, v11+):
//     offset -1 / timestamp -1, what Kafka answers without tiered storage.
//   - any other value: the offset and timestamp of the first record whose
//     timestamp is >= it: log.Partition.OffsetForTimestamp finds its batch,
//     whose records are then read (decompressed when need be), as Kafka's
//     FileRecords.searchForTimestamp does; offset -1 / timestamp -1 when
//     none.
//
// Timestamps are -1 for the special queries other than -3. The partition's
// leader epoch is returned (v4+). CurrentLeaderEpoch is checked as in Fetch
// (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). Unknown topics and
// partitions: UNKNOWN_TOPIC_OR_PARTITION; not the leader:
// NOT_LEADER_OR_FOLLOWER.
//
// Version notes:
//   - v1: one offset per partition (Timestamp/Offset instead of
//     OldStyleOffsets)
//   - v2: isolation level
//   - v4: CurrentLeaderEpoch, LeaderEpoch
//   - v6: flexible
//   - v7: -3; v8: -4; v9: -5; v10: TimeoutMillis; v11: -6
//
// v0 (Kafka 0.10-era clients; Kafka 4.0 removed it) answers in
// OldStyleOffsets: [] when MaxNumOffsets <= 0, otherwise one offset: the
// log start for -2, the high watermark for -1.
//
// Differences from Kafka: v0 with a real timestamp returns the first offset
// at or after it (or the high watermark when none), where Kafka 2.x
// returned the base offsets of segments older than it. The answer never
// waits, so TimeoutMillis (v10+) is not needed.
func init() { register(2, 0, 11, concurrent, (*Server).handleListOffsets, (*authz).listOffsets) }

func (s *Server) handleListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		topic, topicOK := s.broker.Topic(rt.Topic)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			if !topicOK {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			s.listOffset(req, topic, rp, sp)
		}
	}
	return resp, nil
}

func (s *Server) listOffset(req *kmsg.ListOffsetsRequest, topic replication.TopicInfo, rp *kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) {
	current := int32(-1) // CurrentLeaderEpoch from v4
	if req.Version >= 4 {
		current = rp.CurrentLeaderEpoch
	}
	p, pi, code := s.leaderPartition(topic, rp.Partition, current)
	if code != 0 {
		sp.ErrorCode = code
		return
	}
	sp.LeaderEpoch = pi.LeaderEpoch
	off := p.Offsets()
	if req.Version == 0 {
		sp.OldStyleOffsets = []int64{}
		if rp.MaxNumOffsets <= 0 {
			return
		}
		switch rp.Timestamp {
		case -2:
			sp.OldStyleOffsets = append(sp.OldStyleOffsets, off.LogStart)
		case -1:
			sp.OldStyleOffsets = append(sp.OldStyleOffsets, off.HighWatermark)
		default:
			o, _, found := offsetForTimestamp(p, rp.Timestamp)
			if !found {
				o = off.HighWatermark
			}
			sp.OldStyleOffsets = append(sp.OldStyleOffsets, o)
		}
		return
	}
	switch ts := rp.Timestamp; {
	case ts == -2 || (ts == -4 && req.Version >= 8):
		sp.Offset = off.LogStart
	case ts == -1:
		sp.Offset = off.HighWatermark
		if req.IsolationLevel == 1 {
			sp.Offset = off.LastStable // read_committed: the last stable offset
		}
	case ts == -3 && req.Version >= 7:
		sp.Timestamp, sp.Offset = p.MaxTimestamp()
		if sp.Offset < 0 {
			sp.Timestamp, sp.Offset = -1, -1
			break
		}
		// The log knows the batch (its last offset); the answer is the
		// batch's first record with that timestamp.
		if o, _, ok := recordAtOrAfter(p, sp.Offset, -1, func(t int64) bool { return t == sp.Timestamp }); ok {
			sp.Offset = o
		}
	case (ts == -5 && req.Version >= 9) || (ts == -6 && req.Version >= 11):
		// No tiered storage: nothing to report.
	default:
		if o, t, found := offsetForTimestamp(p, ts); found {
			sp.Offset, sp.Timestamp = o, t
		}
	}
}

// offsetForTimestamp is the first record at or after the log start whose
// timestamp is >= ts. The log answers with the first batch whose max
// timestamp is >= ts (its base offset, or the log start inside it); the
// record is found among that batch's records. A batch that cannot be read
// leaves the batch's answer.
func offsetForTimestamp(p *log.Partition, ts int64) (offset, timestamp int64, found bool) {
	o, t, found := p.OffsetForTimestamp(ts)
	if !found {
		return o, t, false
	}
	if ro, rt, ok := recordAtOrAfter(p, o, o, func(rt int64) bool { return rt >= ts }); ok {
		return ro, rt, true
	}
	return o, t, true
}

// recordAtOrAfter reads the committed batch holding offset and returns the
// first of its records at or after from whose timestamp satisfies match.
func recordAtOrAfter(p *log.Partition, offset, from int64, match func(int64) bool) (int64, int64, bool) {
	rr, err := p.Read(offset, segment.HeaderSize)
	if err != nil || len(rr.Records) < segment.HeaderSize {
		return 0, 0, false
	}
	times, err := segment.BatchRecordTimes(rr.Records)
	if err != nil {
		return 0, 0, false
	}
	for i, o := range times.Offsets {
		if o >= from && match(times.Timestamps[i]) {
			return o, times.Timestamps[i], true
		}
	}
	return 0, 0, false
}

// listOffsets: DESCRIBE per topic; a denied topic's partitions answer
// TOPIC_AUTHORIZATION_FAILED.
func (z *authz) listOffsets(*kmsg.ListOffsetsRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		for i := range resp.(*kmsg.ListOffsetsResponse).Topics {
			t := &resp.(*kmsg.ListOffsetsResponse).Topics[i]
			if !z.ok(acl.Describe, acl.Topic, t.Topic) {
				for j := range t.Partitions {
					p := kmsg.NewListOffsetsResponseTopicPartition()
					p.Partition, p.ErrorCode = t.Partitions[j].Partition, errTopicAuth
					t.Partitions[j] = p
				}
			}
		}
	}
}
