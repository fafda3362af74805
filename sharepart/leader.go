package sharepart

import (
	"errors"
	"sort"
)

// The leader's decisions: each reads a State (never changes it) and
// returns the Delta that carries it out once applied. The caller holds the
// share partition's lock from the decision until the delta is applied, so
// no two decisions see the same state.

// Config is the share group's settings that decisions use (Kafka's
// share.record.lock.duration.ms, share.delivery.count.limit,
// share.partition.max.record.locks).
type Config struct {
	LockMs        int64
	DeliveryLimit int16
	MaxLocks      int
	// DeadLetters: the group has a dead-letter topic (KIP-1191): records
	// rejected or archived at the delivery count limit become dead
	// letters (deadletter.go).
	DeadLetters bool
	// Paused: the group is paused (the dead-letter flood guard):
	// acquisition delivers nothing.
	Paused bool
	// Delayed redelivery (Strata's strata.share.redelivery.backoff.*):
	// a record released, or whose lock lapsed, is available again only
	// BackoffInitialMs * BackoffMultiplier^(count-1) later (count: its
	// delivery count), at most BackoffMaxMs. BackoffInitialMs 0 = at once
	// (Kafka's behaviour).
	BackoffInitialMs  int64
	BackoffMaxMs      int64
	BackoffMultiplier float64
	// BackoffJitter (strata.share.redelivery.backoff.jitter, 0-1): a
	// delay d becomes one in (d*(1-BackoffJitter), d], drawn per record
	// and delivery (BackoffAt).
	BackoffJitter float64
	// TTLMs (strata.share.record.ttl.ms; 0 = none): a batch never
	// delivered whose newest timestamp is older than this is archived
	// (dead-lettered with ReasonTTLExpired) instead of delivered.
	TTLMs int64
}

// Backoff is how long a record delivered count times waits before it is
// available again (0: at once).
func (c Config) Backoff(count int16) int64 {
	if c.BackoffInitialMs <= 0 {
		return 0
	}
	d := float64(c.BackoffInitialMs)
	for i := int16(1); i < count && d < float64(c.BackoffMaxMs); i++ {
		d *= max(c.BackoffMultiplier, 1)
	}
	if c.BackoffMaxMs > 0 && d > float64(c.BackoffMaxMs) {
		return c.BackoffMaxMs
	}
	return int64(d)
}

// BackoffAt is Backoff with the jitter applied for the record at off
// delivered count times. The draw is a hash of the two, not a random
// number: every decision about the same record and delivery (a lapsed
// lock is looked at by each acquisition until it is swept) sees the same
// delay, and scripts can state it.
func (c Config) BackoffAt(count int16, off int64) int64 {
	d := c.Backoff(count)
	if d == 0 || c.BackoffJitter <= 0 {
		return d
	}
	x := uint64(off)*0x9e3779b97f4a7c15 ^ uint64(uint16(count))<<48 // splitmix64 of (off, count)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	u := float64(x>>11) / (1 << 53) // [0, 1)
	return max(d-int64(float64(d)*min(c.BackoffJitter, 1)*u), 1)
}

// Acknowledgement types, as on the wire (ShareFetch, ShareAcknowledge).
const (
	AckGap     int8 = 0
	AckAccept  int8 = 1
	AckRelease int8 = 2
	AckReject  int8 = 3
	AckRenew   int8 = 4 // KIP-1222
)

var (
	// ErrInvalidRecordState: an acknowledgement names a record that is
	// not acquired by that member under a live lock (Kafka's
	// INVALID_RECORD_STATE).
	ErrInvalidRecordState = errors.New("sharepart: record is not acquired by this member")
	// ErrInvalidAck: a malformed acknowledgement batch (INVALID_REQUEST).
	ErrInvalidAck = errors.New("sharepart: invalid acknowledgement batch")
)

