package protocol

import (
	"context"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/sharepart"
)

// The share-group offset APIs: DescribeShareGroupOffsets (90),
// AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92). A share
// partition's state lives with the partition's leader (docs/ARCHITECTURE.md,
// "Share groups"), so the broker answering them asks each partition's
// leader with Kafka's own share-state requests, answered here by the
// partition leaders instead of a share coordinator:
// ReadShareGroupStateSummary (87: start offset, leader epoch, records done
// past it, and the lag), InitializeShareGroupState (83: start the group's
// state anew at an offset, the next state epoch) and DeleteShareGroupState
// (86: forget it). A partition led by this broker is read or changed
// directly.

func init() {
	register(83, 0, 0, concurrent, (*Server).handleInitializeShareGroupState,
		needsClusterElse(acl.ClusterAction, shareStateDenied))
	register(86, 0, 0, concurrent, (*Server).handleDeleteShareGroupState,
		needsClusterElse(acl.ClusterAction, shareStateDenied))
	register(87, 0, 1, concurrent, (*Server).handleReadShareGroupStateSummary,
		needsClusterElse(acl.ClusterAction, shareStateDenied))
	register(90, 0, 1, concurrent, (*Server).handleDescribeShareGroupOffsets,
		(*authz).describeShareGroupOffsets)
	register(91, 0, 0, concurrent, (*Server).handleAlterShareGroupOffsets,
		(*authz).alterShareGroupOffsets)
	register(92, 0, 0, concurrent, (*Server).handleDeleteShareGroupOffsets,
		(*authz).deleteShareGroupOffsets)
}

// shareStateTimeout bounds one admin request's calls to partition leaders.
const shareStateTimeout = 10 * time.Second

// shareRemote sends share-state requests to other brokers through one kgo
// client, created on first use (a single broker never needs it).
type shareRemote struct {
	broker *replication.Broker
	opts   []kgo.Opt // the broker's identity (Config.InterBrokerClient)
	mu     sync.Mutex
	client *kgo.Client // protected by mu
}

func (r *shareRemote) get() (*kgo.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		return r.client, nil
	}
	var seeds []string
	for _, b := range r.broker.Brokers() {
		seeds = append(seeds, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("strata-share-state")}, r.opts...)...)
	if err != nil {
		return nil, err
	}
	r.client = cl
	return cl, nil
}

func (r *shareRemote) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		r.client.Close()
		r.client = nil
	}
}

// shareSummary is one share partition's state as the offset APIs report it.
type shareSummary struct {
	code        int16
	exists      bool
	start       int64
	leaderEpoch int32
	lag         int64
}

// summarizeLocal reads the state of group on a partition this broker leads.
func (s *Server) summarizeLocal(ctx context.Context, topic string, partition int32, group string) shareSummary {
	reg, epoch, err := s.broker.ShareLeader(ctx, topic, partition)
	if err != nil {
		return shareSummary{code: errShareCode(err)}
	}
	st, _ := reg.Group(group)
	if st == nil {
		return shareSummary{leaderEpoch: epoch, start: -1, lag: -1}
	}
	lp, err := s.broker.Partition(topic, partition)
	if err != nil {
		return shareSummary{code: errShareCode(err)}
	}
	return shareSummary{exists: true, start: st.Start, leaderEpoch: epoch, lag: sharepart.Lag(st, lp.Offsets().HighWatermark)}
}

// shareTP is one partition of a topic, with its leader.
type shareTP struct {
	topic     replication.TopicInfo
	partition int32
	leader    int32
}

