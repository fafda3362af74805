package groupcoord

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/coord"
	"github.com/strata-io/strata/replication"
)

// Transactional offset commits (TxnOffsetCommit, KIP-98 and KIP-447).
//
// A transactional producer commits its consumer group's offsets inside
// its transaction: the offset records are appended to the group's
// __consumer_offsets partition in a transactional batch carrying the
// producer's ID and epoch (the partition was added to the transaction by
// AddOffsetsToTxn), and held as pending, invisible to OffsetFetch. The
// transaction coordinator's marker on that partition decides them: a
// commit makes them the group's committed offsets, an abort drops them.
// Replaying the partition does the same from the batches and markers, so
// pending offsets survive a coordinator move. While an offset is pending,
// an OffsetFetch with RequireStable gets UNSTABLE_OFFSET_COMMIT for it
// (clients retry), so a consumer taking over a partition never starts
// from an offset that the transaction is about to replace.

// pendingTxn is one producer's undecided offsets, by group.
type pendingTxn struct {
	groups map[string]map[string]map[int32]offsetEntry // group -> topic -> partition
}

func (s *shard) pendingFor(pid int64) *pendingTxn {
	if s.txnOffsets == nil {
		s.txnOffsets = map[int64]*pendingTxn{}
	}
	p := s.txnOffsets[pid]
	if p == nil {
		p = &pendingTxn{groups: map[string]map[string]map[int32]offsetEntry{}}
		s.txnOffsets[pid] = p
	}
	return p
}

func (p *pendingTxn) put(group, topic string, partition int32, o offsetEntry) {
	ts := p.groups[group]
	if ts == nil {
		ts = map[string]map[int32]offsetEntry{}
		p.groups[group] = ts
	}
	ps := ts[topic]
	if ps == nil {
		ps = map[int32]offsetEntry{}
		ts[topic] = ps
	}
	ps[partition] = o
}

// isPending reports whether any producer has an undecided offset for
// the group's partition.
func (s *shard) isPending(group, topic string, partition int32) bool {
	for _, p := range s.txnOffsets {
		if _, ok := p.groups[group][topic][partition]; ok {
			return true
		}
	}
	return false
}

// completeTxn applies a marker: a commit makes the producer's pending
// offsets committed, an abort drops them.
func (s *shard) completeTxn(pid int64, commit bool) {
	p := s.txnOffsets[pid]
	if p == nil {
		return
	}
	delete(s.txnOffsets, pid)
	if !commit {
		return
	}
	for group, ts := range p.groups {
		g := s.group(group, true)
		for topic, ps := range ts {
			for partition, o := range ps {
				g.commit(topic, partition, o) // the record is already in the log
			}
		}
	}
}

