package groupcoord

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/coord"
)

// A shard owns the groups of one __consumer_offsets partition that this
// broker leads, at one leader epoch: it is the state of a shard of the
// coordinator core (internal/coord), whose goroutine is the only one that
// touches the groups -- requests arrive as calls, timers as ticks (Tick).
// Records are written through the core's Write before the replies they
// back are sent, so a client never sees state that is not in the log. Any
// write failure unloads the shard: the next request reloads it from the
// log, the only source of truth.

type shard struct {
	c         *Coordinator
	partition int32
	epoch     int32
	core      *coord.Shard[*shard] // nil in tests that only replay

	// Owned by the shard goroutine.
	groups  map[string]*group  // classic groups, and the offsets of every group
	cgroups map[string]*cgroup // KIP-848 consumer groups
	sgroups map[string]*sgroup // KIP-932 share groups (share.go)
	// waiters are the replies of calls not answered yet, by reply ID.
	waiters map[uint64]func(kmsg.Response)
	nextRID uint64
	// nextExpiry is when offsets are next checked against the retention.
	nextExpiry time.Time
	// txnOffsets are transactional offset commits not yet decided, by
	// producer ID (txn_offsets.go). Created on first use.
	txnOffsets map[int64]*pendingTxn
}

func newShard(c *Coordinator, partition, epoch int32) *shard {
	return &shard{
		c: c, partition: partition, epoch: epoch,
		groups:  map[string]*group{},
		cgroups: map[string]*cgroup{},
		sgroups: map[string]*sgroup{},
		waiters: map[uint64]func(kmsg.Response){},
	}
}

// call runs fn with a new reply ID: whatever it (or a later event)
// replies under that ID goes to reply. Then its effects are applied.
func (s *shard) call(fn func(s *shard, e *effects, rid uint64), reply func(kmsg.Response)) {
	s.nextRID++
	rid := s.nextRID
	s.waiters[rid] = reply
	var e effects
	fn(s, &e, rid)
	s.apply(&e)
}

// Replay is coord.State's: one stored record.
func (s *shard) Replay(r coord.Decoded, now time.Time) error { return s.replay(r, now) }

// Loaded is coord.State's: forget what the replay left empty.
func (s *shard) Loaded() []any {
	for id, g := range s.groups {
		s.dropIfGone(id, g)
	}
	return []any{"groups", len(s.groups)}
}

// Stopped is coord.State's: callers still waiting see the shard's end
// (NOT_COORDINATOR) through the core.
func (s *shard) Stopped() {}

// Tick is coord.State's: group timers, and the offsets retention.
func (s *shard) Tick(time.Time) {
	now := s.c.cfg.Now()
	var e effects
	for id, g := range s.groups {
		g.tick(&e, now)
		s.dropIfGone(id, g)
	}
	for _, cg := range s.cgroups {
		cg.tick(&e, now)
	}
	s.shareTick(&e, now)
	if !now.Before(s.nextExpiry) {
		s.nextExpiry = now.Add(s.c.cfg.OffsetsRetentionCheckInterval)
		s.expireOffsets(&e, now)
	}
	s.apply(&e)
}

// expireOffsets applies offsets.retention.minutes to every empty group
// (not to the offsets of a KIP-848 group that has members).
func (s *shard) expireOffsets(e *effects, now time.Time) {
	for id, g := range s.groups {
		if cg := s.cgroups[id]; cg != nil && len(cg.members) > 0 {
			continue
		}
		if recs := g.expireOffsets(now, s.c.cfg.OffsetsRetention); len(recs) > 0 {
			e.records = append(e.records, recs...)
			s.dropIfGone(id, g)
		}
	}
}

// dropIfGone forgets a deleted group, or an empty one with no offsets.
func (s *shard) dropIfGone(id string, g *group) {
	if g.state == stateDead || (g.state == stateEmpty && len(g.offsets) == 0 && len(g.pending) == 0 && g.generation == 0) {
		delete(s.groups, id)
	}
}

// group returns the group, creating an empty one when create is set.
func (s *shard) group(id string, create bool) *group {
	g := s.groups[id]
	if g == nil && create {
		g = newGroup(id, s.c.cfg.Now())
		s.groups[id] = g
	}
	return g
}

// apply writes e's records, then sends its replies. A failed write turns
// every reply into NOT_COORDINATOR and reports false: the core has
// stopped the shard, its memory being ahead of the log.
func (s *shard) apply(e *effects) bool {
	ok := true
	if len(e.txn) > 0 {
		if err := s.core.WriteTxn(e.txn, e.txnPID, e.txnEpoch); err != nil {
			s.c.cfg.Logger.Warn("group coordinator transactional write failed; unloading", "partition", s.partition, "err", err)
			for i := range e.replies {
				setErrorCode(e.replies[i].resp, kerr.NotCoordinator.Code)
			}
			e.records, ok = nil, false
		}
	}
	if len(e.records) > 0 {
		if err := s.core.Write(e.records); err != nil {
			s.c.cfg.Logger.Warn("group coordinator write failed; unloading", "partition", s.partition, "err", err)
			for i := range e.replies {
				setErrorCode(e.replies[i].resp, kerr.NotCoordinator.Code)
			}
			ok = false
		}
	}
	for _, r := range e.replies {
		if reply, found := s.waiters[r.id]; found {
			delete(s.waiters, r.id)
			reply(r.resp)
		}
	}
	return ok
}

