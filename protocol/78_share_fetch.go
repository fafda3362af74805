package protocol

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/sharepart"
)

// ShareFetch: v1-2 (KIP-932; v1 adds MaxRecords and BatchSize, v2 the
// acquire mode of KIP-1206 and renew acknowledgements of KIP-1222)
//
// Behaviour:
//   - A member of a share group fetches from the partitions of its share
//     session on this broker (share_session.go: epoch 0 opens it with the
//     request's partitions, later epochs add Topics and drop
//     ForgottenTopicsData, -1 closes it; so does the connection closing,
//     as in Kafka: the member's records are then released at once).
//     Membership is not checked here
//     (as Kafka): any member ID of 1-36 characters may fetch.
//   - Acknowledgements piggybacked on the request are applied first, per
//     partition all or none (AcknowledgeErrorCode: INVALID_RECORD_STATE for
//     a record the member does not hold under a live lock), and only once
//     replicated; then records are acquired for the member (sharepart:
//     records available again first, then new ones below the high
//     watermark, or the last stable offset under read_committed, within
//     group.share.partition.max.record.locks) and returned as whole stored
//     batches with the acquired ranges and their delivery counts
//     (AcquiredRecords); the client delivers only those offsets.
//     MaxRecords bounds the acquisition; ShareAcquireMode 1 (record-limit)
//     cuts a batch to honour it exactly, 0 (batch-optimized) acquires whole
//     batches. The acquisition is replicated before the response goes out,
//     so delivery counts survive a failover.
//   - Long poll: with nothing acquired the request waits up to
//     MaxWaitMillis (capped at maxFetchWait) for new records, records
//     freed by acknowledgements (released, or the lock window moving on)
//     or lapsed locks. Not when the member's own unacknowledged records
//     fill a partition's lock window (sharepart.WindowHeldBy): clients
//     send their acknowledgements with their next request, which a long
//     poll would hold back, so such a fetch is answered after heldWaitMin,
//     twice as late each time in a row (share_session.go).
//   - IsRenewAck (v2): the request only acknowledges (RENEW allowed);
//     fetch parameters must be zero (INVALID_REQUEST otherwise).
//   - Errors: INVALID_REQUEST for an empty or too long member ID, or
//     acknowledgements at epoch 0; INVALID_GROUP_ID for an empty group;
//     the session errors above; per partition UNKNOWN_TOPIC_ID,
//     UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER with the leader
//     named (CurrentLeader, NodeEndpoints: KIP-951).
//
// Version notes:
// * v1: first version Kafka 4.x serves (v0 was early access)
// * v2: ShareAcquireMode, IsRenewAck
func init() { register(78, 1, 2, concurrent, (*Server).handleShareFetch, (*authz).shareFetch) }

const (
	defaultShareMaxRecords = 500
	// shareWaitSlice bounds one wait of a long poll: lapsed locks make
	// records available without an event, so the poll looks again.
	shareWaitSlice = 250 * time.Millisecond
)

// shareReqPart is one partition a ShareFetch or ShareAcknowledge names.
type shareReqPart struct {
	key    shareTPKey
	target shareTarget
	code   int16 // resolution error
	acks   []sharepart.AckBatch
}

func (s *Server) resolveShareTopic(topicID [16]byte, partitions []int32) []shareReqPart {
	out := make([]shareReqPart, 0, len(partitions))
	t, ok := s.broker.TopicByID(topicID)
	for _, p := range partitions {
		rp := shareReqPart{key: shareTPKey{topicID, p}, target: shareTarget{topicID: topicID, topic: t.Name, partition: p}}
		if !ok {
			rp.code = kerr.UnknownTopicID.Code
		} else if _, found := partitionInfo(t, p); !found {
			rp.code = kerr.UnknownTopicOrPartition.Code
		}
		out = append(out, rp)
	}
	return out
}

func shareAckBatches[B any](in []B, conv func(B) (int64, int64, []int8)) []sharepart.AckBatch {
	if len(in) == 0 {
		return nil
	}
	out := make([]sharepart.AckBatch, len(in))
	for i, b := range in {
		out[i].First, out[i].Last, out[i].Types = conv(b)
	}
	return out
}

