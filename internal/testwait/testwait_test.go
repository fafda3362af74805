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
