package groupcoord

import (
	"time"
)

// Share-group records in __consumer_offsets, in Kafka 4.4's formats (the
// group coordinator's ShareGroup*Key/Value schemas; kmsg has no types for
// them, so they are encoded by hand like records848.go's): keys are the
// int16 record type then non-flexible fields, values are int16 version 0
// then flexible fields and an empty tagged-field section.
//
//	key  record                              key fields      value (v0)
//	10   ShareGroupMemberMetadata            group, member   rack?, client id, client host, [subscribed topic]
//	11   ShareGroupMetadata                  group           epoch int32, metadata hash int64
//	12   ShareGroupTargetAssignmentMetadata  group           assignment epoch int32, assignment timestamp int64
//	13   ShareGroupTargetAssignmentMember    group, member   [topic id, [partition]] (the KIP-848 target's format: cgTargetValue)
//	14   ShareGroupCurrentMemberAssignment   group, member   epoch, previous epoch, state int8, [topic id, [partition]]
//
// A nil value is a tombstone; the group's (11) comes last. Kafka's
// ShareGroupStatePartitionMetadata (15) is not written (share-partition
// state lives elsewhere in Strata) and is skipped on replay. The metadata
// hash is Strata's own (FNV-64a of the subscribed topics' name, ID and
// partition count), not Kafka's: a Kafka coordinator reading it would
// only bump the epoch once.

const (
	keySGMember         = 10
	keySGMetadata       = 11
	keySGTargetMetadata = 12
	keySGTargetMember   = 13
	keySGCurrent        = 14
	keySGStatePartition = 15
)

func sgMemberKey(group, member string) []byte { return cgKey(keySGMember, group, &member) }

func sgMemberValue(m *smember) []byte {
	var e enc
	e.i16(0)
	e.cnstr(m.rackID)
	e.cstr(m.clientID)
	e.cstr(m.clientHost)
	e.uv(uint64(len(m.subscribed)) + 1)
	for _, t := range m.subscribed {
		e.cstr(t)
	}
	e.tags()
	return e.b
}

func sgMetadataValue(g *sgroup) []byte {
	var e enc
	e.i16(0)
	e.i32(g.epoch)
	e.i64(g.metaHash)
	e.tags()
	return e.b
}

func sgTargetMetadataValue(epoch int32, ms int64) []byte {
	var e enc
	e.i16(0)
	e.i32(epoch)
	e.i64(ms)
	e.tags()
	return e.b
}

// sgCurrentValue: state is 0 (Kafka's MemberState.STABLE): a share member
// takes its target at once.
func sgCurrentValue(m *smember) []byte {
	var e enc
	e.i16(0)
	e.i32(m.epoch)
	e.i32(m.prevEpoch)
	e.i8(0)
	e.assignment(m.assigned)
	e.tags()
	return e.b
}

// replayShare applies one share-group record (key version 10-15); member
// sessions start again at now.
func (s *shard) replayShare(version int16, key, value []byte, now time.Time) error {
	d := &dec{b: key}
	group := d.str()
	member := ""
	if version == keySGMember || version == keySGTargetMember || version == keySGCurrent {
		member = d.str()
	}
	if d.err != nil {
		return d.err
	}
	if version == keySGStatePartition {
		return nil
	}
	if version == keySGMetadata && value == nil {
		delete(s.sgroups, group)
		return nil
	}
	g := s.sgroups[group]
	if g == nil {
		if value == nil {
			return nil
		}
		g = newSGroup(group)
		s.sgroups[group] = g
	}
	if value == nil {
		switch version {
		case keySGMember:
			delete(g.members, member)
		case keySGTargetMember:
			delete(g.target, member)
		case keySGCurrent:
			if m := g.members[member]; m != nil {
				m.epoch, m.prevEpoch, m.assigned = 0, 0, assignment{}
			}
		case keySGTargetMetadata:
			g.assignmentEpoch = 0
		}
		return nil
	}
	v := &dec{b: value}
	if v.i16() != 0 && v.err == nil {
		return errShortRecord // a value version this coordinator does not know
	}
	member1 := func() *smember {
		m := g.members[member]
		if m == nil {
			m = &smember{id: member, assigned: assignment{}}
			g.members[member] = m
		}
		session, _ := s.shareTimeouts(group)
		m.deadline = now.Add(session)
		return m
	}
	switch version {
	case keySGMember:
		rack := v.cnstr()
		clientID, clientHost := v.cstr(), v.cstr()
		n := v.arrayLen()
		subs := make([]string, 0, min(n, 1024))
		for i := 0; i < n && v.err == nil; i++ {
			subs = append(subs, v.cstr())
		}
		if v.err != nil {
			return v.err
		}
		m := member1()
		m.rackID, m.clientID, m.clientHost, m.subscribed = rack, clientID, clientHost, sortedDistinct(subs)
	case keySGMetadata:
		epoch, hash := v.i32(), v.i64()
		if v.err != nil {
			return v.err
		}
		g.epoch, g.metaHash = epoch, hash
	case keySGTargetMetadata:
		epoch := v.i32()
		if v.err != nil {
			return v.err
		}
		g.assignmentEpoch = epoch
	case keySGTargetMember:
		a := v.assignment()
		if v.err != nil {
			return v.err
		}
		g.target[member] = a
	case keySGCurrent:
		epoch, prev := v.i32(), v.i32()
		v.i8()
		a := v.assignment()
		if v.err != nil {
			return v.err
		}
		m := member1()
		m.epoch, m.prevEpoch, m.assigned = epoch, prev, a
	}
	return nil
}
