package raftharness

import (
	"strconv"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/replication/raftconf"
)

// What tests do with a harness: start one, apply entries through the
// leader, wait for the replicas' CountFSMs.

// FastTiming makes elections take tens of milliseconds in tests.
var FastTiming = raftconf.Timing{Heartbeat: 200 * time.Millisecond, Election: 200 * time.Millisecond, Commit: 10 * time.Millisecond, Lease: 200 * time.Millisecond}

// Start starts a harness (FastTiming unless cfg says otherwise) closed at
// the end of the test.
func Start(t testing.TB, cfg Config) *Harness {
	t.Helper()
	if cfg.Timing == (raftconf.Timing{}) {
		cfg.Timing = FastTiming
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// WaitApplied waits until every listed node's group-g countFSM has
// applied at least n entries.
func WaitApplied(t testing.TB, h *Harness, g, n int, nodes ...int) {
	t.Helper()
	var node, got int
	if !testwait.Until(5*time.Second, func() bool {
		for _, node = range nodes {
			if got = h.FSM(node, g).(*CountFSM).Count(); got < n {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("node %d applied %d entries, want %d", node, got, n)
	}
}

// Apply applies n entries to group 0 through its leader among the nodes
// listed (all when none). A retried entry may be applied twice (its first
// try can commit after reporting lost leadership), so tests count with
// "at least".
func Apply(t testing.TB, h *Harness, n int, among ...int) {
	t.Helper()
	for i := 0; i < n; i++ {
		ApplyToLeader(t, h, 0, []byte("entry-"+strconv.Itoa(i)), among...)
	}
}

// SameCounts waits until the listed nodes' group-0 FSMs agree.
func SameCounts(t testing.TB, h *Harness, nodes ...int) {
	t.Helper()
	testwait.For(t, 5*time.Second, func() bool {
		c0 := h.FSM(nodes[0], 0).(*CountFSM).Count()
		for _, i := range nodes[1:] {
			if h.FSM(i, 0).(*CountFSM).Count() != c0 {
				return false
			}
		}
		return true
	}, "replicas applied different numbers of entries")
}

// ApplyToLeader applies data on group g's leader, finding it again if
// leadership moves meanwhile (bounded).
func ApplyToLeader(t testing.TB, h *Harness, g int, data []byte, among ...int) {
	t.Helper()
	var err error
	for try := 0; try < 10; try++ {
		var leader int
		if leader, err = h.Leader(g, 10*time.Second, among...); err != nil {
			continue
		}
		if err = h.Raft(leader, g).Apply(data, 2*time.Second).Error(); err == nil {
			return
		}
	}
	t.Fatalf("group %d: %v", g, err)
}