// Batch is one stored batch of the log as acquisition sees it.
type Batch struct {
	First, Last int64
	// Skip: a control batch, or an aborted transaction's batch read
	// read_committed: never delivered, archived as it is passed.
	Skip bool
	// MaxTs is the batch's newest record timestamp (unix ms; 0 = unknown).
	MaxTs int64
	// Size is the stored batch's size in bytes (0 = unknown).
	Size int64
	// Records are the batch's records that carry Strata's own times in
	// their headers (strata.ttl.ms, strata.deliver.after.ms), in offset
	// order; nil when none does (or nobody looked).
	Records []RecordTimes
	// Unread: the records' own times were wanted but not read (the batch
	// lay past the record-lock window when they were): acquisition stops
	// before it.
	Unread bool
}

// RecordTimes is one record's own times, from its headers.
type RecordTimes struct {
	Offset int64
	// TsMs is the record's timestamp (unix ms).
	TsMs int64
	// TTLMs is its strata.ttl.ms (overriding the group's TTL; 0 = no
	// limit), -1 when it has none.
	TTLMs int64
	// AfterMs is its strata.deliver.after.ms (unix ms): not delivered
	// before; 0 = none.
	AfterMs int64
}

// MaxDeferred bounds how far past share.partition.max.record.locks a
// share partition's state reaches while records held back by their
// strata.deliver.after.ms hold its start offset (windowEnd): one long
// delay cannot stall the partition, and the state stays bounded.
const MaxDeferred = 100_000

// AcquiredRange is a range of offsets acquired with one delivery count, as a
// ShareFetch response's AcquiredRecords lists them.
type AcquiredRange struct {
	First, Last int64
	Count       int16
}

// Stats counts what one decision did, for metrics.
type Stats struct {
	Acquired    int // records acquired (first deliveries and redeliveries)
	Redelivered int // of which redeliveries
	Accepted    int
	Released    int
	Rejected    int
	Renewed     int
	Gaps        int
	Expired     int // locks that lapsed (Expire)
	// Delayed: records released, or whose lock lapsed, that wait for
	// their redelivery backoff (strata.share.redelivery.backoff.*).
	Delayed int
	// Hurried: waiting records delivered before their backoff ended
	// because the record-lock window was full (Acquire).
	Hurried int
	// TTLExpired: records archived undelivered, older than the TTL.
	TTLExpired int
	// Deferred: records first seen with a strata.deliver.after.ms in the
	// future, held back until then.
	Deferred int
	// Archived by cause: the delivery count limit, or skipped (control
	// batches, aborted transactions, records below the log start).
	ArchivedLimit int
	ArchivedSkip  int
	// Dead letters recorded, and records archived without one because
	// MaxDeadLetters were already waiting.
	DeadLettered int
	DeadDropped  int
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Acquired += o.Acquired
	s.Redelivered += o.Redelivered
	s.Accepted += o.Accepted
	s.Released += o.Released
	s.Rejected += o.Rejected
	s.Renewed += o.Renewed
	s.Gaps += o.Gaps
	s.Expired += o.Expired
	s.Delayed += o.Delayed
	s.Hurried += o.Hurried
	s.TTLExpired += o.TTLExpired
	s.Deferred += o.Deferred
	s.ArchivedLimit += o.ArchivedLimit
	s.ArchivedSkip += o.ArchivedSkip
	s.DeadLettered += o.DeadLettered
	s.DeadDropped += o.DeadDropped
}

// AcquireParams is one acquisition round's request.
type AcquireParams struct {
	Member string
	// Max is how many records to acquire at most (ShareFetch MaxRecords);
	// Strict (record-limit acquire mode, KIP-1206) cuts a batch to honour
	// it exactly, otherwise whole batches are acquired while fewer than
	// Max are (batch-optimized mode).
	Max    int
	Strict bool
	// LogStart is the partition's log start: records below it are gone.
	LogStart int64
	NowMs    int64
}

// NeedFrom is where acquisition needs the log's batches from: the end
// offset (every record below it has a state already).
func NeedFrom(s *State) int64 { return s.End() }

