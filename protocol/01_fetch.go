package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication"
)

// Fetch: v4-18
//
// Behaviour:
//   - Reads whole stored batches from each requested partition, byte for byte
//     as stored, never at or above the high watermark.
//   - MaxBytes (whole response) and PartitionMaxBytes are honoured, except
//     that the first non-empty partition always gets at least one whole batch
//     (Kafka's rule, KIP-74) so a batch larger than the limits still makes
//     progress. Later partitions only get batches that fit.
//   - Long poll: until MinBytes are available, the request waits for up to
//     MaxWaitMillis (capped at maxFetchWait) on every requested partition's
//     high watermark (log.Partition.Wait) and is re-read when any moves. A
//     partition error (unknown topic, out of range, ...) answers at once.
//   - Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID (v13+),
//     NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE (with the offsets),
//     FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when CurrentLeaderEpoch (v9+,
//     -1 = unchecked) is below / above the partition's epoch.
//   - HighWatermark, LastStableOffset (= HighWatermark: no transactions yet)
//     and LogStartOffset are always filled. IsolationLevel read_committed is
//     accepted and reads the same as read_uncommitted until transactions
//     exist; its AbortedTransactions is an empty list, not null.
//   - Fetch sessions (KIP-227): the broker declines to create sessions, which
//     KIP-227 allows: a request with SessionEpoch 0 or -1 is served as a full
//     fetch and answered with SessionID 0, so clients keep sending full
//     fetches. A request for an incremental fetch of a session we never
//     created (SessionID != 0 and SessionEpoch > 0) gets
//     FETCH_SESSION_ID_NOT_FOUND, after which clients start over with a full
//     fetch. ForgottenTopics only apply to sessions and are ignored.
//   - ReplicaID / ReplicaState: follower fetching is not how Strata replicates
//     (Raft does), so a replica fetch is served like a consumer's.
//
// Version notes:
// * v4: isolation level, LastStableOffset, AbortedTransactions
// * v5: LogStartOffset
// * v7: fetch sessions
// * v9: CurrentLeaderEpoch
// * v11: rack (PreferredReadReplica always -1)
// * v12: flexible; LastFetchedEpoch (divergence is detected by Raft, not here)
// * v13: topic IDs
// * v15-v18: ReplicaState / replica directory; no change for consumers
//
// Differences from Kafka: no incremental fetch sessions yet (every fetch is
// a full fetch); no sendfile: the stored bytes are copied once into the
// response buffer.
func init() { regKey(1, 4, 18) }

// maxFetchWait caps MaxWaitMillis so a request cannot park for hours.
const maxFetchWait = 5 * time.Minute

// fetchMaxBytes caps a request's MaxBytes, as Kafka's broker setting
// fetch.max.bytes (default 55 MiB) does, bounding one response's memory.
const fetchMaxBytes = 55 << 20

// fetchPart is one requested partition being served.
type fetchPart struct {
	topic  string
	req    *kmsg.FetchRequestTopicPartition
	resp   *kmsg.FetchResponseTopicPartition
	part   *log.Partition // nil when the partition errored
	failed bool           // an error code is set; nothing to read or wait for
}