// replayTxnOffset notes a transactional offset record read back from
// the log as pending (tombstones and other keys in such a batch are not
// something Strata writes; they are ignored).
func (s *shard) replayTxnOffset(r decodedRecord) {
	if len(r.Key) < 2 || r.Value == nil || r.ProducerID < 0 {
		return
	}
	if v := int16(r.Key[0])<<8 | int16(r.Key[1]); v != 0 && v != 1 {
		return
	}
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(r.Key); err != nil {
		return
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(r.Value); err != nil {
		return
	}
	le := v.LeaderEpoch
	if v.Version < 3 {
		le = -1
	}
	s.pendingFor(r.ProducerID).put(k.Group, k.Topic, k.Partition, offsetEntry{Offset: v.Offset, LeaderEpoch: le, Metadata: v.Metadata, CommitMs: v.CommitTimestamp})
}

// EnsureOffsetsTopic returns __consumer_offsets, creating it on first use
// (the transaction coordinator needs its partition count).
func (c *Coordinator) EnsureOffsetsTopic(ctx context.Context) (replication.TopicInfo, error) {
	return c.ensureTopic(ctx)
}

// CompleteTxn tells the coordinator that a marker for producer pid was
// written to __consumer_offsets partition p: its pending offsets become
// committed (commit) or are dropped. If the partition's shard is not
// loaded, its next load replays the marker.
func (c *Coordinator) CompleteTxn(ctx context.Context, partition int32, pid int64, commit bool) {
	sh := c.core.Lookup(partition)
	if sh == nil || !sh.IsLoaded() {
		return
	}
	s := sh.State()
	ctx, cancel := context.WithTimeout(ctx, coord.WriteTimeout)
	defer cancel()
	c.doOn(ctx, s, 0, func(s *shard, e *effects, rid uint64) {
		s.completeTxn(pid, commit)
		e.reply(rid, nil)
	})
}

// TxnOffsetCommit answers TxnOffsetCommit (v0-5; v5's implicit add is the caller's): the offsets are written
// in the producer's transaction and stay pending until its marker.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error) {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	pre := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		pre[i] = make([]int16, len(t.Partitions))
		info, ok := c.broker.Topic(t.Topic)
		for j, p := range t.Partitions {
			switch {
			case !ok || p.Partition < 0 || int(p.Partition) >= len(info.Partitions):
				pre[i][j] = kerr.UnknownTopicOrPartition.Code
			case p.Metadata != nil && len(*p.Metadata) > c.cfg.MaxMetadataBytes:
				pre[i][j] = kerr.OffsetMetadataTooLarge.Code
			}
			rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: pre[i][j]})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	setAll := func(code int16) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if pre[i][j] == 0 {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
	}
	if req.Group == "" {
		setAll(kerr.InvalidGroupID.Code)
		return resp, nil
	}
	if req.ProducerID < 0 || req.TransactionalID == "" {
		setAll(kerr.InvalidRequest.Code)
		return resp, nil
	}
	generation, memberID := int32(-1), ""
	var instanceID *string
	if req.Version >= 3 {
		generation, memberID, instanceID = req.Generation, req.MemberID, req.InstanceID
	}
	_, code, err := c.do(ctx, req.Group, func(s *shard, e *effects, rid uint64) {
		now := s.c.cfg.Now()
		g := s.group(req.Group, false)
		if cg := s.cgroups[req.Group]; cg != nil && len(cg.members) > 0 {
			if code := cg.commitCheck(0, generation, memberID); code != 0 && generation >= 0 {
				setAll(code)
				e.reply(rid, resp)
				return
			}
			g = s.group(req.Group, true)
		} else if g == nil {
			g = s.group(req.Group, true)
		} else if generation >= 0 || memberID != "" || instanceID != nil {
			if code := g.txnCommitCheck(now, generation, memberID, instanceID); code != 0 {
				setAll(code)
				s.dropIfGone(req.Group, g)
				e.reply(rid, resp)
				return
			}
		}
		pt := s.pendingFor(req.ProducerID)
		for i, t := range req.Topics {
			for j, p := range t.Partitions {
				if pre[i][j] != 0 {
					continue
				}
				o := offsetEntry{Offset: p.Offset, LeaderEpoch: -1, CommitMs: now.UnixMilli()}
				if req.Version >= 2 {
					o.LeaderEpoch = p.LeaderEpoch
				}
				if p.Metadata != nil {
					o.Metadata = *p.Metadata
				}
				pt.put(req.Group, t.Topic, p.Partition, o)
				e.txn = append(e.txn, offsetRecord(req.Group, t.Topic, p.Partition, o))
			}
		}
		e.txnPID, e.txnEpoch = req.ProducerID, req.ProducerEpoch
		e.reply(rid, resp)
	})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		setAll(code)
	}
	return resp, nil
}

// txnCommitCheck validates a TxnOffsetCommit's member fields (v3+,
// KIP-447): the member must be in the group at its generation. Unlike a
// plain commit it is allowed during a rebalance (the transaction is
// fenced by the producer epoch, not the generation).
func (g *group) txnCommitCheck(now time.Time, generation int32, memberID string, instanceID *string) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if generation < 0 && memberID == "" && instanceID == nil {
		return 0
	}
	m, code := g.checkMember(memberID, instanceID)
	if code != 0 {
		return code
	}
	if generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m.sessionDeadline = now.Add(m.sessionTimeout)
	return 0
}