// summarize reads group's state on every partition of tps, asking each
// leader; the result is in tps' order.
func (s *Server) summarize(ctx context.Context, group string, tps []shareTP) []shareSummary {
	out := make([]shareSummary, len(tps))
	byLeader := map[int32][]int{}
	for i, tp := range tps {
		switch {
		case tp.leader < 0:
			out[i] = shareSummary{code: kerr.LeaderNotAvailable.Code}
		case tp.leader == s.broker.NodeID():
			out[i] = s.summarizeLocal(ctx, tp.topic.Name, tp.partition, group)
		default:
			byLeader[tp.leader] = append(byLeader[tp.leader], i)
		}
	}
	for leader, idx := range byLeader {
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.Version = 1
		req.GroupID = group
		topics := map[[16]byte]int{}
		for _, i := range idx {
			tp := tps[i]
			j, ok := topics[tp.topic.ID]
			if !ok {
				j = len(req.Topics)
				topics[tp.topic.ID] = j
				t := kmsg.NewReadShareGroupStateSummaryRequestTopic()
				t.TopicID = tp.topic.ID
				req.Topics = append(req.Topics, t)
			}
			p := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
			p.Partition, p.LeaderEpoch = tp.partition, -1
			req.Topics[j].Partitions = append(req.Topics[j].Partitions, p)
		}
		got := map[shareTPKey]kmsg.ReadShareGroupStateSummaryResponseTopicPartition{}
		code := int16(0)
		cl, err := s.shareRemote.get()
		if err == nil {
			var kresp kmsg.Response
			kresp, err = cl.Broker(int(leader)).Request(ctx, req)
			if err == nil {
				for _, t := range kresp.(*kmsg.ReadShareGroupStateSummaryResponse).Topics {
					for _, p := range t.Partitions {
						got[shareTPKey{t.TopicID, p.Partition}] = p
					}
				}
			}
		}
		if err != nil {
			code = kerr.CoordinatorNotAvailable.Code
			s.log.Debug("reading share state from a partition leader failed", "leader", leader, "group", group, "err", err)
		}
		for _, i := range idx {
			tp := tps[i]
			p, ok := got[shareTPKey{tp.topic.ID, tp.partition}]
			switch {
			case code != 0:
				out[i] = shareSummary{code: code}
			case !ok:
				out[i] = shareSummary{code: kerr.UnknownServerError.Code}
			case p.ErrorCode != 0:
				out[i] = shareSummary{code: p.ErrorCode}
			default:
				// Strata's leaders report the lag in
				// DeliveryCompleteCount (handleReadShareGroupStateSummary).
				out[i] = shareSummary{exists: p.StartOffset >= 0, start: p.StartOffset, leaderEpoch: p.LeaderEpoch, lag: int64(p.DeliveryCompleteCount)}
			}
		}
	}
	return out
}

