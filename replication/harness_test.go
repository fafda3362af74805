package replication

import (
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/internal/testwait"
)

// fastTiming makes elections take tens of milliseconds in tests.
var fastTiming = raftTiming{Heartbeat: 200 * time.Millisecond, Election: 200 * time.Millisecond, Commit: 10 * time.Millisecond, Lease: 200 * time.Millisecond}

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
	var node, got int
	if !testwait.Until(5*time.Second, func() bool {
		for _, node = range nodes {
			if got = h.nodes[node].fsms[g].(*countFSM).count(); got < n {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("node %d applied %d entries, want %d", node, got, n)
	}
}

// apply applies n entries to group 0 through its leader among the nodes
// listed (all when none). A retried entry may be applied twice (its first
// try can commit after reporting lost leadership), so tests count with
// "at least".
func apply(t *testing.T, h *harness, n int, among ...int) {
	t.Helper()
	for i := 0; i < n; i++ {
		applyToLeader(t, h, 0, []byte("entry-"+strconv.Itoa(i)), among...)
	}
}

// sameCounts waits until the listed nodes' group-0 FSMs agree.
func sameCounts(t *testing.T, h *harness, nodes ...int) {
	t.Helper()
	testwait.For(t, 5*time.Second, func() bool {
		c0 := h.nodes[nodes[0]].fsms[0].(*countFSM).count()
		for _, i := range nodes[1:] {
			if h.nodes[i].fsms[0].(*countFSM).count() != c0 {
				return false
			}
		}
		return true
	}, "replicas applied different numbers of entries")
}

// applyToLeader applies data on group g's leader, finding it again if
// leadership moves meanwhile (bounded).
func applyToLeader(t *testing.T, h *harness, g int, data []byte, among ...int) {
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

// Raft §5.2-5.3 over the Mux: a leader is elected and its entries reach
// every follower's state machine.
func TestHarnessElectsAndReplicates(t *testing.T) {
	h := newTestHarness(t, harnessConfig{Nodes: 3})
	apply(t, h, 20)
	waitApplied(t, h, 0, 20, 0, 1, 2)
	sameCounts(t, h, 0, 1, 2)
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
	apply(t, h, 5, old)
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
	apply(t, h, 5, rest...)
	waitApplied(t, h, 0, 10, rest...)

	h.Heal()
	waitApplied(t, h, 0, 10, old)
	if _, err := h.Leader(0, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The isolated leader's uncommitted entry was replaced (Raft's log
	// matching): every node holds the same committed entries, without it.
	sameCounts(t, h, 0, 1, 2)
	for i := 0; i < 3; i++ {
		if h.nodes[i].fsms[0].(*countFSM).has("lost") {
			t.Fatalf("node %d applied the isolated leader's uncommitted entry", i)
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
	apply(t, h, 3, 2, 3, 4)
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
	sameCounts(t, h, 0, 1, 2, 3, 4)
}

// Many groups share each node's one Mux; each elects and replicates.
func TestHarnessManyGroupsOverOneMux(t *testing.T) {
	const groups = 30
	// Slower than fastTiming: 90 raft instances on a shared 2-core machine
	// (under -race) must not lose leaderships to scheduling delays.
	slow := raftTiming{Heartbeat: 500 * time.Millisecond, Election: 500 * time.Millisecond, Commit: 50 * time.Millisecond, Lease: 500 * time.Millisecond}
	h := newTestHarness(t, harnessConfig{Nodes: 3, Groups: groups, Timing: slow})
	for g := 0; g < groups; g++ {
		for i := 0; i < 2; i++ {
			applyToLeader(t, h, g, []byte("x"))
		}
	}
	for g := 0; g < groups; g++ {
		waitApplied(t, h, g, 2, 0, 1, 2)
	}
}

// A burst of entries larger than one AppendEntries (MaxAppendEntries)
// reaches every follower without waiting for raft's idle CommitTimeout:
// hashicorp/raft's pipeline sends at most MaxAppendEntries per trigger
// (a new entry) and otherwise only every CommitTimeout, so a backlog left
// at the end of a burst drained one AppendEntries per 2.5-5 s (a follower
// back from an outage took minutes; acks=all produce stalled). The Mux
// asks raft for another round while a follower is behind
// (transport_catchup.go).
func TestHarnessBurstReachesFollowersPromptly(t *testing.T) {
	h := newTestHarness(t, harnessConfig{Nodes: 3, Timing: partitionTiming})
	leader, err := h.Leader(0, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := h.Raft(leader, 0)
	const n = 64 * 40
	start := time.Now()
	futures := make([]raft.ApplyFuture, 0, n)
	for i := 0; i < n; i++ {
		futures = append(futures, r.Apply([]byte("burst-"+strconv.Itoa(i)), 30*time.Second))
	}
	for _, f := range futures {
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
	}
	committed := time.Since(start)
	want := r.LastIndex()
	behind := 0
	if !testwait.Until(30*time.Second, func() bool {
		behind = 0
		for i := range h.nodes {
			if h.Raft(i, 0).LastIndex() < want {
				behind++
			}
		}
		return behind == 0
	}) {
		t.Fatalf("%d followers still behind index %d 30 s after the burst", behind, want)
	}
	// Far below CommitTimeout per MaxAppendEntries (40 rounds of
	// 2.5-5 s); generous for a loaded machine.
	if all := time.Since(start); all > 8*time.Second {
		t.Fatalf("%d entries committed after %v, on every follower after %v (%d catch-up barriers)", n, committed, all, h.nodes[leader].mux.catchUpPokes.Load())
	}
	t.Logf("%d entries committed after %v, on every follower after %v (%d catch-up barriers)", n, committed, time.Since(start), h.nodes[leader].mux.catchUpPokes.Load())
}
