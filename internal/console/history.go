package console

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/lagrate"
)

// DefaultMaxSeries is the lag history's default limit
// (strata.console.lag.history.max.series): group partitions it keeps a
// history of. Each series costs its ring of lags (8 bytes a sample: 1,920
// bytes for an hour at 15 s) plus a lagrate.Window and map overhead, about
// 2.6 KiB in all (TestHistoryMemoryAtLimit measures it), so the default
// bounds the history to about 5 MiB.
const DefaultMaxSeries = 2000

// History keeps each consumer group partition's lag over the last span,
// sampled every `every` by the console's sampler: one shared ring of
// sample times, and per series a ring of lags aligned with it (-1: no
// sample). A series not seen for a whole span is dropped; past maxSeries
// new series are refused (and counted) until some are dropped.
type History struct {
	mu        sync.Mutex
	every     time.Duration
	rate      time.Duration
	times     []int64 // unix ms per slot; 0: unused
	head      int     // the slot the next sample goes to
	series    map[SeriesKey]*series
	maxSeries int
	refused   int64
}

// SeriesKey names one group's position on one partition.
type SeriesKey struct {
	Group     string
	Topic     string
	Partition int32
}

type series struct {
	lags     []int64 // aligned with History.times
	lastSlot int     // the slot of its newest sample
	lastAt   int64
	lastLag  int64
	w        *lagrate.Window
}

// Sample is one group partition's position at a sample.
type Sample struct {
	Key       SeriesKey
	End       int64 // the partition's end offset
	Committed int64 // the group's committed offset
}

// NewHistory keeps span of samples taken every `every`, for at most
// maxSeries series; growth and drain rates are over rate.
func NewHistory(span, every time.Duration, maxSeries int, rate time.Duration) *History {
	n := max(int(span/every), 2)
	return &History{every: every, rate: rate, times: make([]int64, n), series: map[SeriesKey]*series{}, maxSeries: maxSeries}
}

// Record adds one round of samples taken at `at`.
func (h *History) Record(at time.Time, samples []Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := at.UnixMilli()
	slot := h.head
	h.head = (h.head + 1) % len(h.times)
	h.times[slot] = ms
	for _, s := range h.series {
		s.lags[slot] = -1 // overwritten below when sampled
	}
	for _, smp := range samples {
		s := h.series[smp.Key]
		if s == nil {
			if len(h.series) >= h.maxSeries {
				h.refused++
				continue
			}
			s = &series{lags: make([]int64, len(h.times)), w: lagrate.New(h.rate)}
			for i := range s.lags {
				s.lags[i] = -1
			}
			h.series[smp.Key] = s
		}
		lag := max(smp.End-smp.Committed, 0)
		s.lags[slot] = lag
		s.lastSlot, s.lastAt, s.lastLag = slot, ms, lag
		s.w.Observe(at, smp.End, smp.Committed)
	}
	span := int64(len(h.times)) * h.every.Milliseconds()
	for k, s := range h.series {
		if ms-s.lastAt > span {
			delete(h.series, k)
		}
	}
}

// Point is one sample of a series.
type Point struct {
	At  int64 `json:"t"` // unix ms
	Lag int64 `json:"lag"`
}

// Trend is a series' history and its rates.
type Trend struct {
	Points []Point `json:"points"`
	// Growth is the lag's change in records per second over the rate
	// window (positive: growing); Drain the seconds until it drains at
	// that pace (-1: never, while it grows; 0: no lag). Both are absent
	// until the window has two samples.
	Growth *float64 `json:"growth,omitempty"`
	Drain  *float64 `json:"drain,omitempty"`
}

// Trend returns k's history, oldest first; ok false when not kept.
func (h *History) Trend(k SeriesKey) (Trend, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.series[k]
	if s == nil {
		return Trend{}, false
	}
	var t Trend
	n := len(h.times)
	for i := range n {
		slot := (h.head + i) % n
		if h.times[slot] == 0 || s.lags[slot] < 0 {
			continue
		}
		t.Points = append(t.Points, Point{h.times[slot], s.lags[slot]})
	}
	if r, ok := s.w.Rates(); ok {
		g := r.Growth
		d := lagrate.DrainSeconds(s.lastLag, g)
		if math.IsInf(d, 1) {
			d = -1
		}
		t.Growth, t.Drain = &g, &d
	}
	return t, true
}

// Stats describe the history's size against its limit.
type Stats struct {
	Series    int   `json:"series"`
	MaxSeries int   `json:"maxSeries"`
	Refused   int64 `json:"refused"`
	// Bytes estimates the memory the history holds (SeriesBytes each).
	Bytes        int64 `json:"bytes"`
	SampleEveryS int64 `json:"sampleEverySeconds"`
	Samples      int   `json:"samplesPerSeries"`
}

// SeriesBytes is the estimated memory of one series beside its lag ring:
// the series struct, its lagrate.Window at its sample limit, its key
// (with its strings) and the map's share (TestHistoryMemoryAtLimit
// measured 2,659 bytes a series in all at 240 samples).
const SeriesBytes = 96 + 48 + lagrate.MaxSamples*24 + 96 + 192

// Stats reports the history's size.
func (h *History) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	per := int64(len(h.times))*8 + SeriesBytes
	return Stats{Series: len(h.series), MaxSeries: h.maxSeries, Refused: h.refused,
		Bytes: int64(len(h.times))*8 + int64(len(h.series))*per, SampleEveryS: int64(h.every / time.Second), Samples: len(h.times)}
}

// Keys lists the series kept for group, sorted.
func (h *History) Keys(group string) []SeriesKey {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []SeriesKey
	for k := range h.series {
		if k.Group == group {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
