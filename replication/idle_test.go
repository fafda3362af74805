package replication

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/replication/internal/raftharness"
	"github.com/strata-io/strata/replication/raftconf"
)

// TestIdleCostOfManyGroups measures the CPU an idle cluster of 3 nodes
// spends on N groups (each on all 3 nodes, partitionTiming) over one Mux
// per node, all in this process. Opt-in (it runs for ~30 s):
//
//	STRATA_IDLE_GROUPS=1000 go test ./replication/ -run IdleCost -v
//
// STRATA_IDLE_HEARTBEAT=4s sets the heartbeat timeout as the broker
// setting strata.partition.heartbeat.timeout.ms does.
//
// The figure per broker is the process's CPU divided by 3.
func TestIdleCostOfManyGroups(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STRATA_IDLE_GROUPS"))
	if n <= 0 {
		t.Skip("set STRATA_IDLE_GROUPS=1000 to measure")
	}
	timing := raftconf.PartitionTiming
	if hb, err := time.ParseDuration(os.Getenv("STRATA_IDLE_HEARTBEAT")); err == nil {
		// As strata.partition.heartbeat.timeout.ms sets it (broker.go).
		timing = raftconf.PartitionTimingFor(hb)
	}
	h := raftharness.Start(t, raftharness.Config{Nodes: 3, Groups: n, Timing: timing})
	for g := 0; g < n; g++ {
		if _, err := h.Leader(g, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second) // let elections and first commits settle
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	const window = 10 * time.Second
	c0, w0 := cpu(), time.Now()
	time.Sleep(window)
	used, wall := cpu()-c0, time.Since(w0)
	perBroker := float64(used) / float64(wall) / 3 * 100
	t.Logf("%d groups x 3 replicas idle: %.1f%% of one core per broker (%v CPU in %v for 3 brokers)", n, perBroker, used, wall.Round(time.Millisecond))
}
