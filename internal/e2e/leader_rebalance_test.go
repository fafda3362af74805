package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-io/strata/internal/testwait"
)

// TestLeaderRebalanceAfterRollingRestart: three brokers as real processes,
// a topic whose preferred leaders (first replicas) are spread over them,
// and a rolling restart (SIGTERM, start again, wait until every partition
// is fully replicated, next broker). The broker restarted last comes back
// leading nothing, since raft keeps a live leader; with
// auto.leader.rebalance.enable (on by default) and the check interval
// lowered to 1 s, the controller gives every leadership back to its
// preferred replica. Without the rebalance (auto.leader.rebalance.enable
// =false) the test fails: broker 3 keeps no leadership.
func TestLeaderRebalanceAfterRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test (real processes); skipped with -short")
	}
	const topic, parts = "rebalance", 12
	c := startChaosCluster(t, 3, 500*time.Millisecond,
		"--set", "leader.imbalance.check.interval.seconds=1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.client())
	if _, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	c.waitLeaders(ctx, adm, topic, parts, 60*time.Second)

	// replicas returns each partition's replicas and ISR as the cluster
	// reports them.
	replicas := func() (map[int32][]int32, map[int32][]int32, error) {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return nil, nil, err
		}
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil {
			return nil, nil, fmt.Errorf("topic %s: %v", topic, td.Err)
		}
		rs, isr := map[int32][]int32{}, map[int32][]int32{}
		for p, pd := range td.Partitions {
			rs[p], isr[p] = pd.Replicas, pd.ISR
		}
		return rs, isr, nil
	}
	pref, _, err := replicas()
	if err != nil {
		t.Fatal(err)
	}
	preferredOf := map[int32]int{}
	for _, rs := range pref {
		preferredOf[rs[0]]++
	}
	if len(preferredOf) != 3 {
		t.Fatalf("preferred leaders not spread over the three brokers: %v", pref)
	}
	fullyReplicated := func() bool {
		_, isr, err := replicas()
		if err != nil || len(isr) != parts {
			return false
		}
		for _, in := range isr {
			if len(in) != 3 {
				return false
			}
		}
		return true
	}

	for _, n := range c.nodes {
		n.mu.Lock()
		cmd, done := n.cmd, n.done
		n.cmd = nil
		n.mu.Unlock()
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("broker %d did not stop within 60s of SIGTERM", n.id)
		}
		n.start()
		n.waitReady(60 * time.Second)
		c.waitLeaders(ctx, adm, topic, parts, 60*time.Second)
		testwait.For(t, 60*time.Second, fullyReplicated, "every partition of %s back to 3 in-sync replicas after broker %d restarted", topic, n.id)
	}

	// Every leadership goes back to its preferred replica.
	var last string
	balanced := func() bool {
		ls, err := c.partitionLeaders(ctx, adm, topic)
		if err != nil || len(ls) != parts {
			last = fmt.Sprint(ls, err)
			return false
		}
		var off []string
		for p, le := range ls {
			if le[0] != pref[p][0] {
				off = append(off, fmt.Sprintf("p%d led by %d, preferred %d", p, le[0], pref[p][0]))
			}
		}
		sort.Strings(off)
		last = strings.Join(off, "; ")
		return len(off) == 0
	}
	if !testwait.Until(60*time.Second, balanced) {
		t.Fatalf("leaders not back on their preferred replicas within 60s of the rolling restart: %s\nrebalance log:\n%s",
			last, c.grepLogs(20, "leader rebalance"))
	}
	if got := c.grepLogs(5, "leader rebalance"); got == "" {
		t.Fatalf("leaders balanced, but no broker logged a leader rebalance")
	} else {
		t.Logf("rebalance log:\n%s", got)
	}
}
