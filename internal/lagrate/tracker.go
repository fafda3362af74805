package lagrate

import (
	"sync"
	"time"
)

// Key names one consumer (a group) on one partition.
type Key struct {
	Group     string
	Topic     string
	Partition int32
}

// Tracker keeps a Window and a cached oldest-record timestamp per Key,
// fed by a metrics collector at each scrape. Its cost is bounded: one
// Window of at most MaxSamples per key the collector reports (which the
// collectors' series limits bound), keys not observed for
// max(2*span, 10 min) are dropped, and at most ReadBudget timestamp reads
// happen per scrape (a key whose position moved past the budget keeps its
// previous timestamp until a later scrape, so its age reads high for a
// while, never low).
type Tracker struct {
	span       time.Duration
	readBudget int

	mu      sync.Mutex // one scrape at a time
	entries map[Key]*entry
}

type entry struct {
	w        *Window
	seen     int64 // unix ns of the last observation
	tsOffset int64 // the offset ts belongs to; -1: none
	ts       int64 // its batch's first timestamp, ms
}

// DefaultReadBudget bounds the timestamp reads of one scrape.
const DefaultReadBudget = 2000

// NewTracker returns a tracker over windows of span.
func NewTracker(span time.Duration) *Tracker {
	return &Tracker{span: span, readBudget: DefaultReadBudget, entries: map[Key]*entry{}}
}

// Span is the tracker's window.
func (t *Tracker) Span() time.Duration { return t.span }

// Len is the number of keys tracked.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// Point is what one observation gives a collector.
type Point struct {
	Lag     int64
	Rates   Rates
	RatesOK bool
	// Drain is DrainSeconds(Lag, Rates.Growth); meaningful when RatesOK.
	Drain float64
	// OldestAge is the age in seconds, by its timestamp, of the record at
	// the consumer's position (0 with no backlog); AgeOK is false when
	// that timestamp could not be read.
	OldestAge float64
	AgeOK     bool
}

// Scrape is one scrape's access to a tracker; End must be called.
type Scrape struct {
	t      *Tracker
	now    time.Time
	budget int
}

// Begin starts a scrape at now, holding the tracker until End.
func (t *Tracker) Begin(now time.Time) *Scrape {
	t.mu.Lock()
	return &Scrape{t: t, now: now, budget: t.readBudget}
}

// Observe records k's partition end and consumer position. firstTS reads
// the first timestamp (ms) of the batch holding an offset; nil: no age.
// The age is that of the record at consumed.
func (s *Scrape) Observe(k Key, end, consumed int64, firstTS func(offset int64) (int64, bool)) Point {
	return s.ObserveOldest(k, end, consumed, consumed, firstTS)
}

// ObserveOldest is Observe with the oldest unconsumed record at oldest
// instead of at consumed (share groups, whose acknowledged records are not
// a prefix); oldest < 0: none.
func (s *Scrape) ObserveOldest(k Key, end, consumed, oldest int64, firstTS func(offset int64) (int64, bool)) Point {
	e := s.t.entries[k]
	if e == nil {
		e = &entry{w: New(s.t.span), tsOffset: -1}
		s.t.entries[k] = e
	}
	e.seen = s.now.UnixNano()
	e.w.Observe(s.now, end, consumed)
	p := Point{Lag: max(end-consumed, 0)}
	p.Rates, p.RatesOK = e.w.Rates()
	p.Drain = DrainSeconds(p.Lag, p.Rates.Growth)
	switch {
	case p.Lag == 0 || oldest < 0 || oldest >= end:
		p.AgeOK = true
	case firstTS == nil:
	default:
		if e.tsOffset != oldest && s.budget > 0 {
			s.budget--
			if ts, ok := firstTS(oldest); ok {
				e.tsOffset, e.ts = oldest, ts
			}
		}
		if e.tsOffset >= 0 && e.tsOffset <= oldest {
			p.OldestAge = max(s.now.Sub(time.UnixMilli(e.ts)).Seconds(), 0)
			p.AgeOK = true
		}
	}
	return p
}

// End releases the tracker, dropping keys not observed for a while.
func (s *Scrape) End() {
	t := s.t
	defer t.mu.Unlock()
	idle := max(2*t.span, 10*time.Minute)
	cut := s.now.Add(-idle).UnixNano()
	for k, e := range t.entries {
		if e.seen < cut {
			delete(t.entries, k)
		}
	}
}

// Sum adds up the points of one consumer's partitions of a topic.
type Sum struct {
	Lag                 int64
	Growth, Consumption float64
	RatesOK             bool // every partition had rates
	OldestAge           float64
	AgeOK               bool // some partition had an age
	n                   int
}

// Add adds p.
func (u *Sum) Add(p Point) {
	if u.n == 0 {
		u.RatesOK = true
	}
	u.n++
	u.Lag += p.Lag
	u.Growth += p.Rates.Growth
	u.Consumption += p.Rates.Consumption
	u.RatesOK = u.RatesOK && p.RatesOK
	if p.AgeOK {
		u.OldestAge = max(u.OldestAge, p.OldestAge)
		u.AgeOK = true
	}
}

// Drain is the topic's time to drain: its lag over its net rate.
func (u *Sum) Drain() float64 { return DrainSeconds(u.Lag, u.Growth) }
