package sharepart

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// RecordState is a record's state in a share partition, with Kafka's
// numbering (KIP-932's RecordState; DescribeShareGroupOffsets and the
// persisted state use the same values).
type RecordState int8

const (
	Available    RecordState = 0
	Acquired     RecordState = 1
	Acknowledged RecordState = 2
	Archived     RecordState = 4
)

func (s RecordState) String() string {
	switch s {
	case Available:
		return "available"
	case Acquired:
		return "acquired"
	case Acknowledged:
		return "acknowledged"
	case Archived:
		return "archived"
	}
	return fmt.Sprintf("state(%d)", int8(s))
}

// rec is one in-flight record's state.
type rec struct {
	state    RecordState
	count    int16  // delivery count: acquisitions so far
	member   string // the holder, while Acquired
	deadline int64  // the lock's deadline (unix ms), while Acquired; while Available, not before it (delayed redelivery; 0 = now)
	// first and last are the record's first and latest acquisition
	// times (unix ms), while it is Acquired or Available (dead letters
	// carry them). A record never delivered (count 0) that is Available
	// was deferred by its strata.deliver.after.ms (deadline); its last is
	// then its time-to-live's end (0 = none).
	first, last int64
}

// State is one share group's state on one partition: the share-partition
// start offset (SPSO; every record below it is done: acknowledged,
// archived or never to be delivered), the end offset (SPEO; no record at
// or above it was ever acquired), and every record in between. It is
// changed only by Apply, with deltas the leader computed (Acquire, Ack,
// Release, ...), so every replica holds the same state.
type State struct {
	Start int64
	recs  []rec // offsets [Start, End())
	// Epoch counts resets (AlterShareGroupOffsets, DeleteShareGroupOffsets):
	// Kafka's state epoch.
	Epoch int32
	// dlq is the dead letters waiting to be written and their producer
	// (deadletter.go); it survives resets (ordinals never go back).
	dlq dlqState
}

// End is the share-partition end offset: the first offset never acquired.
func (s *State) End() int64 { return s.Start + int64(len(s.recs)) }

// At returns the state of offset off (Archived below Start, Available at
// and above End: not acquired yet).
func (s *State) At(off int64) (state RecordState, count int16, member string, deadline int64) {
	switch {
	case off < s.Start:
		return Archived, 0, "", 0
	case off >= s.End():
		return Available, 0, "", 0
	}
	r := s.recs[off-s.Start]
	return r.state, r.count, r.member, r.deadline
}

// Counts summarizes the in-flight records at now (unix ms): acquired under
// a live lock, available again (released or expired), and done
// (acknowledged or archived but above Start).
func (s *State) Counts(nowMs int64) (acquired, available, done int) {
	for _, r := range s.recs {
		switch {
		case r.state == Acquired && r.deadline > nowMs:
			acquired++
		case r.state == Acquired || r.state == Available:
			available++
		default:
			done++
		}
	}
	return
}

// Delayed counts the records that wait for their redelivery backoff at
// now (unix ms): available again, but not before a later time.
func (s *State) Delayed(nowMs int64) int {
	n := 0
	for _, r := range s.recs {
		if r.state == Available && r.deadline > nowMs {
			n++
		}
	}
	return n
}

func (s *State) clone() *State {
	c := *s
	c.recs = append([]rec(nil), s.recs...)
	c.dlq = s.dlq.clone()
	return &c
}

// advance moves Start past every leading done record.
func (s *State) advance() {
	n := 0
	for n < len(s.recs) && (s.recs[n].state == Acknowledged || s.recs[n].state == Archived) {
		n++
	}
	if n > 0 {
		s.Start += int64(n)
		s.recs = append(s.recs[:0], s.recs[n:]...)
	}
}

// ---- deltas ----

// A Delta is a batch of state changes for the groups of one partition:
// one replicated entry (one per ShareFetch or ShareAcknowledge, never one
// per record). Its operations set absolute values, so applying the same
// delta to the same state always gives the same result.
type Delta struct {
	ops []op
}

