package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/segment"
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
//     -1 = unchecked) is below / above the partition's epoch. From v16 a
//     NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH partition names the
//     leader this broker knows (CurrentLeader) and the response carries its
//     endpoint (NodeEndpoints): KIP-951, leader_hints.go.
//   - HighWatermark, LastStableOffset and LogStartOffset are always
//     filled. IsolationLevel read_committed reads whole batches below the
//     last stable offset (the first offset of a transaction not yet
//     decided) and returns the aborted transactions overlapping them
//     (log.Partition.ReadCommitted), so the client drops their records;
//     AbortedTransactions is an empty list, not null. read_uncommitted
//     reads up to the high watermark, aborted records and markers
//     included. A long poll on read_committed wakes on the high watermark
//     (the LSO moves only when it does or when a marker commits); one
//     held at the LSO by an open transaction waits for the high watermark
//     to move past what it saw (fetchPart.waitOffset), not for its fetch
//     offset, which the high watermark has passed already.
//   - Fetch sessions (KIP-227, fetch_session.go): SessionEpoch 0 creates a
//     session (answered with its ID); later incremental fetches name only
//     changed partitions (Topics) and dropped ones (ForgottenTopics) and get
//     back only the partitions with news; -1 is a sessionless full fetch
//     (and closes the session named). An unknown session is
//     FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH;
//     clients then start over with a full fetch.
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
// Record sets of 16 KiB and more go from the segment files to the socket
// with sendfile (fetch_sendfile.go), as Kafka does; smaller ones, and
// read_committed fetches, are read into memory and written with writev
// (fetch_encode.go) without another copy.
//
// Differences from Kafka: when the session cache is full the least recently
// used session is evicted (Kafka prefers evicting small, stale sessions).
func init() { register(1, 4, 18, concurrent, (*Server).handleFetch, (*authz).fetch) }

// maxFetchWait caps MaxWaitMillis so a request cannot park for hours.
const maxFetchWait = 5 * time.Minute

// fetchMaxBytes caps a request's MaxBytes, as Kafka's broker setting
// fetch.max.bytes (default 55 MiB) does, bounding one response's memory.
const fetchMaxBytes = 55 << 20

// fetchTarget is one partition a fetch reads, from the request or, for an
// incremental fetch, from the session.
type fetchTarget struct {
	topic       string   // v0-v12 (empty for v13+)
	topicID     [16]byte // v13+
	partition   int32
	fetchOffset int64
	maxBytes    int32 // PartitionMaxBytes
	leaderEpoch int32 // CurrentLeaderEpoch; -1 = unchecked
}

// requestTargets lists the partitions named in req.Topics.
func requestTargets(req *kmsg.FetchRequest) []fetchTarget {
	var out []fetchTarget
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			t := fetchTarget{topic: rt.Topic, topicID: rt.TopicID, partition: rp.Partition,
				fetchOffset: rp.FetchOffset, maxBytes: rp.PartitionMaxBytes, leaderEpoch: rp.CurrentLeaderEpoch}
			if req.Version >= 13 {
				t.topic = ""
			} else {
				t.topicID = [16]byte{}
			}
			if req.Version < 9 {
				t.leaderEpoch = -1
			}
			out = append(out, t)
		}
	}
	return out
}

// fetchPart is one partition being served.
type fetchPart struct {
	target fetchTarget
	name   string // the topic's name, resolved
	resp   *kmsg.FetchResponseTopicPartition
	part   *log.Partition // nil when the partition errored
	failed bool           // an error code is set; nothing to read or wait for
	// committed: read_committed (IsolationLevel 1): read below the LSO
	// and return the aborted transactions.
	committed bool
	// region, when set, holds the partition's record set in a segment file,
	// sent with sendfile (fetch_sendfile.go) instead of RecordBatches.
	region *log.Region
}

// releaseRegion drops fp's region, if any.
func (fp *fetchPart) releaseRegion() {
	if fp.region != nil {
		fp.region.Release()
		fp.region = nil
	}
}