// Acquire acquires for p.Member, first the in-flight records that are
// available again (released, or whose lock expired), in offset order,
// then new records from batches (the log's batches from NeedFrom up to the
// high watermark, or the last stable offset read_committed), within the
// record-lock window (cfg.MaxLocks past Start). A record whose delivery
// count has reached the limit is archived instead.
func Acquire(s *State, group string, cfg Config, p AcquireParams, batches []Batch) (Delta, []AcquiredRange, Stats) {
	var d Delta
	if cfg.Paused {
		return d, nil, Stats{}
	}
	var st Stats
	var ranges []Range
	var out []AcquiredRange
	n := 0
	deadline := p.NowMs + cfg.LockMs
	dead := letters{s: s, on: cfg.DeadLetters}
	take := func(first, last int64, count int16, firstMs int64) {
		ranges = appendRange1(ranges, Range{First: first, Last: last, State: Acquired, Count: count, Member: p.Member, Deadline: deadline, FirstMs: firstMs, LastMs: p.NowMs})
		if k := len(out); k > 0 && out[k-1].Last == first-1 && out[k-1].Count == count {
			out[k-1].Last = last
		} else {
			out = append(out, AcquiredRange{First: first, Last: last, Count: count})
		}
		c := int(last - first + 1)
		n += c
		st.Acquired += c
		if count > 1 {
			st.Redelivered += c
		}
	}
	// expire archives a record never delivered, older than its TTL.
	expire := func(off int64) {
		ranges = appendRange1(ranges, Range{First: off, Last: off, State: Archived})
		st.TTLExpired++
		dead.add(off, rec{}, ReasonTTLExpired, "")
	}
	start := int64(-1)
	if p.LogStart > s.Start {
		start = p.LogStart // gone from the log: never delivered again
		st.ArchivedSkip += int(min(p.LogStart, s.End()) - s.Start)
	}
	from := max(s.Start, p.LogStart)
	var waiting []int64 // records passed over for their backoff, in offset order
	for off := from; off < s.End() && n < p.Max; off++ {
		r := s.recs[off-s.Start]
		if r.state != Available && (r.state != Acquired || r.deadline > p.NowMs) {
			continue
		}
		// A record held back by its strata.deliver.after.ms (never
		// delivered: count 0) whose time-to-live ended (last) is
		// dead-lettered instead.
		if r.state == Available && r.count == 0 && r.last > 0 && r.last <= p.NowMs {
			expire(off)
			continue
		}
		// Delayed redelivery: a released record's not-before time, or a
		// lapsed lock's deadline plus the backoff. A deferred record
		// (count 0) is never hurried.
		if r.state == Available && r.deadline > p.NowMs {
			if r.count > 0 {
				waiting = append(waiting, off)
			}
			continue
		}
		if r.state == Acquired && r.count < cfg.DeliveryLimit && r.deadline+cfg.BackoffAt(r.count, off) > p.NowMs {
			waiting = append(waiting, off)
			continue
		}
		if r.count >= cfg.DeliveryLimit {
			ranges = append(ranges, Range{First: off, Last: off, State: Archived, Count: r.count})
			st.ArchivedLimit++
			dead.add(off, r, ReasonMaxDeliveries, "")
			continue
		}
		firstMs := r.first
		if r.count == 0 || firstMs == 0 {
			firstMs = p.NowMs
		}
		take(off, off, r.count+1, firstMs)
	}
	window := windowEnd(s, cfg.MaxLocks, p.LogStart, p.NowMs) // first offset past the window
	farthest := max(s.Start, p.LogStart) + int64(cfg.MaxLocks) + MaxDeferred
	next := max(s.End(), p.LogStart)
	for _, b := range batches {
		if n >= p.Max || next >= window {
			break
		}
		if b.Last < next {
			continue
		}
		if b.Unread && !b.Skip {
			break
		}
		first := max(b.First, next)
		last := min(b.Last, window-1)
		if b.Skip {
			ranges = append(ranges, Range{First: first, Last: last, State: Archived})
			st.ArchivedSkip += int(last - first + 1)
			next = last + 1
			continue
		}
		batchExpired := cfg.TTLMs > 0 && b.MaxTs > 0 && b.MaxTs+cfg.TTLMs <= p.NowMs
		if len(b.Records) > 0 {
			// Some records carry their own times: record by record.
			ri, off := 0, first
			for ; off <= b.Last && off < window && !(p.Strict && n >= p.Max); off++ {
				for ri < len(b.Records) && b.Records[ri].Offset < off {
					ri++
				}
				if ri == len(b.Records) || b.Records[ri].Offset != off {
					if batchExpired {
						expire(off)
					} else {
						take(off, off, 1, p.NowMs)
					}
					continue
				}
				rt := b.Records[ri]
				ttl := cfg.TTLMs
				if rt.TTLMs >= 0 {
					ttl = rt.TTLMs
				}
				expiry := int64(0)
				if ttl > 0 {
					expiry = rt.TsMs + ttl
				}
				switch {
				case expiry > 0 && expiry <= max(p.NowMs, rt.AfterMs):
					// Expired, or would be before it may be delivered.
					expire(off)
				case rt.AfterMs > p.NowMs:
					// Invisible until AfterMs; its expiry rides along.
					ranges = appendRange1(ranges, Range{First: off, Last: off, State: Available, Deadline: rt.AfterMs, LastMs: expiry})
					st.Deferred++
					if window < farthest {
						window++ // a deferred record takes no lock
					}
				default:
					take(off, off, 1, p.NowMs)
				}
			}
			next = off
			continue
		}
		if batchExpired {
			// Expired before its first delivery: every record of the
			// batch is older than the TTL.
			ranges = append(ranges, Range{First: first, Last: last, State: Archived})
			st.TTLExpired += int(last - first + 1)
			for off := first; off <= last; off++ {
				dead.add(off, rec{}, ReasonTTLExpired, "")
			}
			next = last + 1
			continue
		}
		if p.Strict {
			last = min(last, first+int64(p.Max-n)-1)
		}
		take(first, last, 1, p.NowMs)
		next = last + 1
	}
	// A backoff never stalls the partition: a waiting record holds the
	// start offset, so with the record-lock window full (records past it
	// wait in the log) nothing else could be delivered until its time;
	// then the oldest waiting records are delivered now instead.
	if n < p.Max && len(waiting) > 0 && blockedBy(batches, window) {
		for _, off := range waiting {
			if n >= p.Max {
				break
			}
			r := s.recs[off-s.Start]
			firstMs := r.first
			if firstMs == 0 {
				firstMs = p.NowMs
			}
			take(off, off, r.count+1, firstMs)
			st.Hurried++
		}
		sort.Slice(out, func(i, j int) bool { return out[i].First < out[j].First })
	}
	if len(ranges) > 0 || start >= 0 {
		d.Set(group, start, ranges...)
	}
	dead.into(&d, group, &st)
	return d, out, st
}

