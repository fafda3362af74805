// Package procs puts an idle broker's scheduler in a cheaper mode.
//
// An idle broker with many replicated partitions is a swarm of timers:
// every Raft group beats, checks its lease and its election timer on its
// own clock, about two thousand wake-ups a second per broker at 1,000
// partitions RF 3. Each wakes a sleeping thread at an instant of its own,
// and with several Ps the Go scheduler wakes a second thread to look for
// more work (a "spinning" M) and finds none. Those thread switches, not
// the Raft work, are most of an idle broker's CPU (docs/PERFORMANCE.md).
//
// While idle the governor therefore (1) runs the goroutines on one P
// (GOMAXPROCS=1): no spinning thread; (2) where permitted, gives every
// thread a few milliseconds of kernel timer slack, so that timers due
// within that window fire in one wake-up. Neither is wanted under load:
// one P halves a 2-core broker, and slack stretches the scheduler's own
// microsecond sleeps into milliseconds of request latency. Raft's timers,
// hundreds of milliseconds to seconds, do not notice either.
//
// Governor watches for work: Touch is called on every client request and
// every replicated batch a follower stores. After a quiet spell (no Touch
// for Config.After) it shrinks; the next Touch restores the defaults at
// once, before the request that caused it is handled, so load never runs
// in idle mode for more than that first request. The scheduler is
// process-wide, so the governor is too: one per process, package-level
// Touch, so that the packages on the hot paths need no plumbing and pay
// two atomic loads when it is off.
package procs

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// touched is set by Touch and cleared by the governor at each check.
	touched atomic.Bool
	// shrunk is true while GOMAXPROCS is 1 because of the governor.
	shrunk atomic.Bool
	mu     sync.Mutex // serializes shrink and grow
	// idleSlack is the timer slack to set while shrunk (Config.Slack), 0
	// when off or refused; slackSet is true while it is set. Both under mu.
	idleSlack int64
	slackSet  bool
	// shrinks and grows count transitions (metrics).
	shrinks, grows atomic.Uint64
)

// Touch records work: a client request or replicated data. When the
// scheduler is shrunk it grows it back before returning.
func Touch() {
	if !touched.Load() {
		touched.Store(true)
	}
	if shrunk.Load() {
		grow()
	}
}

func grow() {
	mu.Lock()
	defer mu.Unlock()
	if shrunk.Load() {
		if slackSet {
			setIdleSlack(0) // best effort: it worked when it was set
			slackSet = false
		}
		// The runtime's own default (CPU count, cgroup limit), which it
		// keeps updating from then on.
		runtime.SetDefaultGOMAXPROCS()
		shrunk.Store(false)
		grows.Add(1)
	}
}

func shrink(logger *slog.Logger) bool {
	mu.Lock()
	defer mu.Unlock()
	if shrunk.Load() || touched.Load() || runtime.GOMAXPROCS(0) == 1 {
		return false
	}
	runtime.GOMAXPROCS(1)
	shrunk.Store(true)
	// A Touch that raced with this shrink either set touched before the
	// load below (undo now) or loads shrunk after the store above (it
	// grows): no request is left running on one P unnoticed.
	if touched.Load() {
		runtime.SetDefaultGOMAXPROCS()
		shrunk.Store(false)
		return false
	}
	if idleSlack > 0 {
		if err := setIdleSlack(idleSlack); err != nil {
			setIdleSlack(0) // the threads it reached before the refusal
			idleSlack = 0
			logger.Info("idle: timer slack not permitted (needs CAP_SYS_NICE); idle brokers use one P only", "err", err)
		} else {
			slackSet = true
		}
	}
	shrinks.Add(1)
	return true
}

// Shrunk reports whether the governor has the scheduler at one P.
func Shrunk() bool { return shrunk.Load() }

// Transitions reports how often the governor shrank and grew the scheduler.
func Transitions() (shrank, grew uint64) { return shrinks.Load(), grows.Load() }

// Config sets up the governor.
type Config struct {
	// After is how long without a Touch before the scheduler shrinks;
	// 0 or less disables the governor.
	After time.Duration
	// Slack is the kernel timer slack of the process's threads while
	// shrunk (Linux, CAP_SYS_NICE; 0: none).
	Slack time.Duration
	// Environ is the process environment: an explicit GOMAXPROCS there is
	// the operator's choice and disables the governor.
	Environ []string
	Logger  *slog.Logger
}

// Run governs the scheduler until ctx is done, then restores the default.
// It returns at once when the governor is disabled.
func Run(ctx context.Context, cfg Config) {
	if cfg.After <= 0 || explicitProcs(cfg.Environ) {
		return
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	mu.Lock()
	idleSlack = int64(cfg.Slack)
	mu.Unlock()
	// Checking at a quarter of the spell bounds the spell's overshoot to a
	// quarter and costs four wake-ups per spell.
	tick := time.NewTicker(cfg.After / 4)
	defer tick.Stop()
	defer grow()
	quiet := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if touched.Swap(false) {
			quiet = 0
			continue
		}
		if quiet += cfg.After / 4; quiet < cfg.After || shrunk.Load() {
			continue
		}
		if shrink(logger) {
			logger.Debug("idle: scheduler shrunk to one P", "quiet_for", quiet)
		}
	}
}

func explicitProcs(environ []string) bool {
	for _, kv := range environ {
		if len(kv) > len("GOMAXPROCS=") && kv[:len("GOMAXPROCS=")] == "GOMAXPROCS=" {
			return true
		}
	}
	return false
}