func (s *Server) handleFetch(ctx context.Context, req *kmsg.FetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SessionID = 0

	var targets []fetchTarget
	var sess *fetchSession
	now := time.Now()
	switch {
	case req.Version < 7 || req.SessionEpoch < 0:
		if req.Version >= 7 && req.SessionID != 0 {
			s.sessions.remove(req.SessionID) // epoch -1 closes the session
		}
		targets = requestTargets(req)
	case req.SessionEpoch == 0:
		if req.SessionID != 0 {
			s.sessions.remove(req.SessionID)
		}
		targets = requestTargets(req)
		sess = s.sessions.create(targets, now) // nil: too large, served sessionless
	default:
		var code int16
		if sess, code = s.sessions.get(req.SessionID, req.SessionEpoch, now); code != 0 {
			resp.ErrorCode = code
			return resp, nil
		}
		if !sess.update(req) || !s.sessions.resize(sess, len(sess.parts)) {
			sess.mu.Unlock()
			s.sessions.remove(req.SessionID)
			resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
			return resp, nil
		}
		targets = sess.targets()
	}
	if sess != nil {
		defer sess.mu.Unlock()
	}

	parts := s.fetchParts(req, resp, targets)

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

	if err := s.fetchWait(ctx, req, parts, maxBytes, deadline); err != nil {
		for _, fp := range parts {
			fp.releaseRegion()
		}
		return nil, err
	}
	if th := s.fetchThrottled(ctx, parts); th > 0 {
		// Over the consumer quota: Kafka's throttled response, empty
		// (quotas.go). The session only moves to this epoch.
		for _, fp := range parts {
			fp.releaseRegion()
		}
		out := req.ResponseKind().(*kmsg.FetchResponse)
		out.ThrottleMillis = int32(min(th, 1<<31-1))
		if sess != nil {
			sess.epoch = req.SessionEpoch
			out.SessionID = sess.id
		}
		return out, nil
	}
	if sess != nil {
		sess.answered(resp, parts, req.SessionEpoch)
		resp.SessionID = sess.id
	}
	s.metrics.topics.fetched(parts)
	return withRegions(resp, parts), nil
}

// fetchWait reads every partition, long polling until MinBytes are there
// (or an error, the deadline, Close, or the connection dying).
func (s *Server) fetchWait(ctx context.Context, req *kmsg.FetchRequest, parts []*fetchPart, maxBytes int32, deadline <-chan time.Time) error {
	// Bounded: each pass either answers or waits for a high watermark
	// to move, the deadline, or the connection to close.
	var wake chan struct{}
	var registered []*log.Partition
	for {
		total, anyErr := s.fetchRead(parts, maxBytes)
		if anyErr || total >= int64(req.MinBytes) || deadline == nil {
			return nil
		}
		// One channel for every partition: the first high watermark to
		// pass its fetch offset sends on it (from the goroutine that
		// commits, no helper goroutine in between).
		if wake == nil {
			wake = make(chan struct{}, 1)
		}
		registered = registered[:0]
		passed := false
		for _, fp := range parts {
			if fp.part == nil {
				continue
			}
			if !fp.part.Notify(fp.waitOffset(), wake) {
				passed = true // moved since the read: read again
				break
			}
			registered = append(registered, fp.part)
		}
		if passed || len(registered) == 0 {
			unnotify(registered, wake)
			if !passed {
				return nil
			}
			// Read again, unless the wait is over: a partition whose
			// high watermark keeps moving must not hold the request past
			// its deadline or the connection's end.
			select {
			case <-deadline:
				return nil
			case <-s.draining:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			default:
			}
			continue
		}
		parkedAt := time.Now()
		select {
		case <-wake:
			parked(ctx, time.Since(parkedAt)) // not charged to request_percentage (quotas.go)
			unnotify(registered, wake)
		case <-deadline:
			parked(ctx, time.Since(parkedAt))
			unnotify(registered, wake)
			s.fetchRead(parts, maxBytes)
			return nil
		case <-s.draining:
			unnotify(registered, wake)
			s.fetchRead(parts, maxBytes)
			return nil
		case <-ctx.Done():
			unnotify(registered, wake)
			return ctx.Err()
		}
		select { // a send that raced the unregistering
		case <-wake:
		default:
		}
	}
}