type opKind uint8

const (
	opInit   opKind = 1 // create the group's state at start, unless it exists
	opSet    opKind = 2 // set ranges of records, then move start forward
	opReset  opKind = 3 // forget every record; start anew at start (epoch+1)
	opDelete opKind = 4 // forget the group
	// Dead letters (deadletter.go; delta version 2).
	opDead     opKind = 5 // record dead letters (ordinals set)
	opDeadDone opKind = 6 // dead letters below start are written
	opStream   opKind = 7 // set the dead-letter producer
)

type op struct {
	kind   opKind
	group  string
	start  int64 // init, reset; set: the new start (-1: unchanged); dead-done: the ordinal written up to
	ranges []Range
	// letters (opDead) and stream (opStream), version 2.
	letters []DeadLetter
	stream  *Stream
}

// Range sets every record of [First, Last] to one state.
type Range struct {
	First, Last int64
	State       RecordState
	Count       int16
	Member      string
	Deadline    int64
	// FirstMs and LastMs are the first and latest acquisition times
	// (unix ms) of records left Acquired or Available; ignored otherwise.
	FirstMs, LastMs int64
}

// Append adds o's operations after d's.
func (d *Delta) Append(o Delta) { d.ops = append(d.ops, o.ops...) }

// After returns a copy of s, group's state, with d's operations on group
// applied: what a decision made after d sees, before d is replicated.
func (s *State) After(d *Delta, group string) *State {
	c := s.clone()
	for i := range d.ops {
		if o := &d.ops[i]; o.group == group {
			c.applyOp(o)
		}
	}
	return c
}

// Empty reports whether d changes nothing.
func (d *Delta) Empty() bool { return len(d.ops) == 0 }

// Init creates group's state starting at start, unless it exists.
func (d *Delta) Init(group string, start int64) {
	d.ops = append(d.ops, op{kind: opInit, group: group, start: start})
}

// Set sets ranges of group's records (offsets at or above End extend the
// state; offsets skipped between End and a range become Archived: gaps)
// and moves Start to start when start > Start (-1: no move).
func (d *Delta) Set(group string, start int64, ranges ...Range) {
	if len(ranges) == 0 && start < 0 {
		return
	}
	d.ops = append(d.ops, op{kind: opSet, group: group, start: start, ranges: ranges})
}

// Reset forgets every record of group and starts it at start.
func (d *Delta) Reset(group string, start int64) {
	d.ops = append(d.ops, op{kind: opReset, group: group, start: start})
}

// Delete forgets group's state on the partition.
func (d *Delta) Delete(group string) {
	d.ops = append(d.ops, op{kind: opDelete, group: group})
}

// Delta versions: 1 (ranges without delivery times, ops 1-4), 2 (ranges
// with FirstMs and LastMs; each op followed by its dead letters and
// stream; ops 5-7). Both are decoded: a log written by an older broker
// still replays.
const (
	deltaVersion1 = 1
	deltaVersion  = 2
)

// Encode returns d's replicated form.
func (d *Delta) Encode() []byte {
	b := []byte{deltaVersion}
	b = binary.AppendUvarint(b, uint64(len(d.ops)))
	for _, o := range d.ops {
		b = append(b, byte(o.kind))
		b = appendString(b, o.group)
		b = binary.AppendVarint(b, o.start)
		b = binary.AppendUvarint(b, uint64(len(o.ranges)))
		for _, r := range o.ranges {
			b = appendRange(b, r)
		}
		b = appendLetters(b, o.letters)
		if o.stream == nil {
			b = append(b, 0)
		} else {
			b = append(b, 1)
			b = appendStream(b, *o.stream)
		}
	}
	return b
}

func appendRange(b []byte, r Range) []byte {
	b = binary.AppendVarint(b, r.First)
	b = binary.AppendUvarint(b, uint64(r.Last-r.First))
	b = append(b, byte(r.State))
	b = binary.AppendUvarint(b, uint64(uint16(r.Count)))
	b = appendString(b, r.Member)
	b = binary.AppendVarint(b, r.Deadline)
	b = binary.AppendVarint(b, r.FirstMs)
	return binary.AppendVarint(b, r.LastMs)
}

