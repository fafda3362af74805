package protocol

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A handler that never returns -- one blocked in the broker, such as a
// produce waiting for a commit its quorum cannot make -- does not hold
// Shutdown past its deadline: the connections close, Shutdown returns
// ErrShutdownIncomplete naming the request, and a later Close waits for
// what was left behind.
func TestShutdownLeavesStuckHandlerBehind(t *testing.T) {
	c := newCluster(t, nil)
	rc := dialRaw(t, c.addr)
	// What run does for a Produce whose handler does not return.
	c.s.wg.Add(1)
	c.s.running[0].Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := c.s.Shutdown(ctx)
	took := time.Since(start)
	if !errors.Is(err, ErrShutdownIncomplete) || !strings.Contains(err.Error(), "1 requests still being handled (Produce 1)") {
		t.Fatalf("Shutdown: %v", err)
	}
	if took < 900*time.Millisecond || took > 3*time.Second {
		t.Fatalf("Shutdown took %v with a 1s deadline", took)
	}
	rc.expectClosed()

	// The handler returns (the broker closed under it): Close is done.
	closed := make(chan error, 1)
	go func() { closed <- c.s.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned with the handler still running: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	c.s.running[0].Add(-1)
	c.s.wg.Done()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return once the handler had")
	}
}

// Without stuck handlers Shutdown is done as soon as the connections are.
func TestShutdownIdleIsQuick(t *testing.T) {
	c := newCluster(t, nil)
	rc := dialRaw(t, c.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := c.s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > closeGrace {
		t.Fatalf("Shutdown took %v", took)
	}
	rc.expectClosed()
}