func (s *Server) handleShareFetch(ctx context.Context, req *kmsg.ShareFetchRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
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
	case renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0):
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}

	var parts []shareReqPart
	anyAcks := false
	for _, rt := range req.Topics {
		ps := make([]int32, len(rt.Partitions))
		for i, p := range rt.Partitions {
			ps[i] = p.Partition
		}
		resolved := s.resolveShareTopic(rt.TopicID, ps)
		for i, p := range rt.Partitions {
			resolved[i].acks = shareAckBatches(p.AcknowledgementBatches, func(b kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
				return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
			})
			anyAcks = anyAcks || len(resolved[i].acks) > 0
		}
		parts = append(parts, resolved...)
	}
	add := make([]shareTPKey, 0, len(parts))
	for _, p := range parts {
		if len(p.acks) == 0 || !renew {
			add = append(add, p.key)
		}
	}
	var forget []shareTPKey
	for _, ft := range req.ForgottenTopicsData {
		for _, p := range ft.Partitions {
			forget = append(forget, shareTPKey{ft.TopicID, p})
		}
	}

	w := newShareResp(resp)
	skey := shareSessionKey{group, member}
	var session []shareTPKey
	switch req.ShareSessionEpoch {
	case 0:
		if anyAcks {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return resp, nil
		}
		ss, code := sl.sessions.open(skey, add)
		if code != 0 {
			resp.ErrorCode = code
			return resp, nil
		}
		session = add
		// The session lives as long as this connection (the handler's
		// context is the connection's): when it closes, the member's
		// records on the session's partitions are released at once.
		sl.sessions.watch(ss, context.AfterFunc(ctx, func() {
			select {
			case <-s.draining:
				return // shutting down: the locks lapse on the next leader
			default:
			}
			if parts := sl.sessions.closeIf(skey, ss); len(parts) > 0 {
				rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				s.shareRelease(rctx, parts, group, member)
			}
		}))
	case -1:
		closed, code := sl.sessions.close(skey)
		if code != 0 {
			resp.ErrorCode = code
			return resp, nil
		}
		s.shareAcks(ctx, parts, group, member, renew, func(p shareReqPart, code int16) { w.part(p.key).AcknowledgeErrorCode = code })
		s.shareRelease(ctx, closed, group, member)
		return resp, nil
	default:
		var code int16
		if session, code = sl.sessions.next(skey, req.ShareSessionEpoch, add, forget); code != 0 {
			resp.ErrorCode = code
			return resp, nil
		}
	}
	if renew {
		s.shareAcks(ctx, parts, group, member, renew, func(p shareReqPart, code int16) { w.part(p.key).AcknowledgeErrorCode = code })
		return resp, nil
	}

	maxRecords := int(req.MaxRecords)
	if req.Version < 1 || maxRecords <= 0 {
		maxRecords = defaultShareMaxRecords
	}
	strict := req.Version >= 2 && req.ShareAcquireMode == 1
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = 1<<31 - 1
	}
	wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait)
	deadline := time.Now().Add(wait)
	targets := s.shareTargets(session, w)
	// Acknowledgements of a partition fetched here travel with its first
	// acquisition (one replicated entry); the others go alone.
	acks := map[shareTPKey][]sharepart.AckBatch{}
	fetched := map[shareTPKey]bool{}
	for _, p := range targets {
		fetched[p.key] = true
	}
	var alone []shareReqPart
	for _, p := range parts {
		if len(p.acks) == 0 {
			continue
		}
		if fetched[p.key] && p.code == 0 {
			acks[p.key] = p.acks
		} else {
			alone = append(alone, p)
		}
	}
	s.shareAcks(ctx, alone, group, member, renew, func(p shareReqPart, code int16) { w.part(p.key).AcknowledgeErrorCode = code })
	if anyAcks {
		sl.sessions.heldWait(skey, false) // the member is getting on
	}
	heldBack := false // this fetch's wait was cut short once already
	for {
		got, wakes, held := s.shareAcquireAll(ctx, targets, group, member, maxRecords, strict, maxBytes, acks, w)
		clear(acks) // applied (or refused) once
		if got || w.errs || wait <= 0 {
			sl.sessions.heldWait(skey, false)
			break
		}
		if held && !heldBack {
			// The member's own unacknowledged records fill a partition's
			// lock window: its acknowledgements come with its next
			// request, which this one holds back. Answer soon, later
			// each fetch in a row (a worker still busy with its records
			// polls ever less often).
			heldBack = true
			deadline = minTime(deadline, time.Now().Add(sl.sessions.heldWait(skey, true)))
		}
		left := time.Until(deadline)
		if left <= 0 || len(wakes) == 0 {
			break
		}
		if !s.shareWait(ctx, wakes, min(left, shareWaitSlice)) {
			break
		}
	}
	w.finish(s)
	return withShareRegions(resp, w.regions), nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// shareTargets resolves a session's partitions; those that fail get their