// handleReadShareGroupStateSummary answers for the partitions this broker
// leads: StartOffset -1 when the group has no state there. Strata puts the
// group's lag on the partition (records not yet done up to the high
// watermark) in DeliveryCompleteCount: only Strata brokers ask.
func (s *Server) handleReadShareGroupStateSummary(ctx context.Context, req *kmsg.ReadShareGroupStateSummaryRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewReadShareGroupStateSummaryResponseTopic()
		t.TopicID = rt.TopicID
		info, known := s.broker.TopicByID(rt.TopicID)
		for _, rp := range rt.Partitions {
			p := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
			p.Partition = rp.Partition
			if !known {
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				sum := s.summarizeLocal(ctx, info.Name, rp.Partition, req.GroupID)
				p.ErrorCode, p.LeaderEpoch, p.StartOffset = sum.code, sum.leaderEpoch, sum.start
				p.DeliveryCompleteCount = int32(min(max(sum.lag, -1), 1<<31-1))
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// changeLocal resets (start >= 0) or deletes (start < 0) group's state on
// a partition this broker leads.
func (s *Server) changeLocal(ctx context.Context, topic replication.TopicInfo, partition int32, group string, start int64) int16 {
	_, epoch, err := s.broker.ShareLeader(ctx, topic.Name, partition)
	if err != nil {
		return errShareCode(err)
	}
	sp := s.share.part(shareKey{topic.ID, partition, group})
	if err := sp.acquire(ctx); err != nil {
		return errShareCode(err)
	}
	defer sp.release()
	var d sharepart.Delta
	if start >= 0 {
		d.Reset(group, start)
	} else {
		d.Delete(group)
	}
	if err := s.broker.ShareApplyAt(ctx, topic.Name, partition, epoch, d.Encode()); err != nil {
		return errShareCode(err)
	}
	sp.notify()
	return 0
}

// change resets or deletes group's state on each of tps (starts[i] < 0:
// delete), asking each leader; it returns each partition's error code.
func (s *Server) change(ctx context.Context, group string, tps []shareTP, starts []int64) []int16 {
	out := make([]int16, len(tps))
	byLeader := map[int32][]int{}
	for i, tp := range tps {
		switch {
		case tp.leader < 0:
			out[i] = kerr.LeaderNotAvailable.Code
		case tp.leader == s.broker.NodeID():
			out[i] = s.changeLocal(ctx, tp.topic, tp.partition, group, starts[i])
		default:
			byLeader[tp.leader] = append(byLeader[tp.leader], i)
		}
	}
	for leader, idx := range byLeader {
		cl, err := s.shareRemote.get()
		for _, i := range idx {
			tp := tps[i]
			if err != nil {
				out[i] = kerr.CoordinatorNotAvailable.Code
				continue
			}
			var kreq kmsg.Request
			if starts[i] >= 0 {
				req := kmsg.NewPtrInitializeShareGroupStateRequest()
				req.GroupID = group
				t := kmsg.NewInitializeShareGroupStateRequestTopic()
				t.TopicID = tp.topic.ID
				p := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
				p.Partition, p.StartOffset, p.StateEpoch = tp.partition, starts[i], -1
				t.Partitions = append(t.Partitions, p)
				req.Topics = append(req.Topics, t)
				kreq = req
			} else {
				req := kmsg.NewPtrDeleteShareGroupStateRequest()
				req.GroupID = group
				t := kmsg.NewDeleteShareGroupStateRequestTopic()
				t.TopicID = tp.topic.ID
				p := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
				p.Partition = tp.partition
				t.Partitions = append(t.Partitions, p)
				req.Topics = append(req.Topics, t)
				kreq = req
			}
			kresp, rerr := cl.Broker(int(leader)).Request(ctx, kreq)
			switch {
			case rerr != nil:
				out[i] = kerr.CoordinatorNotAvailable.Code
			default:
				out[i] = kerr.UnknownServerError.Code
				switch r := kresp.(type) {
				case *kmsg.InitializeShareGroupStateResponse:
					if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
						out[i] = r.Topics[0].Partitions[0].ErrorCode
					}
				case *kmsg.DeleteShareGroupStateResponse:
					if len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
						out[i] = r.Topics[0].Partitions[0].ErrorCode
					}
				}
			}
		}
	}
	return out
}

func (s *Server) handleInitializeShareGroupState(ctx context.Context, req *kmsg.InitializeShareGroupStateRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewInitializeShareGroupStateResponseTopic()
		t.TopicID = rt.TopicID
		info, known := s.broker.TopicByID(rt.TopicID)
		for _, rp := range rt.Partitions {
			p := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case !known:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.StartOffset < 0:
				p.ErrorCode = kerr.InvalidRequest.Code
			default:
				p.ErrorCode = s.changeLocal(ctx, info, rp.Partition, req.GroupID, rp.StartOffset)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

func (s *Server) handleDeleteShareGroupState(ctx context.Context, req *kmsg.DeleteShareGroupStateRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteShareGroupStateResponseTopic()
		t.TopicID = rt.TopicID
		info, known := s.broker.TopicByID(rt.TopicID)
		for _, rp := range rt.Partitions {
			p := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
			p.Partition = rp.Partition
			if !known {
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				p.ErrorCode = s.changeLocal(ctx, info, rp.Partition, req.GroupID, -1)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// shareTopicParts lists the partitions of topic with their leaders.
func shareTopicParts(t replication.TopicInfo) []shareTP {
	out := make([]shareTP, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		out = append(out, shareTP{topic: t, partition: p.Partition, leader: p.Leader})
	}
	return out
}

// DescribeShareGroupOffsets: v0-1 (KIP-932; v1 adds Lag, KIP-1226)
//
// Behaviour: for each group, the named topics' partitions (null Topics:
// every topic where the group has state) with the share-partition start
// offset, the leader epoch and (v1) the lag: records up to the high
// watermark not yet acknowledged or archived. A partition where the group
// has no state is reported with StartOffset -1 when named, left out when
// not. UNKNOWN_TOPIC_OR_PARTITION for an unknown topic.
func (s *Server) handleDescribeShareGroupOffsets(ctx context.Context, req *kmsg.DescribeShareGroupOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	ctx, cancel := context.WithTimeout(ctx, shareStateTimeout)
	defer cancel()
	for _, rg := range req.Groups {
		g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		g.GroupID = rg.GroupID
		type named struct {
			topic replication.TopicInfo
			parts []int32 // nil: all
			known bool
			name  string
		}
		var topics []named
		if rg.Topics == nil {
			for _, t := range s.broker.Topics() {
				if !t.Internal {
					topics = append(topics, named{topic: t, known: true, name: t.Name})
				}
			}
		} else {
			for _, rt := range rg.Topics {
				t, ok := s.broker.Topic(rt.Topic)
				topics = append(topics, named{topic: t, parts: rt.Partitions, known: ok, name: rt.Topic})
			}
		}
		for _, nt := range topics {
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic, rt.TopicID = nt.name, nt.topic.ID
			if !nt.known {
				for _, p := range nt.parts {
					rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, -1, -1
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				g.Topics = append(g.Topics, rt)
				continue
			}
			tps := shareTopicParts(nt.topic)
			if nt.parts != nil {
				want := map[int32]bool{}
				for _, p := range nt.parts {
					want[p] = true
				}
				kept := tps[:0]
				for _, tp := range tps {
					if want[tp.partition] {
						kept = append(kept, tp)
						delete(want, tp.partition)
					}
				}
				tps = kept
				for p := range want {
					rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
					rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, -1, -1
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
			}
			sums := s.summarize(ctx, rg.GroupID, tps)
			for i, tp := range tps {
				sum := sums[i]
				if nt.parts == nil && sum.code == 0 && !sum.exists {
					continue
				}
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.ErrorCode, rp.StartOffset, rp.LeaderEpoch, rp.Lag = tp.partition, sum.code, -1, sum.leaderEpoch, -1
				if sum.exists {
					rp.StartOffset, rp.Lag = sum.start, sum.lag
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			sort.Slice(rt.Partitions, func(a, b int) bool { return rt.Partitions[a].Partition < rt.Partitions[b].Partition })
			if len(rt.Partitions) > 0 || nt.parts != nil {
				g.Topics = append(g.Topics, rt)
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

// shareGroupActive reports whether group has members now: the offsets of
// an active share group cannot be altered or deleted (GROUP_NOT_EMPTY).
// The group coordinator knows; on another broker the code is its error
// (NOT_COORDINATOR: clients send these requests to the coordinator).
// A group ID that is no share group (or none at all) has no members.
func shareGroupActive(s *Server, ctx context.Context, group string) (bool, int16) {
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.GroupIDs = []string{group}
	resp, err := s.groups.ShareGroupDescribe(ctx, req)
	if err != nil {
		return false, errShareCode(err)
	}
	if len(resp.Groups) != 1 {
		return false, kerr.UnknownServerError.Code
	}
	g := resp.Groups[0]
	switch g.ErrorCode {
	case 0:
		return len(g.Members) > 0, 0
	case kerr.GroupIDNotFound.Code:
		return false, 0
	}
	return false, g.ErrorCode
}

// AlterShareGroupOffsets: v0
//
// Behaviour: sets the start offset of the group on each named partition
// (its state starts anew there: records below are skipped, records at or
// above are delivered again), refused with GROUP_NOT_EMPTY while the group
// has members. UNKNOWN_TOPIC_OR_PARTITION for unknown partitions.
func (s *Server) handleAlterShareGroupOffsets(ctx context.Context, req *kmsg.AlterShareGroupOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	ctx, cancel := context.WithTimeout(ctx, shareStateTimeout)
	defer cancel()
	if active, code := shareGroupActive(s, ctx, req.GroupID); code != 0 || active {
		if code == 0 {
			code = kerr.NonEmptyGroup.Code
		}
		resp.ErrorCode = code
		return resp, nil
	}
	for _, rt := range req.Topics {
		t := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		info, known := s.broker.Topic(rt.Topic)
		t.TopicID = info.ID
		var tps []shareTP
		var starts []int64
		var at []int
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			pi, ok := partitionInfo(info, rp.Partition)
			switch {
			case !known || !ok:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.StartOffset < 0:
				p.ErrorCode = kerr.InvalidRequest.Code
			default:
				at = append(at, len(t.Partitions))
				tps = append(tps, shareTP{topic: info, partition: rp.Partition, leader: pi.Leader})
				starts = append(starts, rp.StartOffset)
			}
			t.Partitions = append(t.Partitions, p)
		}
		for i, code := range s.change(ctx, req.GroupID, tps, starts) {
			t.Partitions[at[i]].ErrorCode = code
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// DeleteShareGroupOffsets: v0
//
// Behaviour: forgets the group's state on every partition of each named
// topic (the next fetch starts at share.auto.offset.reset), refused with
// GROUP_NOT_EMPTY while the group has members.
func (s *Server) handleDeleteShareGroupOffsets(ctx context.Context, req *kmsg.DeleteShareGroupOffsetsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	ctx, cancel := context.WithTimeout(ctx, shareStateTimeout)
	defer cancel()
	if active, code := shareGroupActive(s, ctx, req.GroupID); code != 0 || active {
		if code == 0 {
			code = kerr.NonEmptyGroup.Code
		}
		resp.ErrorCode = code
		return resp, nil
	}
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		info, known := s.broker.Topic(rt.Topic)
		if !known {
			t.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, t)
			continue
		}
		t.TopicID = info.ID
		tps := shareTopicParts(info)
		starts := make([]int64, len(tps))
		for i := range starts {
			starts[i] = -1
		}
		for _, code := range s.change(ctx, req.GroupID, tps, starts) {
			if code != 0 && t.ErrorCode == 0 {
				t.ErrorCode = code
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// describeShareGroupOffsets: DESCRIBE on each group (else its error and no
// topics) and on each topic (else hidden).
func (z *authz) describeShareGroupOffsets(*kmsg.DescribeShareGroupOffsetsRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		for i := range resp.(*kmsg.DescribeShareGroupOffsetsResponse).Groups {
			g := &resp.(*kmsg.DescribeShareGroupOffsetsResponse).Groups[i]
			if !z.ok(acl.Describe, acl.Group, g.GroupID) {
				g.Topics, g.ErrorCode, g.ErrorMessage = nil, errGroupAuth, nil
				continue
			}
			keep := g.Topics[:0]
			for _, t := range g.Topics {
				if z.ok(acl.Describe, acl.Topic, t.Topic) {
					keep = append(keep, t)
				}
			}
			g.Topics = keep
		}
	}
}

func shareStateDenied(kreq kmsg.Request) kmsg.Response {
	resp := kreq.ResponseKind()
	resp.SetVersion(kreq.GetVersion())
	switch r := kreq.(type) {
	case *kmsg.InitializeShareGroupStateRequest:
		out := resp.(*kmsg.InitializeShareGroupStateResponse)
		for _, t := range r.Topics {
			st := kmsg.NewInitializeShareGroupStateResponseTopic()
			st.TopicID = t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errClusterAuth
				st.Partitions = append(st.Partitions, sp)
			}
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.ReadShareGroupStateSummaryRequest:
		out := resp.(*kmsg.ReadShareGroupStateSummaryResponse)
		for _, t := range r.Topics {
			st := kmsg.NewReadShareGroupStateSummaryResponseTopic()
			st.TopicID = t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errClusterAuth
				st.Partitions = append(st.Partitions, sp)
			}
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.DeleteShareGroupStateRequest:
		out := resp.(*kmsg.DeleteShareGroupStateResponse)
		for _, t := range r.Topics {
			st := kmsg.NewDeleteShareGroupStateResponseTopic()
			st.TopicID = t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errClusterAuth
				st.Partitions = append(st.Partitions, sp)
			}
			out.Topics = append(out.Topics, st)
		}
	}
	return resp
}

// alterShareGroupOffsets: READ on the group, then READ on every topic, else
// the whole request fails.
func (z *authz) alterShareGroupOffsets(r *kmsg.AlterShareGroupOffsetsRequest) (kmsg.Response, func(kmsg.Response)) {
	if d, _ := z.group(r, acl.Read, r.GroupID); d != nil {
		return d, nil
	}
	for _, t := range r.Topics {
		if !z.ok(acl.Read, acl.Topic, t.Topic) {
			return errorResponse(r, errTopicAuth), nil
		}
	}
	return nil, nil
}

// deleteShareGroupOffsets: DELETE on the group, then READ on every topic,
// else the whole request fails.
func (z *authz) deleteShareGroupOffsets(r *kmsg.DeleteShareGroupOffsetsRequest) (kmsg.Response, func(kmsg.Response)) {
	if d, _ := z.group(r, acl.Delete, r.GroupID); d != nil {
		return d, nil
	}
	for _, t := range r.Topics {
		if !z.ok(acl.Read, acl.Topic, t.Topic) {
			return errorResponse(r, errTopicAuth), nil
		}
	}
	return nil, nil
}
