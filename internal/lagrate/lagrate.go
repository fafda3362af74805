// Package lagrate turns samples of a consumer's position and its
// partition's end into rates over a sliding window: how fast the backlog
// grows, how fast the consumer consumes, and how long the backlog takes to
// drain at that pace. It is pure (the caller passes the time of each
// sample), so tests drive it with an injected clock; the metrics
// collectors feed it one sample per scrape.
package lagrate

import (
	"math"
	"time"
)

// MaxSamples bounds the samples a Window keeps (its memory: about
// 24 bytes each). Samples closer together than span/(MaxSamples-1)
// replace the newest one instead of being added, so frequent scrapes do
// not grow a window.
const MaxSamples = 12

type sample struct {
	at       int64 // unix nanoseconds
	end      int64 // the partition's end (high watermark): records produced
	consumed int64 // the consumer's position (committed offset, or share start)
}

// Window holds the samples of one consumer on one partition over span.
// The zero Window is not usable: make it with New. Not safe for
// concurrent use.
type Window struct {
	span    time.Duration
	samples []sample // oldest first, at most MaxSamples
}

// New returns a window over span (at least a millisecond).
func New(span time.Duration) *Window {
	return &Window{span: max(span, time.Millisecond), samples: make([]sample, 0, 2)}
}

// Observe records that at time at the partition's end was end and the
// consumer's position consumed. A position or an end that went backwards
// (an offset reset, a recreated topic) starts the window again: rates
// across it would be meaningless.
func (w *Window) Observe(at time.Time, end, consumed int64) {
	s := sample{at: at.UnixNano(), end: end, consumed: consumed}
	if n := len(w.samples); n > 0 {
		last := w.samples[n-1]
		switch {
		case s.at < last.at:
			return // out of order: keep what we have
		case end < last.end || consumed < last.consumed:
			w.samples = w.samples[:0]
		case n >= 2 && s.at-w.samples[n-2].at < int64(w.span)/(MaxSamples-1):
			w.samples[n-1] = s // too close to the one before: replace
			w.trim(s.at)
			return
		}
	}
	if len(w.samples) == MaxSamples {
		copy(w.samples, w.samples[1:])
		w.samples = w.samples[:MaxSamples-1]
	}
	w.samples = append(w.samples, s)
	w.trim(s.at)
}

// trim drops samples that are older than the window, keeping the newest
// one at or beyond its start so the rates cover the whole span.
func (w *Window) trim(now int64) {
	drop := 0
	for drop+2 < len(w.samples) && now-w.samples[drop+1].at >= int64(w.span) {
		drop++
	}
	if drop > 0 {
		w.samples = append(w.samples[:0], w.samples[drop:]...)
	}
}

// Rates are a window's rates, in records per second.
type Rates struct {
	// Growth is the backlog's change per second: positive while it
	// grows (produced faster than consumed), negative while it drains.
	Growth float64
	// Consumption is the consumer's position's advance per second.
	Consumption float64
	// Production is the partition end's advance per second.
	Production float64
	// Span is the time the rates are measured over.
	Span time.Duration
}

// Rates returns the rates between the oldest and the newest sample in the
// window; ok is false until two samples at different times exist.
func (w *Window) Rates() (r Rates, ok bool) {
	n := len(w.samples)
	if n < 2 {
		return Rates{}, false
	}
	a, b := w.samples[0], w.samples[n-1]
	dt := time.Duration(b.at - a.at)
	if dt <= 0 {
		return Rates{}, false
	}
	sec := dt.Seconds()
	lagA, lagB := max(a.end-a.consumed, 0), max(b.end-b.consumed, 0)
	return Rates{
		Growth:      float64(lagB-lagA) / sec,
		Consumption: float64(b.consumed-a.consumed) / sec,
		Production:  float64(b.end-a.end) / sec,
		Span:        dt,
	}, true
}

// DrainSeconds estimates the time to consume a backlog of lag records at
// the net rate growth (Rates.Growth): 0 when there is no backlog, +Inf
// while the backlog does not shrink.
func DrainSeconds(lag int64, growth float64) float64 {
	if lag <= 0 {
		return 0
	}
	if growth >= 0 {
		return math.Inf(1)
	}
	return float64(lag) / -growth
}
