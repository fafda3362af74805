package lagrate

import (
	"math"
	"testing"
	"time"
)

// clock is the injected clock of these tests.
type clock struct{ t time.Time }

func (c *clock) advance(d time.Duration) time.Time { c.t = c.t.Add(d); return c.t }

// A producer faster than its consumer, then slower: the growth rate's sign
// follows within one window, and the time to drain goes from +Inf to a
// finite estimate that matches lag / net rate.
func TestGrowthSignAndDrainFollowWithinAWindow(t *testing.T) {
	const span = 30 * time.Second
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	w := New(span)
	end, consumed := int64(0), int64(0)
	step := 5 * time.Second
	w.Observe(c.t, end, consumed)
	if _, ok := w.Rates(); ok {
		t.Fatal("rates from one sample")
	}
	// Phase 1: 100 records/s produced, 60/s consumed: growing at 40/s.
	for range 12 {
		end += 500
		consumed += 300
		w.Observe(c.advance(step), end, consumed)
	}
	r, ok := w.Rates()
	if !ok || r.Growth <= 0 || math.Abs(r.Growth-40) > 1e-9 || math.Abs(r.Consumption-60) > 1e-9 || math.Abs(r.Production-100) > 1e-9 {
		t.Fatalf("growing phase: %+v ok=%v, want growth 40 consumption 60 production 100", r, ok)
	}
	if r.Span < span || r.Span > span+step {
		t.Fatalf("span %v, want about %v", r.Span, span)
	}
	lag := end - consumed
	if d := DrainSeconds(lag, r.Growth); !math.IsInf(d, 1) {
		t.Fatalf("drain while growing = %v, want +Inf", d)
	}
	// Phase 2: 20/s produced, 60/s consumed: draining at 40/s. The sign
	// must have flipped at the latest one window after the change.
	flipped := time.Duration(-1)
	for i := 1; i <= 12; i++ {
		end += 100
		consumed += 300
		w.Observe(c.advance(step), end, consumed)
		r, _ = w.Rates()
		if r.Growth < 0 && flipped < 0 {
			flipped = time.Duration(i) * step
		}
	}
	if flipped < 0 || flipped > span {
		t.Fatalf("growth sign flipped after %v, want within %v", flipped, span)
	}
	if math.Abs(r.Growth+40) > 1e-9 {
		t.Fatalf("draining phase growth %v, want -40", r.Growth)
	}
	lag = end - consumed
	if d := DrainSeconds(lag, r.Growth); math.Abs(d-float64(lag)/40) > 1e-9 {
		t.Fatalf("drain %v, want %v", d, float64(lag)/40)
	}
	if DrainSeconds(0, 5) != 0 {
		t.Fatal("no backlog drains in 0 s")
	}
}

// Frequent samples do not grow the window past MaxSamples; an offset
// reset backwards restarts it.
func TestBoundedAndReset(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	w := New(time.Minute)
	for i := range 10_000 {
		w.Observe(c.advance(10*time.Millisecond), int64(i*10), int64(i*5))
	}
	if len(w.samples) > MaxSamples {
		t.Fatalf("%d samples kept, max %d", len(w.samples), MaxSamples)
	}
	if r, ok := w.Rates(); !ok || r.Growth <= 0 {
		t.Fatalf("rates %+v ok=%v", r, ok)
	}
	w.Observe(c.advance(time.Second), 100_000, 0) // offsets reset to 0
	if _, ok := w.Rates(); ok {
		t.Fatal("rates across a reset")
	}
	w.Observe(c.t.Add(-time.Hour), 0, 0) // out of order: ignored
	if len(w.samples) != 1 {
		t.Fatalf("%d samples after an out-of-order one", len(w.samples))
	}
}

// The tracker reads a timestamp only when a position moved, at most its
// budget per scrape, and forgets keys not observed for a while.
func TestTrackerAgeCacheBudgetAndForget(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	tr := NewTracker(time.Minute)
	tr.readBudget = 2
	reads := 0
	ts := func(off int64) (int64, bool) { reads++; return c.t.Add(-10 * time.Second).UnixMilli(), true }
	sc := tr.Begin(c.t)
	for p := range int32(3) {
		pt := sc.Observe(Key{"g", "t", p}, 100, 40, ts)
		if pt.Lag != 60 || pt.RatesOK {
			t.Fatalf("first point %+v", pt)
		}
		if p < 2 && (!pt.AgeOK || pt.OldestAge != 10) {
			t.Fatalf("partition %d age %+v, want 10 s", p, pt)
		}
		if p == 2 && pt.AgeOK {
			t.Fatalf("past the read budget an age appeared: %+v", pt)
		}
	}
	sc.End()
	sc = tr.Begin(c.advance(5 * time.Second))
	pt := sc.Observe(Key{"g", "t", 0}, 110, 40, ts) // same position: cached
	if reads != 2 || !pt.AgeOK || pt.OldestAge != 15 || !pt.RatesOK || pt.Rates.Growth != 2 || !math.IsInf(pt.Drain, 1) {
		t.Fatalf("second point %+v after %d reads", pt, reads)
	}
	if pt := sc.Observe(Key{"g", "t", 1}, 110, 110, ts); !pt.AgeOK || pt.OldestAge != 0 || pt.Drain != 0 {
		t.Fatalf("caught-up point %+v", pt)
	}
	sc.End()
	sc = tr.Begin(c.advance(11 * time.Minute))
	sc.Observe(Key{"g", "t", 0}, 110, 110, ts)
	sc.End()
	if n := tr.Len(); n != 1 {
		t.Fatalf("%d keys tracked, want 1 (the others not observed for 11 min)", n)
	}
}
