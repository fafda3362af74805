package protocol

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/groupconfig"
	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/replication"
)

// TestShareDLQCrashBetweenWriteAndDone: a leader that dies after its
// dead-letter write was acknowledged and before it recorded the letters
// done leaves them waiting; the next leader writes none of them twice,
// whether it asks the dead-letter partition for the producer's last
// sequence first (a new leader epoch: DescribeProducers) or rewrites them
// blindly (the partition's producer state drops the duplicate batch).
func TestShareDLQCrashBetweenWriteAndDone(t *testing.T) {
	c := newShareCluster(t, groupconfig.Broker{ShareRecordLockDuration: 5 * time.Second, ShareMinRecordLockDuration: time.Second}, "g")
	c.createTopic("jobs", 1)
	if _, err := c.b.CreateTopic(testCtx(t), replication.CreateTopicRequest{Name: "dlq.jobs", NumPartitions: 1, ReplicationFactor: 1,
		Configs: map[string]string{"errors.deadletterqueue.group.enable": "true"}}); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "g"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "errors.deadletterqueue.topic.name", kmsg.StringPtr("dlq.jobs")
	r.Configs = append(r.Configs, cfg)
	req.Resources = append(req.Resources, r)
	if resp, err := req.RequestWith(testCtx(t), c.client()); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("group config: %v %+v", err, resp)
	}
	cl := c.client()
	for i := range 10 {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "jobs", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	info, _ := c.b.Topic("jobs")
	w := c.s.share.dlq
	var mu sync.Mutex
	crashes, mode := 0, ""
	errCrash := errors.New("leader died between the write and DeadDone")
	w.mu.Lock()
	w.afterWrite = func() error {
		mu.Lock()
		defer mu.Unlock()
		if crashes >= 2 {
			return nil
		}
		crashes++
		if mode == "new-epoch" {
			// The next flush acts as a new leader's first.
			w.synced = map[shareKey]int32{}
		}
		return errCrash
	}
	w.mu.Unlock()
	waitCrashes := func(n int) {
		t.Helper()
		got := 0
		if !testwait.Until(20*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			got = crashes
			return got >= n
		}) {
			t.Fatalf("%d crashes after the write, want %d", got, n)
		}
	}
	a := &shareClient{t: t, cl: c.client(), group: "g", member: "a", topicID: info.ID}
	if got, _, _ := acquiredOf(t, a.fetch(10, 0)); got != "0-9#1" {
		t.Fatalf("acquired %q", got)
	}
	// 1. A new leader (new epoch) asks the dead-letter partition first.
	mu.Lock()
	mode = "new-epoch"
	mu.Unlock()
	if r := a.ack(a.epoch, ackSpec{0, 1, []int8{3}}, ackSpec{2, 4, []int8{1}}); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("reject 0-1: %+v", r)
	}
	waitCrashes(1)
	// 2. The same leader epoch rewrites blindly.
	waitLetters(t, c, 0) // the first two recorded done, by DescribeProducers
	mu.Lock()
	mode = "same-epoch"
	mu.Unlock()
	if r := a.ack(a.epoch, ackSpec{5, 6, []int8{3}}, ackSpec{7, 9, []int8{1}}); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("reject 5-6: %+v", r)
	}
	waitCrashes(2)
	waitLetters(t, c, 0)
	// The dead-letter topic holds 0, 1, 5, 6 once each.
	rd := c.client(kgo.ConsumeTopics("dlq.jobs"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	seen := map[string]int{}
	deadline := time.Now().Add(10 * time.Second)
	total := 0
	for time.Now().Before(deadline) && total < 4 {
		fs := rd.PollFetches(testCtx(t))
		fs.EachRecord(func(r *kgo.Record) {
			total++
			for _, h := range r.Headers {
				if h.Key == "__dlq.errors.offset" {
					seen[string(h.Value)]++
				}
			}
		})
	}
	// Anything more would have arrived with the rest: one more short poll.
	if end := endOffset(t, c, "dlq.jobs"); end != 4 || total != 4 {
		t.Fatalf("dead-letter topic: end offset %d, read %d, want 4 and 4: %v", end, total, seen)
	}
	for _, off := range []int{0, 1, 5, 6} {
		if seen[strconv.Itoa(off)] != 1 {
			t.Errorf("offset %d dead-lettered %d times", off, seen[strconv.Itoa(off)])
		}
	}
	// The first two were found written by DescribeProducers; the rewrite
	// of the other two was answered as a success with the first write's
	// offsets (a duplicate batch, as Kafka answers it): the end offset
	// above shows it was not appended again.
	if d := w.duplicates.Load(); d != 2 {
		t.Errorf("%d letters found already written by DescribeProducers, want 2", d)
	}
}

// waitLetters waits until n dead letters wait on jobs-0 for g.
func waitLetters(t *testing.T, c *testCluster, n int) {
	t.Helper()
	got := -1
	if !testwait.Until(20*time.Second, func() bool {
		reg, err := c.b.ShareRegistry("jobs", 0)
		if err != nil {
			t.Fatal(err)
		}
		got = reg.DeadWaiting()["g"]
		return got == n
	}) {
		t.Fatalf("%d dead letters waiting, want %d", got, n)
	}
}

func endOffset(t *testing.T, c *testCluster, topic string) int64 {
	t.Helper()
	lp, err := c.b.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return lp.Offsets().HighWatermark
}
