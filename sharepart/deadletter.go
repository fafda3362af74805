package sharepart

import (
	"fmt"
	"sync/atomic"
)

// Dead letters (KIP-1191, and Strata's reasons beside it): a record that
// a member rejects, or that reaches the delivery count limit, is archived
// and, when the group has a dead-letter topic, recorded as a dead letter
// in the share partition's replicated state in the same delta. Each dead
// letter gets the next ordinal of its share partition (0, 1, 2, ...:
// consecutive, unlike the offsets it names); the leader writes the
// waiting letters to the dead-letter topic as an idempotent producer
// whose sequence is the ordinal (minus the Stream's Base), and only once
// that write is committed records them done (DeadDone). A leader that
// dies between the write and DeadDone leaves the letters waiting; the
// next leader writes them again with the same producer ID and sequences,
// and the dead-letter partition's producer state drops the duplicate.

// Reason says why a record was dead-lettered (the strata.dlq.reason
// header).
type Reason uint8

const (
	// ReasonMaxDeliveries: the record reached the delivery count limit
	// (share.delivery.count.limit).
	ReasonMaxDeliveries Reason = 1
	// ReasonRejected: a member acknowledged it with REJECT.
	ReasonRejected Reason = 2
	// ReasonTTLExpired: never delivered, older than the group's
	// time-to-live (strata.share.record.ttl.ms).
	ReasonTTLExpired Reason = 3
	// ReasonTopicDeleted: in flight (acquired, or available again) when
	// its topic was deleted (Drain).
	ReasonTopicDeleted Reason = 4
)