// Deferred counts the records of s held back by their
// strata.deliver.after.ms at now (never delivered, not visible yet).
func Deferred(s *State, nowMs int64) int {
	n := 0
	for i := range s.recs {
		if r := &s.recs[i]; r.state == Available && r.count == 0 && r.deadline > nowMs {
			n++
		}
	}
	return n
}

// WindowEnd is the first offset past s's record-lock window at now
// (windowEnd): acquisition delivers no new record at or past it.
func WindowEnd(s *State, cfg Config, logStart, nowMs int64) int64 {
	return windowEnd(s, cfg.MaxLocks, logStart, nowMs)
}

// windowEnd is the first offset past s's record-lock window. Kafka's:
// share.partition.max.record.locks offsets past the start offset. While
// records deferred by strata.deliver.after.ms hold the start offset, the
// limit counts records in flight instead (acquired, or available and
// visible), so records after a deferred one -- delivered, acknowledged --
// never stall the partition; the state then reaches at most MaxDeferred
// offsets further.
func windowEnd(s *State, maxLocks int, logStart, nowMs int64) int64 {
	base := max(s.Start, logStart)
	kafka := base + int64(maxLocks)
	deferred, live := 0, 0
	for i := range s.recs {
		r := &s.recs[i]
		switch {
		case r.state == Available && r.count == 0 && r.deadline > nowMs:
			deferred++
		case r.state == Acquired || r.state == Available:
			live++
		}
	}
	if deferred == 0 {
		return kafka
	}
	return max(kafka, min(kafka+MaxDeferred, max(s.End(), logStart)+int64(maxLocks-live)))
}

