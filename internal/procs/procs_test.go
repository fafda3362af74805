package procs

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testwait"
)

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 5*time.Second, cond, "%s", what)
}

func TestGovernorShrinksWhenIdleAndGrowsOnTouch(t *testing.T) {
	full := runtime.GOMAXPROCS(0)
	if full == 1 {
		t.Skip("one CPU: nothing to shrink")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Run(ctx, Config{After: 40 * time.Millisecond}) }()
	defer func() {
		cancel()
		<-done
		if got := runtime.GOMAXPROCS(0); got != full || Shrunk() {
			t.Errorf("after Run: GOMAXPROCS %d (shrunk %v), want %d", got, Shrunk(), full)
		}
	}()

	s0, g0 := Transitions()
	waitFor(t, "the idle governor shrinks", Shrunk)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("shrunk with GOMAXPROCS %d", got)
	}
	Touch()
	if Shrunk() || runtime.GOMAXPROCS(0) != full {
		t.Fatalf("after Touch: shrunk %v, GOMAXPROCS %d, want %d", Shrunk(), runtime.GOMAXPROCS(0), full)
	}
	// Steady work keeps it grown: a Touch every 10 ms for 10 spells.
	for i := 0; i < 40; i++ {
		Touch()
		if Shrunk() {
			t.Fatalf("shrunk while touched every 10 ms (round %d)", i)
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, "it shrinks again once the work stops", Shrunk)
	if s, g := Transitions(); s-s0 < 2 || g-g0 < 1 {
		t.Fatalf("transitions: %d shrinks, %d grows", s-s0, g-g0)
	}
}

func TestGovernorOff(t *testing.T) {
	for _, cfg := range []Config{
		{After: 0},
		{After: 10 * time.Millisecond, Environ: []string{"HOME=/", "GOMAXPROCS=2"}},
	} {
		done := make(chan struct{})
		go func() { defer close(done); Run(context.Background(), cfg) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("Run(%+v) did not return: the governor should be off", cfg)
		}
		if Shrunk() {
			t.Fatalf("Run(%+v) shrank the scheduler", cfg)
		}
	}
	if explicitProcs([]string{"GOMAXPROCS="}) || explicitProcs([]string{"XGOMAXPROCS=1"}) {
		t.Fatal("an empty or other variable counted as an explicit GOMAXPROCS")
	}
}

// threadSlacks reads every thread's timer slack in ns (Linux).
func threadSlacks(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skipf("no /proc/self/task: %v", err)
	}
	m := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/timerslack_ns")
		if err == nil {
			m[e.Name()] = strings.TrimSpace(string(b))
		}
	}
	if len(m) == 0 {
		t.Fatal("no thread's timer slack could be read")
	}
	return m
}

// While idle every thread has the idle slack; the first Touch puts back
// each thread's default. Without CAP_SYS_NICE only the single P is left.
func TestGovernorTimerSlack(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOMAXPROCS(0) == 1 {
		t.Skip("needs Linux and more than one CPU")
	}
	before := threadSlacks(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Config{After: 40 * time.Millisecond, Slack: 3 * time.Millisecond})
	}()
	defer func() { cancel(); <-done }()
	waitFor(t, "the idle governor shrinks", Shrunk)
	mu.Lock()
	permitted := slackSet
	mu.Unlock()
	if !permitted {
		t.Skip("timer slack of other threads not permitted here (CAP_SYS_NICE): single P only")
	}
	for tid, v := range threadSlacks(t) {
		if v != "3000000" {
			t.Errorf("idle: thread %s has timer slack %s ns, want 3000000", tid, v)
		}
	}
	start := time.Now()
	Touch()
	t.Logf("leaving idle mode took %v", time.Since(start))
	for tid, v := range threadSlacks(t) {
		if want, ok := before[tid]; ok && v != want {
			t.Errorf("after Touch: thread %s has timer slack %s ns, want its default %s", tid, v, want)
		} else if !ok && v == "3000000" {
			t.Errorf("after Touch: new thread %s kept the idle slack", tid)
		}
	}
}