func (s *Server) handleFetch(ctx context.Context, req *kmsg.FetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SessionID = 0

	if req.Version >= 7 && req.SessionEpoch > 0 && req.SessionID != 0 {
		// An incremental fetch in a session we never created.
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	}

	var parts []*fetchPart
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))

		var topic replication.TopicInfo
		var ok bool
		topicErr := int16(0)
		if req.Version >= 13 {
			if topic, ok = s.broker.TopicByID(rt.TopicID); !ok {
				topicErr = kerr.UnknownTopicID.Code
			}
		} else if topic, ok = s.broker.Topic(rt.Topic); !ok {
			topicErr = kerr.UnknownTopicOrPartition.Code
		}

		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.PreferredReadReplica = -1
			if req.IsolationLevel == 1 {
				sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			fp := &fetchPart{topic: topic.Name, req: rp, resp: sp}
			parts = append(parts, fp)
			if topicErr != 0 {
				sp.ErrorCode, fp.failed = topicErr, true
				continue
			}
			pi, ok := partitionInfo(topic, rp.Partition)
			if !ok {
				sp.ErrorCode, fp.failed = kerr.UnknownTopicOrPartition.Code, true
				continue
			}
			if code := checkLeaderEpoch(rp.CurrentLeaderEpoch, pi.LeaderEpoch); code != 0 {
				sp.ErrorCode, fp.failed = code, true
				continue
			}
			p, err := s.broker.Partition(topic.Name, rp.Partition)
			if err != nil {
				sp.ErrorCode, fp.failed = errCode(err), true
				continue
			}
			fp.part = p
		}
	}

	maxBytes := req.MaxBytes
	if maxBytes <= 0 || maxBytes > fetchMaxBytes {
		maxBytes = fetchMaxBytes
	}
	wait := time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond
	wait = min(wait, maxFetchWait)
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}

	// Bounded: each pass either answers or waits for a high watermark
	// to move, the deadline, or the connection to close.
	for {
		total, anyErr := s.fetchRead(parts, maxBytes)
		if anyErr || total >= int64(req.MinBytes) || deadline == nil {
			return resp, nil
		}
		wake := make(chan struct{}, 1)
		stop := make(chan struct{})
		waiting := 0
		for _, fp := range parts {
			if fp.part == nil {
				continue
			}
			ch := fp.part.Wait(fp.req.FetchOffset)
			waiting++
			go func() {
				select {
				case <-ch:
					select {
					case wake <- struct{}{}:
					default:
					}
				case <-stop:
				}
			}()
		}
		if waiting == 0 {
			close(stop)
			return resp, nil
		}
		select {
		case <-wake:
			close(stop)
		case <-deadline:
			close(stop)
			s.fetchRead(parts, maxBytes)
			return resp, nil
		case <-s.draining:
			close(stop)
			s.fetchRead(parts, maxBytes)
			return resp, nil
		case <-ctx.Done():
			close(stop)
			return nil, ctx.Err()
		}
	}
}

// fetchRead (re)reads every partition into the response. It returns the
// record bytes gathered and whether any partition has an error.
func (s *Server) fetchRead(parts []*fetchPart, maxBytes int32) (total int64, anyErr bool) {
	remaining := int64(maxBytes)
	first := true // no records in the response yet: the first batch always goes
	for _, fp := range parts {
		if fp.failed {
			anyErr = true
			continue
		}
		if fp.part == nil {
			continue
		}
		sp := fp.resp
		sp.RecordBatches = nil
		limit := min(int64(fp.req.PartitionMaxBytes), remaining)
		if limit <= 0 && !first {
			off := fp.part.Offsets()
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = off.HighWatermark, off.HighWatermark, off.LogStart
			continue
		}
		res, err := fp.part.Read(fp.req.FetchOffset, int32(max(limit, 1)))
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = res.Offsets.HighWatermark, res.Offsets.HighWatermark, res.Offsets.LogStart
		if err != nil {
			sp.ErrorCode = errCode(err)
			if errors.Is(err, log.ErrOffsetOutOfRange) || res.Offsets == (log.Offsets{}) {
				off := fp.part.Offsets()
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = off.HighWatermark, off.HighWatermark, off.LogStart
			}
			fp.failed, anyErr = true, true
			continue
		}
		rec := res.Records
		if !first && int64(len(rec)) > limit {
			rec = trimBatches(rec, limit)
		}
		if len(rec) > 0 {
			sp.RecordBatches = rec
			first = false
			remaining -= int64(len(rec))
			total += int64(len(rec))
		}
	}
	return total, anyErr
}

// trimBatches returns the longest prefix of whole batches in rec that fits
// in limit bytes.
func trimBatches(rec []byte, limit int64) []byte {
	end := 0
	for end+12 <= len(rec) {
		n := int(int32(binary.BigEndian.Uint32(rec[end+batchLengthOffset:])))
		next := end + 12 + n
		if n < 0 || next > len(rec) || int64(next) > limit {
			break
		}
		end = next
	}
	return rec[:end]
}

// partitionInfo finds partition p of t.
func partitionInfo(t replication.TopicInfo, p int32) (replication.PartitionInfo, bool) {
	if p >= 0 && int(p) < len(t.Partitions) && t.Partitions[p].Partition == p {
		return t.Partitions[p], true // partitions are usually stored in order
	}
	for _, pi := range t.Partitions {
		if pi.Partition == p {
			return pi, true
		}
	}
	return replication.PartitionInfo{}, false
}

// checkLeaderEpoch compares a client's CurrentLeaderEpoch (-1 = unknown, not
// checked) with the partition's: older is FENCED_LEADER_EPOCH, newer is
// UNKNOWN_LEADER_EPOCH (this broker has not caught up).
func checkLeaderEpoch(client, current int32) int16 {
	switch {
	case client < 0:
		return 0
	case client < current:
		return kerr.FencedLeaderEpoch.Code
	case client > current:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}