// blockedBy reports whether records wait in the log at or past window
// (the first offset past the record-lock window).
func blockedBy(batches []Batch, window int64) bool {
	for _, b := range batches {
		if b.Last >= window {
			return true
		}
	}
	return false
}

// AckBatch is one acknowledgement batch: Types has one type for every
// offset of [First, Last], or one for all of them.
type AckBatch struct {
	First, Last int64
	Types       []int8
}

// Ack applies member's acknowledgements, all or none: every offset named
// must be acquired by member under a live lock (ErrInvalidRecordState) and
// every batch well formed (ErrInvalidAck). Renew (allowed only when
// renew is true) extends the lock by cfg.LockMs from now.
func Ack(s *State, group, member string, cfg Config, batches []AckBatch, renew bool, nowMs int64) (Delta, Stats, error) {
	var d Delta
	var st Stats
	var ranges []Range
	dead := letters{s: s, on: cfg.DeadLetters}
	for _, b := range batches {
		span := b.Last - b.First + 1
		if b.First < 0 || span <= 0 || span > maxSpan || (len(b.Types) != 1 && int64(len(b.Types)) != span) {
			return Delta{}, Stats{}, ErrInvalidAck
		}
		for _, t := range b.Types {
			if t < AckGap || t > AckRenew || (t == AckRenew && !renew) {
				return Delta{}, Stats{}, ErrInvalidAck
			}
		}
		for off := b.First; off <= b.Last; off++ {
			if off < s.Start || off >= s.End() {
				return Delta{}, Stats{}, ErrInvalidRecordState
			}
			r := s.recs[off-s.Start]
			if r.state != Acquired || r.member != member || r.deadline <= nowMs {
				return Delta{}, Stats{}, ErrInvalidRecordState
			}
			t := b.Types[0]
			if len(b.Types) > 1 {
				t = b.Types[off-b.First]
			}
			x := Range{First: off, Last: off, Count: r.count, FirstMs: r.first, LastMs: r.last}
			switch t {
			case AckGap:
				x.State = Archived
				st.Gaps++
			case AckAccept:
				x.State = Acknowledged
				st.Accepted++
			case AckRelease:
				x.State = Available
				x.Deadline = notBefore(cfg, off, r.count, nowMs)
				st.Released++
				if r.count >= cfg.DeliveryLimit {
					x.State, x.Deadline = Archived, 0
					st.ArchivedLimit++
					dead.add(off, r, ReasonMaxDeliveries, member)
				} else if x.Deadline > 0 {
					st.Delayed++
				}
			case AckReject:
				x.State = Archived
				st.Rejected++
				dead.add(off, r, ReasonRejected, member)
			case AckRenew:
				x.State, x.Member, x.Deadline = Acquired, member, nowMs+cfg.LockMs
				st.Renewed++
			}
			ranges = appendRange1(ranges, x)
		}
	}
	d.Set(group, -1, ranges...)
	dead.into(&d, group, &st)
	return d, st, nil
}

// notBefore is when the record at off, delivered count times and released (or
// whose lock lapsed) at fromMs is available again: 0 (at once) without a
// backoff. Release passes 0 for fromMs: a member that left gives its
// records back at once.
func notBefore(cfg Config, off int64, count int16, fromMs int64) int64 {
	b := cfg.BackoffAt(count, off)
	if b == 0 || fromMs <= 0 {
		return 0
	}
	return fromMs + b
}

// appendRange1 appends a one-offset range, merging it into the previous
// range when it continues it with the same values.
func appendRange1(ranges []Range, x Range) []Range {
	if k := len(ranges); k > 0 {
		l := &ranges[k-1]
		if l.Last == x.First-1 && l.State == x.State && l.Count == x.Count && l.Member == x.Member && l.Deadline == x.Deadline &&
			l.FirstMs == x.FirstMs && l.LastMs == x.LastMs {
			l.Last = x.Last
			return ranges
		}
	}
	return append(ranges, x)
}