// error in the response.
func (s *Server) shareTargets(session []shareTPKey, w *shareResp) []shareReqPart {
	byTopic := map[[16]byte][]int32{}
	var order [][16]byte
	for _, k := range session {
		if _, ok := byTopic[k.topicID]; !ok {
			order = append(order, k.topicID)
		}
		byTopic[k.topicID] = append(byTopic[k.topicID], k.partition)
	}
	var out []shareReqPart
	for _, id := range order {
		for _, p := range s.resolveShareTopic(id, byTopic[id]) {
			if p.code != 0 {
				w.part(p.key).ErrorCode = p.code
				w.errs = true
				continue
			}
			out = append(out, p)
		}
	}
	return out
}

// shareAcks applies the acknowledgements of each partition that has some
// (the partitions at once: each is its own Raft group) and reports each
// partition's result, in request order.
func (s *Server) shareAcks(ctx context.Context, parts []shareReqPart, group, member string, renew bool, report func(shareReqPart, int16)) {
	codes := make([]int16, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		if len(p.acks) == 0 || p.code != 0 {
			codes[i] = p.code
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = errShareCode(s.share.ack(ctx, p.target, group, member, p.acks, renew))
		}()
	}
	wg.Wait()
	for i, p := range parts {
		if len(p.acks) > 0 {
			report(p, codes[i])
		}
	}
}

// shareRelease releases member's records on the partitions of a closed
// session that this broker leads.
func (s *Server) shareRelease(ctx context.Context, parts []shareTPKey, group, member string) {
	for _, k := range parts {
		t, ok := s.broker.TopicByID(k.topicID)
		if !ok {
			continue
		}
		if err := s.share.releaseMember(ctx, shareTarget{k.topicID, t.Name, k.partition}, group, member); err != nil {
			s.log.Debug("releasing a closed share session's records failed; their locks lapse instead", "group", group, "topic", t.Name, "partition", k.partition, "err", err)
		}
	}
}

// shareAcquireAll runs one acquisition round over targets, the
// partitions at once (each is its own Raft group, so their rounds overlap),
// maxRecords split between them (the session's order, rotated each
// request, decides who gets the remainder; a partition whose share is 0
// waits for the next round). It reports whether anything was acquired
// and, when not, what to wait on.
func (s *Server) shareAcquireAll(ctx context.Context, targets []shareReqPart, group, member string, maxRecords int, strict bool, maxBytes int32, acks map[shareTPKey][]sharepart.AckBatch, w *shareResp) (got bool, wakes []shareWake, held bool) {
	type result struct {
		a      acquired
		err    error
		ackErr error
		ran    bool
	}
	results := make([]result, len(targets))
	n := len(targets)
	var wg sync.WaitGroup
	for i, p := range targets {
		quota := maxRecords / n
		if i < maxRecords%n {
			quota++
		}
		pa := acks[p.key]
		if quota <= 0 && len(pa) == 0 {
			continue
		}
		budget := max(maxBytes/int32(n), 1<<20)
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, ackErr, err := s.share.acquire(ctx, p.target, group, member, quota, strict, budget, pa, !s.cfg.NoSendfile)
			results[i] = result{a: a, err: err, ackErr: ackErr, ran: true}
		}()
	}
	wg.Wait()
	for i, p := range targets {
		r := results[i]
		if !r.ran {
			continue
		}
		if len(acks[p.key]) > 0 {
			w.part(p.key).AcknowledgeErrorCode = errShareCode(r.ackErr)
		}
		if r.err != nil {
			code := errShareCode(r.err)
			sp := w.part(p.key)
			sp.ErrorCode = code
			w.errs = true
			if code == kerr.NotLeaderForPartition.Code || code == kerr.FencedLeaderEpoch.Code {
				if t, ok := s.broker.TopicByID(p.key.topicID); ok {
					if leader, epoch, ok := s.leaderHint(t, p.key.partition); ok {
						sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
						w.hinted = addHinted(w.hinted, leader)
					}
				}
			}
			continue
		}
		a := r.a
		if len(a.ranges) == 0 {
			wakes = append(wakes, shareWake{lp: a.lp, hw: a.hw, released: a.wake})
			held = held || a.held
			continue
		}
		got = true
		sp := w.part(p.key)
		sp.Records = a.records
		if a.region != nil {
			sp.Records = []byte{}
			if w.regions == nil {
				w.regions = map[regionKey]*log.Region{}
			}
			w.regions[shareRegionKey(p.key)] = a.region
		}
		for _, r := range a.ranges {
			ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = r.First, r.Last, r.Count
			sp.AcquiredRecords = append(sp.AcquiredRecords, ar)
		}
	}
	return got, wakes, held
}