func appendLetters(b []byte, ls []DeadLetter) []byte {
	b = binary.AppendUvarint(b, uint64(len(ls)))
	for _, l := range ls {
		b = binary.AppendVarint(b, l.Ordinal)
		b = binary.AppendVarint(b, l.Offset)
		b = append(b, byte(l.Reason))
		b = binary.AppendUvarint(b, uint64(uint16(l.Count)))
		b = binary.AppendVarint(b, l.FirstMs)
		b = binary.AppendVarint(b, l.LastMs)
		b = appendString(b, l.Member)
	}
	return b
}

func appendStream(b []byte, st Stream) []byte {
	b = binary.AppendVarint(b, st.PID)
	b = binary.AppendVarint(b, int64(st.Epoch))
	b = binary.AppendVarint(b, st.Base)
	b = appendString(b, st.Topic)
	return binary.AppendVarint(b, int64(st.Partition))
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// ErrCorrupt is returned for a delta or snapshot that does not decode.
var ErrCorrupt = errors.New("sharepart: corrupt share state")

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = ErrCorrupt
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// count reads a length no larger than what remains could hold (each
// element takes at least min bytes), so corrupt input never allocates
// more than its own size.
func (r *reader) count(min int) int {
	n := r.uvarint()
	if n > uint64(len(r.b)/min) {
		r.fail()
		return 0
	}
	return int(n)
}

func (r *reader) string() string {
	n := r.count(1)
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) rangeOf(version byte) Range {
	var x Range
	x.First = r.varint()
	span := r.uvarint()
	x.State = RecordState(r.byte())
	x.Count = int16(uint16(r.uvarint()))
	x.Member = r.string()
	x.Deadline = r.varint()
	if version >= 2 {
		x.FirstMs = r.varint()
		x.LastMs = r.varint()
	}
	if r.err == nil && (span > maxSpan || x.First < 0 || !validState(x.State)) {
		r.fail()
	}
	x.Last = x.First + int64(span)
	return x
}

func (r *reader) letters() []DeadLetter {
	n := r.count(7)
	var out []DeadLetter
	for i := 0; i < n && r.err == nil; i++ {
		l := DeadLetter{Ordinal: r.varint(), Offset: r.varint(), Reason: Reason(r.byte()), Count: int16(uint16(r.uvarint())),
			FirstMs: r.varint(), LastMs: r.varint(), Member: r.string()}
		if r.err == nil && (l.Ordinal < 0 || l.Offset < 0 || !validReason(l.Reason)) {
			r.fail()
		}
		out = append(out, l)
	}
	return out
}

func (r *reader) stream() Stream {
	st := Stream{PID: r.varint(), Epoch: int16(r.varint()), Base: r.varint(), Topic: r.string(), Partition: int32(r.varint())}
	if r.err == nil && (st.Base < 0 || st.Partition < 0) {
		r.fail()
	}
	return st
}

// maxSpan bounds one range (and so what one delta can make a state hold):
// far above any record-lock limit (group.share.partition.max.record.locks
// is at most 10,000), far below what would exhaust memory.
const maxSpan = 1 << 20

// maxWindow bounds how far past Start a state reaches: a range beyond it
// is ignored (the leader never makes one; a corrupt delta cannot make a
// replica allocate without bound).
const maxWindow = 1 << 22

func validState(s RecordState) bool {
	return s == Available || s == Acquired || s == Acknowledged || s == Archived
}

// DecodeDelta parses a delta's replicated form.
func DecodeDelta(b []byte) (Delta, error) {
	r := &reader{b: b}
	v := r.byte()
	if v != deltaVersion1 && v != deltaVersion {
		return Delta{}, fmt.Errorf("%w: delta version", ErrCorrupt)
	}
	n := r.count(4)
	d := Delta{ops: make([]op, 0, n)}
	for i := 0; i < n && r.err == nil; i++ {
		var o op
		o.kind = opKind(r.byte())
		o.group = r.string()
		o.start = r.varint()
		nr := r.count(6)
		for j := 0; j < nr && r.err == nil; j++ {
			o.ranges = append(o.ranges, r.rangeOf(v))
		}
		last := opDelete
		if v >= 2 {
			last = opStream
			o.letters = r.letters()
			if r.byte() == 1 {
				st := r.stream()
				o.stream = &st
			}
		}
		if o.kind < opInit || o.kind > last {
			r.fail()
		}
		d.ops = append(d.ops, o)
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	if r.err != nil {
		return Delta{}, r.err
	}
	return d, nil
}

// ---- the registry: every group's state on one partition ----

// Registry is the share state of one partition: every share group's State
// on it. Every replica of the partition holds one, changed only by Apply
// in the partition's log order (the partition's Raft group applies the
// deltas its leader proposed), and carried whole in the group's snapshots.
// Safe for concurrent use.
type Registry struct {
	mu     sync.Mutex
	groups map[string]*State // protected by mu
	// version counts applied deltas, so a reader can tell a state moved.
	version uint64 // protected by mu
	// waiting is how many dead letters wait in all its groups (its share
	// of DeadLettersWaiting).
	waiting int64 // protected by mu
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{groups: map[string]*State{}} }

// Apply applies one replicated delta. A delta that does not decode
// changes nothing and returns ErrCorrupt.
func (r *Registry) Apply(b []byte) error {
	d, err := DecodeDelta(b)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applyLocked(&d)
	return nil
}

// ApplyDelta applies d (tests and the scripted state machine).
func (r *Registry) ApplyDelta(d *Delta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applyLocked(d)
}

func (r *Registry) applyLocked(d *Delta) {
	defer r.countWaitingLocked()
	r.version++
	for i := range d.ops {
		o := &d.ops[i]
		s := r.groups[o.group]
		switch o.kind {
		case opInit:
			if s == nil {
				r.groups[o.group] = &State{Start: max(o.start, 0)}
			}
		case opReset:
			n := &State{Start: max(o.start, 0)}
			if s != nil {
				// The dead letters stay: their ordinals never go back.
				n.Epoch, n.dlq = s.Epoch+1, s.dlq
			}
			r.groups[o.group] = n
		case opDelete:
			delete(r.groups, o.group)
		default:
			if s == nil {
				continue // deleted since the leader computed it
			}
			s.applyOp(o)
		}
	}
}

// applyOp applies an op that changes an existing state.
func (s *State) applyOp(o *op) {
	switch o.kind {
	case opSet:
		s.set(o.ranges, o.start)
	case opDead:
		s.dlq.add(o.letters)
	case opDeadDone:
		s.dlq.done(o.start)
	case opStream:
		if o.stream != nil {
			s.dlq.stream = *o.stream
		}
	}
}

func (s *State) set(ranges []Range, start int64) {
	for _, x := range ranges {
		if x.Last < s.Start || x.Last < x.First || x.Last-s.Start >= maxWindow {
			continue
		}
		first := max(x.First, s.Start)
		if end := s.End(); x.Last >= end {
			for off := end; off <= x.Last; off++ {
				s.recs = append(s.recs, rec{state: Archived})
			}
		}
		for off := first; off <= x.Last; off++ {
			r := &s.recs[off-s.Start]
			r.state, r.count = x.State, x.Count
			r.member, r.deadline, r.first, r.last = "", 0, 0, 0
			if x.State == Acquired {
				r.member, r.deadline = x.Member, x.Deadline
			}
			if x.State == Available {
				r.deadline = x.Deadline // not available before (delayed redelivery); 0 = at once
			}
			if x.State == Acquired || x.State == Available {
				r.first, r.last = x.FirstMs, x.LastMs
			}
		}
	}
	if start > s.Start {
		if start >= s.End() {
			s.recs = s.recs[:0]
		} else {
			s.recs = append(s.recs[:0], s.recs[start-s.Start:]...)
		}
		s.Start = start
	}
	s.advance()
}

// Group returns a copy of group's state (nil when it has none) and the
// registry's version.
func (r *Registry) Group(group string) (*State, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.groups[group]
	if s == nil {
		return nil, r.version
	}
	return s.clone(), r.version
}

// Groups returns the names of the groups with state here, sorted.
func (r *Registry) Groups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.groups))
	for g := range r.groups {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// Snapshot versions: 1 (no delivery times, no dead letters), 2. Both
// are restored.
const (
	snapshotVersion1 = 1
	snapshotVersion  = 2
)

// Snapshot returns the registry's whole state, compacted: runs of records
// with the same state, count, holder and deadline are one range.
func (r *Registry) Snapshot() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.groups))
	for g := range r.groups {
		names = append(names, g)
	}
	sort.Strings(names)
	b := []byte{snapshotVersion}
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, g := range names {
		s := r.groups[g]
		b = appendString(b, g)
		b = binary.AppendVarint(b, s.Start)
		b = binary.AppendVarint(b, int64(s.Epoch))
		runs := s.runs()
		b = binary.AppendUvarint(b, uint64(len(runs)))
		for _, x := range runs {
			b = appendRange(b, x)
		}
		b = binary.AppendVarint(b, s.dlq.next)
		b = appendStream(b, s.dlq.stream)
		b = appendLetters(b, s.dlq.dead)
	}
	return b
}

