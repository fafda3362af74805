package groupcoord

import (
	"encoding/binary"
	"errors"
)

// KIP-848 consumer group records in __consumer_offsets. kmsg has no types
// for them, so this file encodes them by hand following Kafka's record
// schemas (keys: int16 version then non-flexible fields; values: int16
// version 0 then flexible fields and an empty tagged-field section). The
// layouts follow Kafka 4.0's schemas as far as Strata uses them; Kafka's
// later optional fields are not written.
//
//	key version  record                         key fields        value (v0, flexible)
//	3            ConsumerGroupMetadata          group             epoch int32
//	5            ConsumerGroupMemberMetadata    group, member     instance?, rack?, client id, client host,
//	                                                              [subscribed topic], regex?, rebalance timeout ms, assignor?
//	6            ConsumerGroupTargetAssignmentMetadata group      assignment epoch int32
//	7            ConsumerGroupTargetAssignmentMember   group, member  [topic id, [partition]]
//	8            ConsumerGroupCurrentMemberAssignment  group, member  epoch, previous epoch, state int8,
//	                                                              [assigned], [pending revocation]
//
// A nil value is a tombstone. The group's tombstone (key 3) comes last when
// a group is deleted, after every member's.

const (
	keyCGMetadata       = 3
	keyCGMember         = 5
	keyCGTargetMetadata = 6
	keyCGTargetMember   = 7
	keyCGCurrent        = 8
	// maxDecodedItems bounds every array read from a record.
	maxDecodedItems = 1 << 20
)

var errShortRecord = errors.New("groupcoord: truncated record")

type enc struct{ b []byte }

func (e *enc) i8(v int8)   { e.b = append(e.b, byte(v)) }
func (e *enc) i16(v int16) { e.b = binary.BigEndian.AppendUint16(e.b, uint16(v)) }
func (e *enc) i32(v int32) { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *enc) i64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *enc) uv(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) str(s string) {
	e.i16(int16(len(s)))
	e.b = append(e.b, s...)
}
func (e *enc) cstr(s string) {
	e.uv(uint64(len(s)) + 1)
	e.b = append(e.b, s...)
}
func (e *enc) cnstr(s *string) {
	if s == nil {
		e.uv(0)
		return
	}
	e.cstr(*s)
}
func (e *enc) tags() { e.uv(0) }
func (e *enc) assignment(a assignment) {
	ids := sortedTopicIDs(a)
	e.uv(uint64(len(ids)) + 1)
	for _, id := range ids {
		e.b = append(e.b, id[:]...)
		e.uv(uint64(len(a[id])) + 1)
		for _, p := range a[id] {
			e.i32(p)
		}
		e.tags()
	}
}

type dec struct {
	b   []byte
	err error
}

func (d *dec) need(n int) bool {
	if d.err != nil || n < 0 || len(d.b) < n {
		d.err = errShortRecord
		return false
	}
	return true
}
func (d *dec) i8() int8 {
	if !d.need(1) {
		return 0
	}
	v := int8(d.b[0])
	d.b = d.b[1:]
	return v
}
func (d *dec) i16() int16 {
	if !d.need(2) {
		return 0
	}
	v := int16(binary.BigEndian.Uint16(d.b))
	d.b = d.b[2:]
	return v
}
func (d *dec) i32() int32 {
	if !d.need(4) {
		return 0
	}
	v := int32(binary.BigEndian.Uint32(d.b))
	d.b = d.b[4:]
	return v
}
func (d *dec) i64() int64 {
	if !d.need(8) {
		return 0
	}
	v := int64(binary.BigEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}
func (d *dec) uv() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShortRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}
func (d *dec) str() string {
	n := int(d.i16())
	if !d.need(n) {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
func (d *dec) cnstr() *string {
	n := d.uv()
	if n == 0 || d.err != nil {
		return nil
	}
	if n > uint64(len(d.b))+1 {
		d.err = errShortRecord
		return nil
	}
	s := string(d.b[:n-1])
	d.b = d.b[n-1:]
	return &s
}
func (d *dec) cstr() string {
	if s := d.cnstr(); s != nil {
		return *s
	}
	return ""
}
func (d *dec) arrayLen() int {
	n := d.uv()
	if n == 0 || d.err != nil {
		return 0
	}
	if n-1 > maxDecodedItems || n-1 > uint64(len(d.b)) {
		d.err = errShortRecord
		return 0
	}
	return int(n - 1)
}
func (d *dec) skipTags() {
	n := d.uv()
	for i := uint64(0); i < n && d.err == nil && i < maxDecodedItems; i++ {
		d.uv()
		l := d.uv()
		if l > uint64(len(d.b)) {
			d.err = errShortRecord
			return
		}
		d.b = d.b[l:]
	}
}
func (d *dec) assignment() assignment {
	a := assignment{}
	n := d.arrayLen()
	for i := 0; i < n && d.err == nil; i++ {
		if !d.need(16) {
			break
		}
		var id [16]byte
		copy(id[:], d.b)
		d.b = d.b[16:]
		np := d.arrayLen()
		ps := make([]int32, 0, min(np, 1024))

		for j := 0; j < np && d.err == nil; j++ {
			ps = append(ps, d.i32())
		}
		for _, p := range ps {
			a.add(topicPartition{id, p}) // sorted, distinct
		}
		d.skipTags()
	}
	return a
}

func cgKey(version int16, group string, member *string) []byte {
	var e enc
	e.i16(version)
	e.str(group)
	if member != nil {
		e.str(*member)
	}
	return e.b
}

func cgEpochValue(epoch int32) []byte {
	var e enc
	e.i16(0)
	e.i32(epoch)
	e.tags()
	return e.b
}

func cgMemberValue(m *cmember) []byte {
	var e enc
	e.i16(0)
	e.cnstr(m.instanceID)
	e.cnstr(m.rackID)
	e.cstr(m.clientID)
	e.cstr(m.clientHost)
	e.uv(uint64(len(m.subscribed)) + 1)
	for _, t := range m.subscribed {
		e.cstr(t)
	}
	e.cnstr(strPtrOrNil(m.regex))
	e.i32(int32(m.rebalanceTimeout.Milliseconds()))
	e.cnstr(strPtrOrNil(m.assignor))
	e.tags()
	return e.b
}

func cgTargetValue(a assignment) []byte {
	var e enc
	e.i16(0)
	e.assignment(a)
	e.tags()
	return e.b
}

func cgCurrentValue(m *cmember) []byte {
	var e enc
	e.i16(0)
	e.i32(m.epoch)
	e.i32(m.prevEpoch)
	e.i8(m.state())
	e.assignment(m.assigned)
	e.assignment(m.pendingRevoke)
	e.tags()
	return e.b
}

func strPtrOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
