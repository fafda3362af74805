package transport_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/replication/internal/raftharness"
)

// countingHandler counts the log records whose message contains substr.
type countingHandler struct {
	substr string
	n      *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.substr) {
		h.n.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }

// follower returns a node of group 0 other than leader.
func follower(h *raftharness.Harness, leader int) int {
	for i := range h.Nodes() {
		if i != leader {
			return i
		}
	}
	return -1
}

// A follower cut off for longer than raft's backoff takes to reach its
// cap (about 10 s of failures at this timing) gets the leader's entries
// within a moment of its return: the leader's AppendEntries waited for it
// instead of failing (catchup.go). Before, raft had backed off
// to 10.24 s between attempts, and the follower waited up to that long.
func TestHarnessFollowerBackFromOutageCatchesUpPromptly(t *testing.T) {
	if testing.Short() {
		t.Skip("a 12 s outage: not in -short")
	}
	var failed atomic.Int64
	h := raftharness.Start(t, raftharness.Config{Nodes: 3, Logger: slog.New(countingHandler{substr: "failed to appendEntries", n: &failed})})
	leader, err := h.Leader(0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := follower(h, leader)
	raftharness.Apply(t, h, 5)
	raftharness.WaitApplied(t, h, 0, 5, 0, 1, 2)
	h.Disconnect(f)
	others := []int{}
	for i := range h.Nodes() {
		if i != f {
			others = append(others, i)
		}
	}
	n := 5
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); n++ {
		raftharness.ApplyToLeader(t, h, 0, []byte("during"), others...)
		time.Sleep(20 * time.Millisecond)
	}
	leader, err = h.Leader(0, 5*time.Second, others...)
	if err != nil {
		t.Fatal(err)
	}
	want := h.FSM(leader, 0).(*raftharness.CountFSM).Count()
	healed := time.Now()
	h.Heal()
	ff := h.FSM(f, 0).(*raftharness.CountFSM)
	for ff.Count() < want && time.Since(healed) < 20*time.Second {
		time.Sleep(time.Millisecond)
	}
	took := time.Since(healed)
	t.Logf("%d entries during a 12 s outage; the follower caught up %v after it was reconnected; %d AppendEntries failures logged", n-5, took.Round(time.Millisecond), failed.Load())
	if took > 2*time.Second {
		t.Fatalf("the follower applied %d of %d entries %v after it was reconnected, want all within 2s", ff.Count(), want, took)
	}
}

// An AppendEntries waiting for a follower that is down holds nothing
// raft waits for: removing that follower from the configuration (raft's
// main loop hands its replication goroutine a value and waits for it to
// take it) and shutting the leader down both complete promptly.
func TestHarnessWaitForDownFollowerHoldsNothing(t *testing.T) {
	h := raftharness.Start(t, raftharness.Config{Nodes: 3})
	leader, err := h.Leader(0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f := follower(h, leader)
	raftharness.Apply(t, h, 5)
	raftharness.WaitApplied(t, h, 0, 5, 0, 1, 2)
	h.Disconnect(f)
	others := []int{}
	for i := range h.Nodes() {
		if i != f {
			others = append(others, i)
		}
	}
	for i := 0; i < 20; i++ {
		raftharness.ApplyToLeader(t, h, 0, []byte("during"), others...)
		time.Sleep(20 * time.Millisecond)
	}
	leader, err = h.Leader(0, 5*time.Second, others...)
	if err != nil {
		t.Fatal(err)
	}
	r := h.Raft(leader, 0)
	start := time.Now()
	if err := r.RemoveServer(h.Server(f).ID, 0, 10*time.Second).Error(); err != nil {
		t.Fatalf("remove the follower that is down: %v", err)
	}
	// The configuration entry commits at once (two voters left, both up);
	// what could wait is raft's main loop stopping the removed peer's
	// replication goroutine, parked in the transport.
	if err := r.Apply([]byte("after"), 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("removing a follower that is down and the next entry took %v", took)
	}
	// A leader whose AppendEntries to a down peer wait shuts down at once.
	h.Heal()
	third := -1
	for _, i := range others {
		if i != leader {
			third = i
		}
	}
	h.Disconnect(third)
	for i := 0; i < 5; i++ {
		r.Apply([]byte("alone"), 100*time.Millisecond) // cannot commit: waits on the way
	}
	// Until an AppendEntries to it is waiting in the transport.
	testwait.For(t, 5*time.Second, func() bool {
		return h.Mux(leader).WaitersFor(h.Server(third).Address) > 0
	}, "an AppendEntries waiting for the disconnected follower")
	start = time.Now()
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("shutting down a leader whose follower is down took %v", took)
	}
	if r.State() != raft.Shutdown {
		t.Fatalf("state %v after Shutdown", r.State())
	}
}