// runs returns s's records as maximal ranges of equal records.
func (s *State) runs() []Range {
	var out []Range
	for i, x := range s.recs {
		off := s.Start + int64(i)
		if n := len(out); n > 0 {
			l := &out[n-1]
			if l.Last == off-1 && l.State == x.state && l.Count == x.count && l.Member == x.member && l.Deadline == x.deadline &&
				l.FirstMs == x.first && l.LastMs == x.last {
				l.Last = off
				continue
			}
		}
		out = append(out, Range{First: off, Last: off, State: x.state, Count: x.count, Member: x.member, Deadline: x.deadline, FirstMs: x.first, LastMs: x.last})
	}
	return out
}

// Restore replaces the registry's state with a snapshot's (nil or empty:
// no state). A snapshot that does not decode changes nothing.
func (r *Registry) Restore(b []byte) error {
	groups := map[string]*State{}
	if len(b) > 0 {
		rd := &reader{b: b}
		v := rd.byte()
		if v != snapshotVersion1 && v != snapshotVersion {
			return fmt.Errorf("%w: snapshot version", ErrCorrupt)
		}
		n := rd.count(3)
		for i := 0; i < n && rd.err == nil; i++ {
			g := rd.string()
			s := &State{Start: rd.varint(), Epoch: int32(rd.varint())}
			nr := rd.count(6)
			ranges := make([]Range, 0, nr)
			for j := 0; j < nr && rd.err == nil; j++ {
				ranges = append(ranges, rd.rangeOf(v))
			}
			if v >= 2 {
				s.dlq.next = rd.varint()
				s.dlq.stream = rd.stream()
				ls := rd.letters()
				if rd.err == nil && (s.dlq.next < 0 || len(ls) > MaxDeadLetters) {
					rd.fail()
				}
				if rd.err == nil && len(ls) > 0 {
					// Waiting letters end at next-1, consecutive.
					q := dlqState{next: ls[0].Ordinal, stream: s.dlq.stream}
					q.add(ls)
					if q.next != s.dlq.next || len(q.dead) != len(ls) {
						rd.fail()
					}
					s.dlq = q
				}
			}
			if rd.err == nil && s.Start < 0 {
				rd.fail()
			}
			s.set(ranges, -1)
			groups[g] = s
		}
		if rd.err == nil && len(rd.b) != 0 {
			rd.fail()
		}
		if rd.err != nil {
			return rd.err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups = groups
	r.version++
	r.countWaitingLocked()
	return nil
}