// Release makes every record member holds available again (the member's
// share session closed or it left the group); a record at the delivery
// count limit is archived instead. The delivery count stays: the record
// was delivered.
func Release(s *State, group, member string, cfg Config) (Delta, Stats) {
	var d Delta
	var st Stats
	var ranges []Range
	dead := letters{s: s, on: cfg.DeadLetters}
	for i, r := range s.recs {
		if r.state != Acquired || r.member != member {
			continue
		}
		off := s.Start + int64(i)
		x := Range{First: off, Last: off, State: Available, Count: r.count, FirstMs: r.first, LastMs: r.last, Deadline: notBefore(cfg, off, r.count, 0)}
		st.Released++
		if r.count >= cfg.DeliveryLimit {
			x.State = Archived
			st.ArchivedLimit++
			dead.add(off, r, ReasonMaxDeliveries, "")
		}
		ranges = appendRange1(ranges, x)
	}
	d.Set(group, -1, ranges...)
	dead.into(&d, group, &st)
	return d, st
}

// Expire ends the locks that lapsed by now: their records become
// available again, or archived at the delivery count limit. Acquisition
// treats a lapsed lock as ended anyway; Expire makes it visible (metrics,
// DescribeShareGroupOffsets) and archives poison records without waiting
// for the next fetch.
func Expire(s *State, group string, cfg Config, nowMs int64) (Delta, Stats, int64) {
	var d Delta
	var st Stats
	var ranges []Range
	dead := letters{s: s, on: cfg.DeadLetters}
	next := int64(0) // the earliest live deadline, 0 = none
	for i, r := range s.recs {
		if r.state != Acquired {
			continue
		}
		if r.deadline > nowMs {
			if next == 0 || r.deadline < next {
				next = r.deadline
			}
			continue
		}
		off := s.Start + int64(i)
		x := Range{First: off, Last: off, State: Available, Count: r.count, FirstMs: r.first, LastMs: r.last, Deadline: notBefore(cfg, off, r.count, r.deadline)}
		st.Expired++
		if r.count >= cfg.DeliveryLimit {
			x.State, x.Deadline = Archived, 0
			st.ArchivedLimit++
			dead.add(off, r, ReasonMaxDeliveries, "")
		} else if x.Deadline > nowMs {
			st.Delayed++
		}
		ranges = appendRange1(ranges, x)
	}
	d.Set(group, -1, ranges...)
	dead.into(&d, group, &st)
	return d, st, next
}

// Lag is the number of records of the partition not yet done for the
// group: everything from Start to the high watermark hw that is not
// acknowledged or archived (Kafka's share-group lag, KIP-1226, counts the
// same).
func Lag(s *State, hw int64) int64 {
	if s == nil {
		return 0
	}
	lag := max(hw-s.Start, 0)
	for _, r := range s.recs {
		if r.state == Acknowledged || r.state == Archived {
			lag--
		}
	}
	return max(lag, 0)
}

// OldestUnacked returns the offset of the first record at or above Start
// that is not done, or -1.
func OldestUnacked(s *State, hw int64) int64 {
	if s == nil {
		return -1
	}
	for i, r := range s.recs {
		if r.state != Acknowledged && r.state != Archived {
			return s.Start + int64(i)
		}
	}
	if s.End() < hw {
		return s.End()
	}
	return -1
}

// Drain archives every record of s in flight -- acquired (under a live
// lock or not), or available again (released, lapsed, backed off or
// deferred) -- with a dead letter each (ReasonTopicDeleted, when the
// group has a dead-letter topic): the partition's topic is being
// deleted. Records never acquired are not dead-lettered.
func Drain(s *State, group string, cfg Config) (Delta, Stats) {
	var d Delta
	var st Stats
	var ranges []Range
	dead := letters{s: s, on: cfg.DeadLetters}
	for i, r := range s.recs {
		if r.state != Acquired && r.state != Available {
			continue
		}
		off := s.Start + int64(i)
		ranges = appendRange1(ranges, Range{First: off, Last: off, State: Archived, Count: r.count})
		if r.count == 0 {
			r.first, r.last = 0, 0 // deferred: never delivered (last is its TTL's end)
		}
		dead.add(off, r, ReasonTopicDeleted, "")
	}
	d.Set(group, -1, ranges...)
	dead.into(&d, group, &st)
	return d, st
}