// waitOffset is the offset whose passing by the high watermark can bring
// fp something new. For read_uncommitted that is the fetch offset. A
// read_committed fetch at the last stable offset (an open transaction
// there) gets nothing from a high watermark that is already past the
// fetch offset: it waits for the high watermark to move beyond what the
// read saw (a marker, or more records, is committed), not for the fetch
// offset -- which the high watermark has passed, so the wait would end at
// once and the request spin, reading nothing, until the transaction ends
// (found under an election storm: 170 such requests spun on, their
// clients long gone).
func (fp *fetchPart) waitOffset() int64 {
	off := fp.target.fetchOffset
	if fp.committed && fp.resp.LastStableOffset <= off {
		off = max(off, fp.resp.HighWatermark)
	}
	return off
}

// unnotify drops wake's registrations with parts.
func unnotify(parts []*log.Partition, wake chan<- struct{}) {
	for _, p := range parts {
		p.Unnotify(wake)
	}
}

// fetchParts builds the response skeleton for targets (grouping consecutive
// partitions of one topic) and resolves each partition.
func (s *Server) fetchParts(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, targets []fetchTarget) []*fetchPart {
	parts := make([]*fetchPart, 0, len(targets))
	var hinted map[int32]bool // leaders named to the client (KIP-951), allocated on first use
	// Count partitions per topic run first so the response slices never
	// move (fetchPart keeps pointers into them).
	type run struct{ start, n int }
	var runs []run
	for i, t := range targets {
		if len(runs) > 0 {
			prev := targets[runs[len(runs)-1].start]
			if prev.topic == t.topic && prev.topicID == t.topicID {
				runs[len(runs)-1].n++
				continue
			}
		}
		runs = append(runs, run{start: i, n: 1})
	}
	resp.Topics = make([]kmsg.FetchResponseTopic, len(runs))
	for i, r := range runs {
		first := targets[r.start]
		st := &resp.Topics[i]
		*st = kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = first.topic, first.topicID
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, r.n)

		var topic replication.TopicInfo
		var ok bool
		topicErr := int16(0)
		if req.Version >= 13 {
			if topic, ok = s.broker.TopicByID(first.topicID); !ok {
				topicErr = kerr.UnknownTopicID.Code
			}
		} else if topic, ok = s.broker.Topic(first.topic); !ok {
			topicErr = kerr.UnknownTopicOrPartition.Code
		}
		for j := range r.n {
			t := targets[r.start+j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewFetchResponseTopicPartition()
			sp.Partition = t.partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.PreferredReadReplica = -1
			// Empty, never null: librdkafka rejects a null record set
			// ("invalid MessageSetSize -1"); Kafka sends an empty one.
			sp.RecordBatches = []byte{}
			if req.IsolationLevel == 1 {
				sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			fp := &fetchPart{target: t, name: topic.Name, resp: sp, committed: req.IsolationLevel == 1}
			parts = append(parts, fp)
			if topicErr != 0 {
				sp.ErrorCode, fp.failed = topicErr, true
				continue
			}
			p, _, code := s.leaderPartition(topic, t.partition, t.leaderEpoch)
			if code != 0 {
				sp.ErrorCode, fp.failed = code, true
				s.fetchLeaderHint(req.Version, code, topic, sp, &hinted)
				continue
			}
			fp.part = p
		}
	}
	s.addFetchNodeEndpoints(resp, hinted)
	return parts
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
		sp.RecordBatches = []byte{}
		limit := min(int64(fp.target.maxBytes), remaining)
		if limit <= 0 && !first {
			off := fp.part.Offsets()
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = off.HighWatermark, off.LastStable, off.LogStart
			continue
		}
		fp.releaseRegion()
		if !fp.committed && !s.cfg.NoSendfile {
			if n, ok := s.readRegion(fp, limit, first); ok {
				if n > 0 {
					first = false
					remaining -= n
					total += n
				}
				continue
			}
		}
		var res log.ReadResult
		var err error
		if fp.committed {
			res, err = fp.part.ReadCommitted(fp.target.fetchOffset, int32(max(limit, 1)))
		} else {
			res, err = fp.part.Read(fp.target.fetchOffset, int32(max(limit, 1)))
		}
		sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = res.Offsets.HighWatermark, res.Offsets.LastStable, res.Offsets.LogStart
		if err != nil {
			sp.ErrorCode = errCode(err)
			if errors.Is(err, log.ErrOffsetOutOfRange) || res.Offsets == (log.Offsets{}) {
				off := fp.part.Offsets()
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = off.HighWatermark, off.LastStable, off.LogStart
			}
			fp.failed, anyErr = true, true
			continue
		}
		rec := res.Records
		if !first && int64(len(rec)) > limit {
			rec = trimBatches(rec, limit)
		}
		if fp.committed {
			sp.AbortedTransactions = sp.AbortedTransactions[:0]
			for _, a := range res.Aborted {
				sp.AbortedTransactions = append(sp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
			}
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
		n := int(int32(binary.BigEndian.Uint32(rec[end+segment.OffBatchLength:])))
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

// leaderPartition resolves a partition a request names, on this broker as
// its leader: its local log and placement, once the client's
// CurrentLeaderEpoch (-1 = not checked; -1 too for request versions
// without it) passed checkLeaderEpoch. A non-zero code is the error to
// answer: UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH,
// UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, ...
func (s *Server) leaderPartition(topic replication.TopicInfo, partition, currentLeaderEpoch int32) (*log.Partition, replication.PartitionInfo, int16) {
	pi, ok := partitionInfo(topic, partition)
	if !ok {
		return nil, pi, kerr.UnknownTopicOrPartition.Code
	}
	if code := checkLeaderEpoch(currentLeaderEpoch, pi.LeaderEpoch); code != 0 {
		return nil, pi, code
	}
	p, err := s.broker.Partition(topic.Name, partition)
	if err != nil {
		return nil, pi, errCode(err)
	}
	return p, pi, 0
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

func (z *authz) fetch(r *kmsg.FetchRequest) (kmsg.Response, func(kmsg.Response)) {
	replica := r.ReplicaID >= 0
	if r.Version >= 15 {
		replica = r.ReplicaState.ID >= 0
	}
	if replica { // a follower's fetch
		if !z.cluster(acl.ClusterAction) {
			return errorResponse(r, errClusterAuth), nil
		}
		return nil, nil
	}
	name := func(i int) string {
		if r.Version >= 13 {
			return z.topicName(r.Topics[i].TopicID)
		}
		return r.Topics[i].Topic
	}
	keep, denied := z.splitTopics(len(r.Topics), acl.Read, name)
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		var fr *kmsg.FetchResponse
		var regions map[regionKey]*log.Region
		switch v := resp.(type) {
		case *kmsg.FetchResponse:
			fr = v
		case *fetchResponse:
			fr, regions = v.FetchResponse, v.regions
		default:
			return
		}
		// An incremental session also answers for partitions the request
		// did not name, added while READ was allowed, and a long poll
		// may end after an ACL changed: each topic is checked again
		// against the bindings now, and its records dropped when READ is
		// gone.
		z.refresh()
		for i := range fr.Topics {
			t := &fr.Topics[i]
			n := t.Topic
			if r.Version >= 13 {
				n = z.topicName(t.TopicID)
			}
			if z.ok(acl.Read, acl.Topic, n) {
				continue
			}
			for j := range t.Partitions {
				k := regionKey{topic: t.Topic, partition: t.Partitions[j].Partition}
				if r.Version >= 13 {
					k = regionKey{topicID: t.TopicID, partition: t.Partitions[j].Partition}
				}
				if rg := regions[k]; rg != nil {
					rg.Release()
					delete(regions, k)
				}
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = t.Partitions[j].Partition, errTopicAuth
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				t.Partitions[j] = sp
			}
		}
		for _, t := range gone {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errTopicAuth
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			fr.Topics = append(fr.Topics, st)
		}
	}
}