// String is the reason as the strata.dlq.reason header carries it.
func (r Reason) String() string {
	switch r {
	case ReasonMaxDeliveries:
		return "max-deliveries"
	case ReasonRejected:
		return "rejected"
	case ReasonTTLExpired:
		return "ttl-expired"
	case ReasonTopicDeleted:
		return "topic-deleted"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Message is Kafka's __dlq.errors.message for the reason.
func (r Reason) Message() string {
	switch r {
	case ReasonMaxDeliveries:
		return "Offset delivery count exceeded the threshold."
	case ReasonRejected:
		return "Offset rejected by client."
	case ReasonTTLExpired:
		return "Record time-to-live expired before delivery."
	case ReasonTopicDeleted:
		return "Source topic deleted while the record was in flight."
	}
	return r.String()
}

func validReason(r Reason) bool {
	return r == ReasonMaxDeliveries || r == ReasonRejected || r == ReasonTTLExpired || r == ReasonTopicDeleted
}

// DeadLetter is one record waiting to be written to the dead-letter topic.
type DeadLetter struct {
	// Ordinal is the letter's place among its share partition's dead
	// letters: consecutive from 0, never reused.
	Ordinal int64
	Offset  int64
	Reason  Reason
	// Count is the record's delivery count when it was dead-lettered.
	Count int16
	// FirstMs and LastMs are its first and last delivery (acquisition)
	// times, unix ms (0: never delivered).
	FirstMs, LastMs int64
	// Member is the last member that held it ("" when none is known).
	Member string
}

// Stream is the idempotent producer a share partition writes its dead
// letters with: the letter of ordinal o is written with sequence o-Base
// to Topic's partition Partition. A new stream (a new producer ID) starts
// when the target changes (another topic, another partition count) or
// the target lost the producer's state.
type Stream struct {
	PID       int64 // 0: none yet
	Epoch     int16
	Base      int64
	Topic     string
	Partition int32
}

// Sequence is the producer sequence of the letter of ordinal o.
func (st Stream) Sequence(o int64) int32 { return int32(o - st.Base) }

// MaxDeadLetters bounds the dead letters one share partition keeps
// waiting (the dead-letter topic unwritable for long): past it, records
// are archived without a dead letter and counted (Stats.DeadDropped), so
// a long outage cannot grow the replicated state without bound.
const MaxDeadLetters = 10000

// dlqState is a share partition's dead letters.
type dlqState struct {
	next   int64        // the ordinal of the next dead letter
	dead   []DeadLetter // waiting: ordinals consecutive, ending at next-1
	stream Stream
}

func (q *dlqState) clone() dlqState {
	c := *q
	c.dead = append([]DeadLetter(nil), q.dead...)
	return c
}

// add appends letters that continue the ordinals; any other is ignored
// (applying the same delta twice, or a stale one, changes nothing).
func (q *dlqState) add(letters []DeadLetter) {
	for _, l := range letters {
		if l.Ordinal != q.next || len(q.dead) >= MaxDeadLetters {
			continue
		}
		q.dead = append(q.dead, l)
		q.next++
	}
}

// done forgets the letters below ordinal upTo (written).
func (q *dlqState) done(upTo int64) {
	n := 0
	for n < len(q.dead) && q.dead[n].Ordinal < upTo {
		n++
	}
	if n > 0 {
		q.dead = append(q.dead[:0], q.dead[n:]...)
	}
}

// DeadLetters returns the letters waiting to be written, in ordinal order.
func (s *State) DeadLetters() []DeadLetter { return append([]DeadLetter(nil), s.dlq.dead...) }

// NextOrdinal is the ordinal the next dead letter will get: how many the
// share partition has recorded in all.
func (s *State) NextOrdinal() int64 { return s.dlq.next }

// Stream returns the share partition's dead-letter producer.
func (s *State) Stream() Stream { return s.dlq.stream }

// Dead records dead letters for group (their ordinals set by the leader).
func (d *Delta) Dead(group string, letters ...DeadLetter) {
	if len(letters) == 0 {
		return
	}
	d.ops = append(d.ops, op{kind: opDead, group: group, letters: letters})
}

// DeadDone records group's dead letters below ordinal upTo as written.
func (d *Delta) DeadDone(group string, upTo int64) {
	d.ops = append(d.ops, op{kind: opDeadDone, group: group, start: upTo})
}

// SetStream sets group's dead-letter producer.
func (d *Delta) SetStream(group string, st Stream) {
	d.ops = append(d.ops, op{kind: opStream, group: group, stream: &st})
}

// letters collects one decision's dead letters, ordinals after s's.
type letters struct {
	s       *State
	on      bool
	out     []DeadLetter
	dropped int
}

func (l *letters) add(off int64, r rec, reason Reason, member string) {
	if !l.on {
		return
	}
	if len(l.s.dlq.dead)+len(l.out) >= MaxDeadLetters {
		l.dropped++
		return
	}
	if member == "" {
		member = r.member
	}
	l.out = append(l.out, DeadLetter{Ordinal: l.s.dlq.next + int64(len(l.out)), Offset: off, Reason: reason,
		Count: r.count, FirstMs: r.first, LastMs: r.last, Member: member})
}

// into adds the letters to d and their counts to st.
func (l *letters) into(d *Delta, group string, st *Stats) {
	d.Dead(group, l.out...)
	st.DeadLettered += len(l.out)
	st.DeadDropped += l.dropped
}

// DeadWaiting returns, for each group with dead letters waiting to be
// written, how many wait (nil when none): cheap, no state is copied.
func (r *Registry) DeadWaiting() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out map[string]int
	for g, s := range r.groups {
		if n := len(s.dlq.dead); n > 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[g] = n
		}
	}
	return out
}

// deadWaiting is DeadLettersWaiting.
var deadWaiting atomic.Int64

// DeadLettersWaiting is how many dead letters wait in the registries of
// this process, leaders' and followers' alike (a registry replaced by a
// snapshot install may still count until it is changed): zero means no
// share partition here has anything to write, so the writer need not
// look.
func DeadLettersWaiting() int64 { return deadWaiting.Load() }

// countWaitingLocked recounts r's waiting letters into deadWaiting.
func (r *Registry) countWaitingLocked() {
	var n int64
	for _, s := range r.groups {
		n += int64(len(s.dlq.dead))
	}
	if n != r.waiting {
		deadWaiting.Add(n - r.waiting)
		r.waiting = n
	}
}
