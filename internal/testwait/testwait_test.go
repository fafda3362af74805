package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	var n atomic.Int32
	go func() {
		for i := 0; i < 3; i++ {
			n.Add(1)
		}
	}()
	For(t, 10*time.Second, func() bool { return n.Load() == 3 }, "counter at 3 (%d)", n.Load())
	start := time.Now()
	if Until(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds held")
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Fatal("gave up before the timeout")
	}
}

func TestSeed(t *testing.T) {
	t.Setenv(SeedEnv, "42")
	if s := Seed(t); s != 42 {
		t.Fatalf("seed %d, want 42", s)
	}
}

func TestUntilEvery(t *testing.T) {
	var calls int
	if !UntilEvery(time.Second, time.Millisecond, func() bool { calls++; return calls == 3 }) || calls != 3 {
		t.Fatalf("held after %d calls, want 3", calls)
	}
	if UntilEvery(10*time.Millisecond, time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds held")
	}
}

// fatalRecorder records Fatalf instead of stopping the test.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (r *fatalRecorder) Helper()               {}
func (r *fatalRecorder) Fatalf(string, ...any) { r.failed = true }

func TestHold(t *testing.T) {
	start := time.Now()
	r := &fatalRecorder{TB: t}
	Hold(r, 30*time.Millisecond, func() bool { return true }, "always")
	if r.failed || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("a condition that always holds: failed %v after %v", r.failed, time.Since(start))
	}
	var n atomic.Int32
	r = &fatalRecorder{TB: t}
	Hold(r, time.Second, func() bool { return n.Add(1) < 3 }, "breaks at the third check")
	if !r.failed {
		t.Fatal("a condition that stopped holding was not reported")
	}
}
