package quota

import "math"

// Window is the measurement window: Samples samples of SizeMs each
// (quota.window.num, quota.window.size.seconds).
type Window struct {
	Samples int
	SizeMs  int64
}

// DefaultWindow is Kafka's: 11 samples of 1 s.
var DefaultWindow = Window{Samples: 11, SizeMs: 1000}

func (w Window) valid() Window {
	if w.Samples < 2 {
		w.Samples = DefaultWindow.Samples
	}
	if w.SizeMs < 1 {
		w.SizeMs = DefaultWindow.SizeMs
	}
	return w
}

// sample is one window's total.
type sample struct {
	startMs int64 // when the sample's window began
	total   float64
}

// Rate is Kafka's Rate over a SampledStat with SampledTotal: values per
// second over the retained samples. Not safe for concurrent use.
//
// Invariant: len(samples) <= w.Samples; cur indexes the sample being
// filled once there is one.
type Rate struct {
	w       Window
	samples []sample
	cur     int
}

// NewRate returns an empty rate over w.
func NewRate(w Window) *Rate { return &Rate{w: w.valid()} }

// Record adds v at nowMs, opening a new sample when the current one's
// window is over (the oldest is reused once there are w.Samples).
func (r *Rate) Record(v float64, nowMs int64) {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{startMs: nowMs})
		r.cur = 0
	}
	s := &r.samples[r.cur]
	if nowMs-s.startMs >= r.w.SizeMs {
		r.cur = (r.cur + 1) % r.w.Samples
		if r.cur >= len(r.samples) {
			r.samples = append(r.samples, sample{startMs: nowMs})
		} else {
			r.samples[r.cur] = sample{startMs: nowMs}
		}
		s = &r.samples[r.cur]
	}
	s.total += v
}

// purge resets the samples too old to count (Kafka's
// purgeObsoleteSamples): older than the whole window.
func (r *Rate) purge(nowMs int64) {
	expire := int64(r.w.Samples) * r.w.SizeMs
	for i := range r.samples {
		if nowMs-r.samples[i].startMs >= expire {
			r.samples[i] = sample{startMs: nowMs}
		}
	}
}

// WindowMs is the time the rate is measured over at nowMs (Kafka's
// Rate.windowSize): from the oldest sample's start, counted as at least
// Samples-1 whole windows, and at least 1 ms.
func (r *Rate) WindowMs(nowMs int64) int64 {
	r.purge(nowMs)
	oldest := nowMs
	for _, s := range r.samples {
		if s.startMs < oldest {
			oldest = s.startMs
		}
	}
	elapsed := nowMs - oldest
	full := elapsed / r.w.SizeMs
	if min := int64(r.w.Samples - 1); full < min {
		elapsed += (min - full) * r.w.SizeMs
	}
	return max(elapsed, 1)
}

// Measure is the rate per second at nowMs.
func (r *Rate) Measure(nowMs int64) float64 {
	win := r.WindowMs(nowMs) // purges first
	var total float64
	for _, s := range r.samples {
		total += s.total
	}
	return total / (float64(win) / 1000)
}

// ThrottleMs is the throttle time at nowMs under quota q (per second):
// (O-Q)/Q * W when the observed rate O is above Q, else 0 (Kafka's
// QuotaUtils.throttleTime), bounded to an int32 of milliseconds.
func (r *Rate) ThrottleMs(q float64, nowMs int64) int64 {
	o := r.Measure(nowMs)
	if !(o > q) {
		return 0
	}
	t := (o - q) / q * float64(r.WindowMs(nowMs))
	return clampMs(math.Round(t))
}

func clampMs(t float64) int64 {
	if math.IsNaN(t) || t < 0 {
		return 0
	}
	if t > math.MaxInt32 {
		return math.MaxInt32
	}
	return int64(t)
}

// TokenBucket is Kafka's TokenBucket (KIP-599): Q*Samples*SizeMs/1000
// tokens at most, refilled at Q per second; a recorded value takes tokens
// and may leave the bucket below zero. Not safe for concurrent use.
type TokenBucket struct {
	w       Window
	tokens  float64
	lastMs  int64
	started bool
}

// NewTokenBucket returns a full bucket (it fills on first use).
func NewTokenBucket(w Window) *TokenBucket { return &TokenBucket{w: w.valid()} }

func (b *TokenBucket) burst(q float64) float64 {
	return q * float64(b.w.Samples) * float64(b.w.SizeMs) / 1000
}

func (b *TokenBucket) refill(q float64, nowMs int64) {
	if !b.started {
		b.started, b.tokens, b.lastMs = true, b.burst(q), nowMs
		return
	}
	if nowMs > b.lastMs {
		b.tokens = math.Min(b.burst(q), b.tokens+q*float64(nowMs-b.lastMs)/1000)
		b.lastMs = nowMs
	}
}

// Tokens is the bucket's level at nowMs under quota q.
func (b *TokenBucket) Tokens(q float64, nowMs int64) float64 {
	b.refill(q, nowMs)
	return b.tokens
}

// Record takes v tokens at nowMs.
func (b *TokenBucket) Record(v, q float64, nowMs int64) {
	b.refill(q, nowMs)
	b.tokens = math.Min(b.burst(q), b.tokens-v)
}

// ThrottleMs is the time until the bucket is back to zero, 0 when it is
// not below (ControllerMutationQuotaManager.throttleTimeMs).
func (b *TokenBucket) ThrottleMs(q float64, nowMs int64) int64 {
	t := b.Tokens(q, nowMs)
	if t >= 0 {
		return 0
	}
	return clampMs(math.Round(-t / q * 1000))
}
