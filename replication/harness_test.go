package replication

import (
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fastTiming makes elections take tens of milliseconds in tests.
var fastTiming = raftTiming{Heartbeat: 100 * time.Millisecond, Election: 100 * time.Millisecond, Commit: 10 * time.Millisecond, Lease: 100 * time.Millisecond}

func newTestHarness(t *testing.T, cfg harnessConfig) *harness {
	t.Helper()
	if cfg.Timing == (raftTiming{}) {
		cfg.Timing = fastTiming
	}
	h, err := newHarness(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// waitApplied waits until every listed node's group-g countFSM has
// applied at least n entries.
func waitApplied(t *testing.T, h *harness, g, n int, nodes ...int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, i := range nodes {
		f := h.nodes[i].fsms[g].(*countFSM)
		for f.count() < n {
			if time.Now().After(deadline) {
				t.Fatalf("node %d applied %d entries, want %d", i, f.count(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func apply(t *testing.T, r *raft.Raft, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := r.Apply([]byte("entry-"+strconv.Itoa(i)), 2*time.Second).Error(); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
	}
}

// Raft §5.2-5.3 over the Mux: a leader is elected and its entries reach
// every follower's state machine.
func TestHarnessElectsAndReplicates(t *testing.T) {
	h := newTestHarness(t, harnessConfig{Nodes: 3})
	leader, err := h.Leader(0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, h.Raft(leader, 0), 20)
	// +1: the bootstrap configuration entry is not an FSM command, but
	// nothing else is; every node applies the same 20.
	waitApplied(t, h, 0, 20, 0, 1, 2)
}

// Raft §5.2, §8: a leader cut off from the majority cannot commit; the
// majority elects a new leader and goes on; after healing, the old leader
// follows and catches up.
func TestHarnessIsolatedLeaderIsReplaced(t *testing.T) {
	h := newTestHarness(t, harnessConfig{Nodes: 3})
	old, err := h.Leader(0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, h.Raft(old, 0), 5)
	waitApplied(t, h, 0, 5, 0, 1, 2)

	h.Disconnect(old)
	rest := []int{}
	for i := 0; i < 3; i++ {
		if i != old {
			rest = append(rest, i)
		}
	}
	if err := h.Raft(old, 0).Apply([]byte("lost"), 500*time.Millisecond).Error(); err == nil {
		t.Fatal("an isolated leader committed an entry")
	}
	leader, err := h.Leader(0, 5*time.Second, rest...)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, h.Raft(leader, 0), 5)
	waitApplied(t, h, 0, 10, rest...)

	h.Heal()
	waitApplied(t, h, 0, 10, old)
	if _, err := h.Leader(0, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The isolated leader's uncommitted entry was replaced (Raft's log
	// matching): every node holds exactly the 10 committed entries.
	time.Sleep(100 * time.Millisecond)
	for i := 0; i < 3; i++ {
		if c := h.nodes[i].fsms[0].(*countFSM).count(); c != 10 {
			t.Fatalf("node %d applied %d entries, want 10", i, c)
		}
	}
}

// A minority side of a partition elects nobody; the majority side serves.
func TestHarnessMinorityCannotElect(t *testing.T) {
	h := newTestHarness(t, harnessConfig{Nodes: 5})
	if _, err := h.Leader(0, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	h.Partition([]int{0, 1}, []int{2, 3, 4})
	leader, err := h.Leader(0, 5*time.Second, 2, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, h.Raft(leader, 0), 3)
	time.Sleep(300 * time.Millisecond)
	for _, i := range []int{0, 1} {
		if h.Raft(i, 0).State() == raft.Leader {
			if err := h.Raft(i, 0).Apply([]byte("x"), 200*time.Millisecond).Error(); err == nil {
				t.Fatalf("minority node %d committed", i)
			}
		}
	}
	h.Heal()
	waitApplied(t, h, 0, 3, 0, 1, 2, 3, 4)
}

// Many groups share each node's one Mux; each elects and replicates.
func TestHarnessManyGroupsOverOneMux(t *testing.T) {
	const groups = 30
	h := newTestHarness(t, harnessConfig{Nodes: 3, Groups: groups})
	for g := 0; g < groups; g++ {
		leader, err := h.Leader(g, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		apply(t, h.Raft(leader, g), 2)
	}
	for g := 0; g < groups; g++ {
		waitApplied(t, h, g, 2, 0, 1, 2)
	}
}
