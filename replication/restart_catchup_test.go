package replication

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/log"
)

// A broker back from a long outage serves only once its metadata has
// caught up with the controller's as of its start, and it catches up
// promptly, its metadata and a partition it follows alike, although the
// leaders failed to reach it for the whole outage (issue 15, point 6;
// doc.go, "Catch-up"). Before: NewBroker returned with the image it had
// before the outage (a fraction of the commands), and raft's backoff
// (10.24 s between attempts after about 20 s of failures) delayed the
// catch-up by up to 10 s.
func TestRestartedBrokerCatchesUpAfterLongOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("a 25 s outage: not in -short")
	}
	outage := 25 * time.Second
	if s := os.Getenv("STRATA_OUTAGE_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		outage = time.Duration(n) * time.Second
	}
	ctx := context.Background()
	q := newTestQuorum(t)
	ctl := q.controller()
	const topic = "outage"
	if _, err := q.brokers[ctl].CreateTopic(ctx, CreateTopicRequest{Name: topic, NumPartitions: 1, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	lead, _ := q.leaderOf(ctl, topic, 0)
	// The victim follows the partition and the metadata group.
	victim := (ctl + 1) % 3
	if victim == lead {
		victim = (ctl + 2) % 3
	}
	if victim == lead {
		victim = (lead + 1) % 3
	}
	testwait.For(t, 5*time.Second, func() bool { return len(q.brokers[victim].Brokers()) == 3 }, "three registered brokers")
	q.produceTo(topic, 0, batch(1, -1, -1, -1))
	if err := q.brokers[victim].Close(); err != nil {
		t.Fatal(err)
	}
	q.brokers[victim] = nil
	// While the victim is away the others commit metadata (a config change
	// every 100 ms, through whichever live broker) and batches.
	writes := 0
	write := func() {
		t.Helper()
		writes++
		var err error
		if !testwait.UntilEvery(5*time.Second, 100*time.Millisecond, func() bool {
			for _, b := range q.brokers {
				if b == nil {
					continue
				}
				if err = b.SetBrokerConfigs(ctx, "", map[string]string{"log.retention.ms": strconv.Itoa(3600000 + writes)}, false); err == nil {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("write %d: %v", writes, err)
		}
	}
	for end := time.Now().Add(outage); time.Now().Before(end); {
		write()
		q.produceTo(topic, 0, batch(1, -1, -1, -1))
		time.Sleep(100 * time.Millisecond)
	}
	// image.applied counts the same on every broker at the same place in
	// the log.
	ctl = q.controller()
	target := q.brokers[ctl].img.Load().applied
	lead, _ = q.leaderOf(ctl, topic, 0)
	logEnd := q.brokers[lead].logs.Get(log.TopicPartition{Topic: topic, Partition: 0}).Offsets().LogEnd

	started := time.Now()
	if err := q.start(victim); err != nil {
		t.Fatal(err)
	}
	startTook := time.Since(started)
	b := q.brokers[victim]
	atStart := b.img.Load().applied
	// Timed to the millisecond; the bounds below fail the test.
	testwait.UntilEvery(30*time.Second, time.Millisecond, func() bool { return b.img.Load().applied >= target })
	metaTook := time.Since(started)
	var replicaEnd int64
	testwait.UntilEvery(30*time.Second-time.Since(started), time.Millisecond, func() bool {
		lp := b.logs.Get(log.TopicPartition{Topic: topic, Partition: 0})
		if lp == nil {
			return false
		}
		replicaEnd = lp.Offsets().LogEnd
		return replicaEnd >= logEnd
	})
	partTook := time.Since(started)
	t.Logf("outage %v, %d metadata writes, %d batches; restart took %v; %d metadata commands applied at start, %d on the controller before the restart; metadata caught up after %v, the partition (%d of %d) after %v",
		outage, writes, logEnd, startTook.Round(time.Millisecond), atStart, target, metaTook.Round(time.Millisecond),
		replicaEnd, logEnd, partTook.Round(time.Millisecond))
	if atStart < target {
		t.Errorf("the restarted broker started with %d metadata commands applied; the controller had applied %d before the restart", atStart, target)
	}
	if metaTook > 2*time.Second {
		t.Errorf("the restarted broker's metadata caught up %v after its restart, want within 2s", metaTook)
	}
	if partTook > 4*time.Second {
		t.Errorf("the restarted broker's replica caught up %v after its restart, want within 4s", partTook)
	}
}
