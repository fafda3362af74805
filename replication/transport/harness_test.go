package transport_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/replication/internal/raftharness"
	"github.com/strata-io/strata/replication/raftconf"
)

// Raft §5.2-5.3 over the Mux: a leader is elected and its entries reach
// every follower's state machine.
func TestHarnessElectsAndReplicates(t *testing.T) {
	h := raftharness.Start(t, raftharness.Config{Nodes: 3})
	raftharness.Apply(t, h, 20)
	raftharness.WaitApplied(t, h, 0, 20, 0, 1, 2)
	raftharness.SameCounts(t, h, 0, 1, 2)
}

// Raft §5.2, §8: a leader cut off from the majority cannot commit; the
// majority elects a new leader and goes on; after healing, the old leader
// follows and catches up.
func TestHarnessIsolatedLeaderIsReplaced(t *testing.T) {
	h := raftharness.Start(t, raftharness.Config{Nodes: 3})
	old, err := h.Leader(0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	raftharness.Apply(t, h, 5, old)
	raftharness.WaitApplied(t, h, 0, 5, 0, 1, 2)

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
	raftharness.Apply(t, h, 5, rest...)
	raftharness.WaitApplied(t, h, 0, 10, rest...)

	h.Heal()
	raftharness.WaitApplied(t, h, 0, 10, old)
	if _, err := h.Leader(0, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The isolated leader's uncommitted entry was replaced (Raft's log
	// matching): every node holds the same committed entries, without it.
	raftharness.SameCounts(t, h, 0, 1, 2)
	for i := 0; i < 3; i++ {
		if h.FSM(i, 0).(*raftharness.CountFSM).Has("lost") {
			t.Fatalf("node %d applied the isolated leader's uncommitted entry", i)
		}
	}
}

// A minority side of a partition elects nobody; the majority side serves.
func TestHarnessMinorityCannotElect(t *testing.T) {
	h := raftharness.Start(t, raftharness.Config{Nodes: 5})
	if _, err := h.Leader(0, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	h.Partition([]int{0, 1}, []int{2, 3, 4})
	raftharness.Apply(t, h, 3, 2, 3, 4)
	time.Sleep(300 * time.Millisecond)
	for _, i := range []int{0, 1} {
		if h.Raft(i, 0).State() == raft.Leader {
			if err := h.Raft(i, 0).Apply([]byte("x"), 200*time.Millisecond).Error(); err == nil {
				t.Fatalf("minority node %d committed", i)
			}
		}
	}
	h.Heal()
	raftharness.WaitApplied(t, h, 0, 3, 0, 1, 2, 3, 4)
	raftharness.SameCounts(t, h, 0, 1, 2, 3, 4)
}

// Many groups share each node's one Mux; each elects and replicates.
func TestHarnessManyGroupsOverOneMux(t *testing.T) {
	const groups = 30
	// Slower than raftharness.FastTiming: 90 raft instances on a shared 2-core machine
	// (under -race) must not lose leaderships to scheduling delays.
	slow := raftconf.Timing{Heartbeat: 500 * time.Millisecond, Election: 500 * time.Millisecond, Commit: 50 * time.Millisecond, Lease: 500 * time.Millisecond}
	h := raftharness.Start(t, raftharness.Config{Nodes: 3, Groups: groups, Timing: slow})
	for g := 0; g < groups; g++ {
		for i := 0; i < 2; i++ {
			raftharness.ApplyToLeader(t, h, g, []byte("x"))
		}
	}
	for g := 0; g < groups; g++ {
		raftharness.WaitApplied(t, h, g, 2, 0, 1, 2)
	}
}

// A burst of entries larger than one AppendEntries (MaxAppendEntries)
// reaches every follower without waiting for raft's idle CommitTimeout:
// hashicorp/raft's pipeline sends at most MaxAppendEntries per trigger
// (a new entry) and otherwise only every CommitTimeout, so a backlog left
// at the end of a burst drained one AppendEntries per 2.5-5 s (a follower
// back from an outage took minutes; acks=all produce stalled). The Mux
// asks raft for another round while a follower is behind
// (catchup.go).
func TestHarnessBurstReachesFollowersPromptly(t *testing.T) {
	h := raftharness.Start(t, raftharness.Config{Nodes: 3, Timing: raftconf.PartitionTiming})
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
		for i := range h.Nodes() {
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
		t.Fatalf("%d entries committed after %v, on every follower after %v (%d catch-up barriers)", n, committed, all, h.Mux(leader).Stats().CatchUpPokes)
	}
	t.Logf("%d entries committed after %v, on every follower after %v (%d catch-up barriers)", n, committed, time.Since(start), h.Mux(leader).Stats().CatchUpPokes)
}