// shareWake is what a long poll waits on for one partition: its high
// watermark moving past hw, or records released in its share partition.
type shareWake struct {
	lp       *log.Partition
	hw       int64
	released <-chan struct{}
}

// shareWait waits up to d for any of wakes; false when the request or the
// server is done.
func (s *Server) shareWait(ctx context.Context, wakes []shareWake, d time.Duration) bool {
	wake := make(chan struct{}, 1)
	var lps []*log.Partition
	for _, wk := range wakes {
		if wk.lp != nil {
			if !wk.lp.Notify(wk.hw, wake) {
				return true // moved already
			}
			lps = append(lps, wk.lp)
		}
	}
	defer unnotify(lps, wake)
	done := make(chan struct{})
	defer close(done)
	for _, wk := range wakes {
		if wk.released == nil {
			continue
		}
		go func(ch <-chan struct{}) {
			select {
			case <-ch:
				select {
				case wake <- struct{}{}:
				default:
				}
			case <-done:
			}
		}(wk.released)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	parkedAt := time.Now()
	defer func() { parked(ctx, time.Since(parkedAt)) }() // not charged to request_percentage (quotas.go)
	select {
	case <-wake:
		return true
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.draining:
		return false
	}
}

// shareResp builds a ShareFetch response partition by partition.
type shareResp struct {
	resp   *kmsg.ShareFetchResponse
	topics map[[16]byte]int
	errs   bool
	hinted map[int32]bool
	// regions hold record sets to send by sendfile (share_encode.go).
	regions map[regionKey]*log.Region
}

func newShareResp(resp *kmsg.ShareFetchResponse) *shareResp {
	return &shareResp{resp: resp, topics: map[[16]byte]int{}}
}

// part returns the response entry of k, adding it on first use.
func (w *shareResp) part(k shareTPKey) *kmsg.ShareFetchResponseTopicPartition {
	i, ok := w.topics[k.topicID]
	if !ok {
		i = len(w.resp.Topics)
		w.topics[k.topicID] = i
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = k.topicID
		w.resp.Topics = append(w.resp.Topics, t)
	}
	t := &w.resp.Topics[i]
	for j := range t.Partitions {
		if t.Partitions[j].Partition == k.partition {
			return &t.Partitions[j]
		}
	}
	sp := kmsg.NewShareFetchResponseTopicPartition()
	sp.Partition = k.partition
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
	sp.Records = []byte{}
	t.Partitions = append(t.Partitions, sp)
	return &t.Partitions[len(t.Partitions)-1]
}

func (w *shareResp) finish(s *Server) {
	for _, bi := range s.hintedBrokers(w.hinted) {
		ne := kmsg.NewShareFetchResponseNodeEndpoint()
		ne.NodeID, ne.Host, ne.Port, ne.Rack = bi.NodeID, bi.Host, bi.Port, nullableString(bi.Rack)
		w.resp.NodeEndpoints = append(w.resp.NodeEndpoints, ne)
	}
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (z *authz) shareFetch(r *kmsg.ShareFetchRequest) (kmsg.Response, func(kmsg.Response)) {
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
		z.refresh()
		var sr *kmsg.ShareFetchResponse
		switch v := resp.(type) {
		case *kmsg.ShareFetchResponse:
			sr = v
		case *shareFetchResponse:
			sr = v.ShareFetchResponse
		default:
			return
		}
		for _, t := range gone {
			st := kmsg.NewShareFetchResponseTopic()
			st.TopicID = t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewShareFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errTopicAuth
				st.Partitions = append(st.Partitions, sp)
			}
			sr.Topics = append(sr.Topics, st)
		}
	}
}
