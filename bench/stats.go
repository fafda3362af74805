package bench

import (
	"math"
	"math/bits"
	"sort"
	"sync/atomic"
	"time"
)

// Histogram counts durations in log-linear buckets: values below 2^subBits
// nanoseconds are exact, larger ones fall in one of 2^subBits buckets per
// power of two, so a percentile read back is within 1/2^subBits (1.6%) of
// the true value. Memory is fixed (histBuckets counters) however many
// values are recorded, which matters at millions of records a second.
// Record is safe from many goroutines at once (atomics, no lock): kgo calls
// produce promises from several goroutines.
type Histogram struct {
	counts [histBuckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64 // nanoseconds; overflows only after 584 years of latency
	max    atomic.Int64
	min    atomic.Int64 // 0 = unset; stored as value+1
}

const (
	subBits     = 6
	subCount    = 1 << subBits
	histBuckets = (64 - subBits + 1) * subCount
)

// bucketOf maps a non-negative value to its bucket index.
func bucketOf(v int64) int {
	if v < subCount {
		return int(v)
	}
	u := uint64(v)
	exp := bits.Len64(u) - subBits // >= 1
	sub := int(u>>uint(exp-1)) & (subCount - 1)
	return exp*subCount + sub
}

// bucketValue is the middle of bucket i (the value reported for it).
func bucketValue(i int) int64 {
	if i < subCount {
		return int64(i)
	}
	exp := i / subCount
	sub := i % subCount
	lo := (uint64(subCount) | uint64(sub)) << uint(exp-1)
	width := uint64(1) << uint(exp-1)
	return int64(lo + width/2)
}

// Record adds one duration; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(uint64(v))
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			break
		}
	}
	for {
		m := h.min.Load()
		if (m != 0 && v+1 >= m) || h.min.CompareAndSwap(m, v+1) {
			break
		}
	}
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n.Load() }

// Max is the largest value recorded (exact).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Min is the smallest value recorded (exact), 0 if none.
func (h *Histogram) Min() time.Duration {
	m := h.min.Load()
	if m == 0 {
		return 0
	}
	return time.Duration(m - 1)
}

// Mean is the average value (exact).
func (h *Histogram) Mean() time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / n)
}

// Percentile returns the value at or below which p percent of the values
// fall (nearest rank), 0 for an empty histogram. The top bucket reports
// the exact maximum, so p100 is exact.
func (h *Histogram) Percentile(p float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(p / 100 * float64(n)))
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			v := bucketValue(i)
			if mx := h.max.Load(); v > mx {
				v = mx
			}
			if mn := h.Min(); time.Duration(v) < mn {
				v = int64(mn)
			}
			return time.Duration(v)
		}
	}
	return h.Max()
}

// Latency is a histogram's summary in milliseconds, as printed and stored
// in JSON.
type Latency struct {
	Count uint64  `json:"count"`
	AvgMs float64 `json:"avg_ms"`
	P50Ms float64 `json:"p50_ms"`
	P95Ms float64 `json:"p95_ms"`
	P99Ms float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	MaxMs float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Summary reads the histogram's percentiles.
func (h *Histogram) Summary() Latency {
	return Latency{
		Count: h.Count(),
		AvgMs: ms(h.Mean()),
		P50Ms: ms(h.Percentile(50)),
		P95Ms: ms(h.Percentile(95)),
		P99Ms: ms(h.Percentile(99)),
		P999:  ms(h.Percentile(99.9)),
		MaxMs: ms(h.Max()),
	}
}

// Median of xs (the mean of the middle two for an even count); NaN for
// none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// Ratio is x/base, NaN when either is unknown or base is zero (a ratio to
// nothing is not a number worth printing).
func Ratio(x, base float64) float64 {
	if math.IsNaN(x) || math.IsNaN(base) || base == 0 {
		return math.NaN()
	}
	return x / base
}

// MiB is the unit of the MB/s figures, as kafka-producer-perf-test uses.
const MiB = 1 << 20
