// Package testwait is test support: waiting for a condition by bounded
// polling instead of sleeping, and random seeds that are printed and can
// be replayed.
//
// A test that sleeps "long enough" for something to happen passes when it
// never happened; For fails the test instead:
//
//	testwait.For(t, 10*time.Second, func() bool { return len(b.Brokers()) == 3 }, "three brokers registered")
//
// A randomized test takes its seed from Seed, which logs it; setting
// STRATA_SEED to a logged value replays that run:
//
//	rng := rand.New(rand.NewSource(testwait.Seed(t)))
package testwait

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// For polls cond until it returns true, failing the test (t.Fatalf with
// msg, formatted with args) when timeout passes first. The polling
// interval starts at 1 ms and doubles up to 50 ms. It must be called from
// the test's goroutine.
func For(t testing.TB, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("waited %v: %s", timeout, fmt.Sprintf(msg, args...))
	}
}

// Until polls cond as For does and reports whether it held before timeout,
// for callers that fail in their own way (or from another goroutine, with
// t.Errorf).
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// UntilEvery is Until with a fixed polling interval poll, for callers
// that time how long cond took to hold (poll is the figures' resolution).
func UntilEvery(timeout, poll time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(poll)
	}
}

// Hold checks that cond holds throughout d (polling as For does, at most
// every 50 ms), failing the test (t.Fatalf with msg and args) the first
// time it does not: a property that must stay true over a window (a
// cluster left idle keeps its leaders while its idle cost is measured),
// where For waits for one to become true.
func Hold(t testing.TB, d time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	end := time.Now().Add(d)
	wait := time.Millisecond
	for {
		if !cond() {
			t.Fatalf("within %v: %s", d, fmt.Sprintf(msg, args...))
			return
		}
		left := time.Until(end)
		if left <= 0 {
			return
		}
		time.Sleep(min(wait, left))
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// SeedEnv names the environment variable that fixes the seed Seed returns.
const SeedEnv = "STRATA_SEED"

// Seed returns the seed for a randomized test: STRATA_SEED when set,
// else the clock. It logs the seed, with how to replay it, so a failing
// run can be repeated.
func Seed(t testing.TB) int64 {
	t.Helper()
	return SeedOr(t, time.Now().UnixNano())
}

// SeedOr is Seed for a test with a fixed seed def of its own: STRATA_SEED
// when set, else def; it logs the seed used.
func SeedOr(t testing.TB, def int64) int64 {
	t.Helper()
	seed := def
	if s := os.Getenv(SeedEnv); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay: %s=%d go test -run '^%s$')", seed, SeedEnv, seed, t.Name())
	return seed
}