// replay applies one stored record. Records that do not decode are logged
// and skipped: one bad record must not make every group of the partition
// unavailable.
func (s *shard) replay(r decodedRecord, now time.Time) error {
	if r.Control >= 0 {
		s.completeTxn(r.ProducerID, r.Control == 1)
		return nil
	}
	if r.Transactional {
		s.replayTxnOffset(r)
		return nil
	}
	if len(r.Key) < 2 {
		return nil
	}
	switch version := int16(r.Key[0])<<8 | int16(r.Key[1]); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.Key); err != nil {
			s.c.cfg.Logger.Warn("skipping bad offset key", "partition", s.partition, "offset", r.Offset, "err", err)
			return nil
		}
		if r.Value == nil {
			if g := s.groups[k.Group]; g != nil {
				g.deleteOffset(k.Topic, k.Partition)
			}
			return nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(r.Value); err != nil {
			s.c.cfg.Logger.Warn("skipping bad offset value", "partition", s.partition, "offset", r.Offset, "err", err)
			return nil
		}
		le := v.LeaderEpoch
		if v.Version < 3 {
			le = -1
		}
		s.group(k.Group, true).commit(k.Topic, k.Partition, offsetEntry{Offset: v.Offset, LeaderEpoch: le, Metadata: v.Metadata, CommitMs: v.CommitTimestamp})
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.Key); err != nil {
			s.c.cfg.Logger.Warn("skipping bad group key", "partition", s.partition, "offset", r.Offset, "err", err)
			return nil
		}
		if r.Value == nil {
			delete(s.groups, k.Group)
			return nil
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(r.Value); err != nil {
			s.c.cfg.Logger.Warn("skipping bad group value", "partition", s.partition, "offset", r.Offset, "err", err)
			return nil
		}
		s.group(k.Group, true).loadMetadata(&v, now)
	case keyCGMetadata, keyCGMember, keyCGTargetMetadata, keyCGTargetMember, keyCGCurrent:
		d := &dec{b: r.Key[2:]}
		group := d.str()
		member := ""
		if version == keyCGMember || version == keyCGTargetMember || version == keyCGCurrent {
			member = d.str()
		}
		if d.err != nil {
			s.c.cfg.Logger.Warn("skipping bad consumer group key", "partition", s.partition, "offset", r.Offset)
			return nil
		}
		if version == keyCGMetadata && r.Value == nil {
			delete(s.cgroups, group)
			return nil
		}
		cg := s.cgroups[group]
		if cg == nil {
			cg = newCGroup(group)
			s.cgroups[group] = cg
		}
		if err := cg.replay(version, member, r.Value, now, &s.c.cfg); err != nil {
			s.c.cfg.Logger.Warn("skipping bad consumer group record", "partition", s.partition, "offset", r.Offset, "err", err)
		}
	case keySGMember, keySGMetadata, keySGTargetMetadata, keySGTargetMember, keySGCurrent, keySGStatePartition:
		if err := s.replayShare(version, r.Key[2:], r.Value, now); err != nil {
			s.c.cfg.Logger.Warn("skipping bad share group record", "partition", s.partition, "offset", r.Offset, "err", err)
		}
	default:
		// Other record types (streams groups): not built.
	}
	return nil
}

// topicSource resolves subscribed topics from the broker's metadata.
func (s *shard) topicSource(name string) (topicMeta, bool) {
	t, ok := s.c.broker.Topic(name)
	if !ok {
		return topicMeta{}, false
	}
	return topicMeta{name: name, id: t.ID, partitions: int32(len(t.Partitions))}, true
}

// setErrorCode sets the top-level (or every per-item) error code of a
// response held back by a failed write.
func setErrorCode(r kmsg.Response, code int16) {
	switch r := r.(type) {
	case *kmsg.JoinGroupResponse:
		r.ErrorCode = code
	case *kmsg.SyncGroupResponse:
		r.ErrorCode = code
	case *kmsg.HeartbeatResponse:
		r.ErrorCode = code
	case *kmsg.LeaveGroupResponse:
		r.ErrorCode = code
	case *kmsg.OffsetCommitResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].ErrorCode = code
			}
		}
	case *kmsg.DeleteGroupsResponse:
		for i := range r.Groups {
			r.Groups[i].ErrorCode = code
		}
	case *kmsg.OffsetDeleteResponse:
		r.ErrorCode = code
	case *kmsg.TxnOffsetCommitResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				r.Topics[i].Partitions[j].ErrorCode = code
			}
		}
	case *kmsg.ConsumerGroupHeartbeatResponse:
		r.ErrorCode = code
		r.Assignment = nil
	case *kmsg.ShareGroupHeartbeatResponse:
		r.ErrorCode = code
		r.Assignment = nil
	}
}
