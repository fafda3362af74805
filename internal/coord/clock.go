package coord

import (
	"sort"
	"sync"
	"time"
)

// Clock is where the core (and its users) read the time and get their
// timers: Real by default, a Fake in scripted tests so that the test, not
// the wall clock, decides when a tick or a timeout fires.
// The timestamps of the batches Write appends come from Now as well, and
// the broker refuses a batch more than message.timestamp.after.max.ms
// (1 h) ahead of its own clock: start a Fake near time.Now().
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
	NewTicker(d time.Duration) Ticker
}

// Timer is a one-shot timer of a Clock (time.Timer's subset in use).
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// Ticker is a periodic timer of a Clock (time.Ticker's subset in use).
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the wall clock: time.Now, time.NewTimer, time.NewTicker.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                   { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer   { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }

// WithNow returns c with its Now replaced by now (nil: c unchanged); its
// timers stay c's. It keeps a user's older Now hook (a test's fixed time
// over real timers) meaning what it meant.
func WithNow(c Clock, now func() time.Time) Clock {
	if now == nil {
		return c
	}
	return nowClock{c, now}
}

type nowClock struct {
	Clock
	now func() time.Time
}

func (c nowClock) Now() time.Time { return c.now() }

// Fake is a Clock that moves only when Advance is called. Timers and
// tickers due at or before the new time fire (in deadline order; a
// ticker fires once per Advance however many periods passed, as a
// time.Ticker drops the ticks a slow reader misses). Channels have room
// for one value, like the real ones. Safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

// NewFake returns a Fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now is the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer firing once when the fake time reaches Now+d.
func (f *Fake) NewTimer(d time.Duration) Timer { return f.add(d, 0) }

// NewTicker returns a ticker firing every d of fake time.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("coord: non-positive ticker period")
	}
	return fakeTicker{f.add(d, d)}
}

func (f *Fake) add(d, period time.Duration) *fakeTimer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, at: f.now.Add(d), period: period, c: make(chan time.Time, 1)}
	f.timers = append(f.timers, t)
	if d <= 0 {
		f.fireLocked()
	}
	return t
}

// Advance moves the fake time by d and fires what came due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.fireLocked()
}

// Waiters is the number of live timers and tickers: a test advances
// once the code under test has armed the timer it means to fire.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

func (f *Fake) fireLocked() {
	sort.SliceStable(f.timers, func(i, j int) bool { return f.timers[i].at.Before(f.timers[j].at) })
	keep := f.timers[:0]
	for _, t := range f.timers {
		if t.at.After(f.now) {
			keep = append(keep, t)
			continue
		}
		select {
		case t.c <- f.now:
		default: // a tick nobody read yet: dropped, as time.Ticker does
		}
		if t.period > 0 {
			for !t.at.After(f.now) {
				t.at = t.at.Add(t.period)
			}
			keep = append(keep, t)
		}
	}
	f.timers = keep
}

func (f *Fake) remove(t *fakeTimer) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, x := range f.timers {
		if x == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			return true
		}
	}
	return false
}

type fakeTimer struct {
	f      *Fake
	at     time.Time
	period time.Duration
	c      chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }
func (t *fakeTimer) Stop() bool          { return t.f.remove(t) }

type fakeTicker struct{ t *fakeTimer }

func (t fakeTicker) C() <-chan time.Time { return t.t.c }
func (t fakeTicker) Stop()               { t.t.f.remove(t.t) }
