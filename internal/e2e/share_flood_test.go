package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestShareDLQFloodGuardClusterWide: the flood guard judges a share
// group's dead letters against its deliveries across the cluster, not per
// share-partition leader. On 3 brokers, a group on a 3-partition topic
// (leaders spread over the brokers) first accepts 20 records on each of
// partitions 1 and 2, then rejects 20 on partition 0: 20 letters of 60
// deliveries is below the ratio of 0.5, so the group is not paused
// (judged on partition 0's leader alone it was 20 of 20). Then 60 more
// rejected records (80 of 120) pause it.
func TestShareDLQFloodGuardClusterWide(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: skipped under -short")
	}
	c := startChaosCluster(t, 3, 2*time.Second, append(append([]string{}, shareSettings...),
		"--set", "metrics.listener=127.0.0.1:0", "--set", "strata.share.dlq.flood.ratio=0.5", "--set", "strata.share.dlq.flood.min.deliveries=10")...)
	st := shareTarget{seeds: c.bootstrap(), client: c.client, rf: 3}
	createShareTopic(t, st, "calls", 3)
	createDLQTopic(t, st, "dlq.calls", true)
	admCl := st.client()
	adm := kadm.NewClient(admCl)
	setGroupConfigs(t, admCl, "callers", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.calls")
	pcl := st.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(prefix string, partition int32, from, n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Topic: "calls", Partition: partition, Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
		}
		if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce("good", 1, 0, 20)
	produce("good", 2, 0, 20)
	ledger := newShareLedger()
	w := newShareWorker(t, "w", st.seeds, "callers", "calls", ledger)
	w.decide = func(r *kgo.Record) kgo.AckStatus {
		if strings.HasPrefix(string(r.Value), "bad") {
			return kgo.AckReject
		}
		return kgo.AckAccept
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.run(ctx)
	testwait.For(t, 60*time.Second, func() bool { _, confirmed := ledger.counts(); return confirmed == 40 },
		"the 40 good records accepted")
	produce("bad", 0, 0, 20)
	readDLQ(t, st.seeds, "dlq.calls", 20, 60*time.Second)
	describe := func() string {
		return run(t, 30*time.Second, "", strataBin, "share-group", "describe", "callers", "--bootstrap-server", st.seeds[0])
	}
	// The controller holds every broker's reports in its window: all 60
	// deliveries and 20 letters, and no pause waiting for its grace. (A
	// guard judging per leader would have paused on partition 0's 20 of
	// 20.)
	mons := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		mons[i] = chaosMetricsAddr(t, n)
	}
	deliveries := `strata_share_dlq_flood_window_deliveries{group="callers"}`
	letters := `strata_share_dlq_flood_window_letters{group="callers"}`
	judging := `strata_share_dlq_flood_judging{group="callers"}`
	testwait.For(t, 60*time.Second, func() bool {
		for _, a := range mons {
			if m := monScrape(t, a); m[deliveries] >= 60 && m[letters] >= 20 && m[judging] == 0 {
				return true
			}
		}
		return false
	}, "the controller's flood window holding the 60 deliveries and 20 dead letters, no pause pending")
	if out := describe(); strings.Contains(out, "PAUSED") {
		t.Fatalf("paused at 20 dead letters of 60 deliveries cluster-wide:\n%s", out)
	}
	produce("bad", 0, 20, 20)
	produce("bad", 1, 20, 20)
	produce("bad", 2, 20, 20)
	testwait.For(t, 60*time.Second, func() bool { return strings.Contains(describe(), "PAUSED by the dead-letter flood guard") },
		"the group paused at 80 dead letters of 120 deliveries")
	cancel()
	_ = adm
	ledger.check(t)
}

// chaosMetricsAddr is the metrics listener of n's latest run (its
// "metrics listener up" log line; metrics.listener=127.0.0.1:0).
func chaosMetricsAddr(t *testing.T, n *chaosNode) string {
	t.Helper()
	var addr string
	testwait.For(t, 30*time.Second, func() bool {
		raw, err := os.ReadFile(n.log)
		if err != nil {
			return false
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if !strings.Contains(line, "metrics listener up") {
				continue
			}
			for _, f := range strings.Fields(line) {
				if a, ok := strings.CutPrefix(f, "addr="); ok {
					addr = strings.Trim(a, `"`)
				}
			}
		}
		return addr != ""
	}, "broker %d's metrics listener up", n.id)
	return addr
}
