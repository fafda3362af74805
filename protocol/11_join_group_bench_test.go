package protocol

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkRebalance10 measures how long ten kgo consumers started at once
// take until every one of them has its partitions (a 20-partition topic),
// for the classic protocol (eager range, cooperative-sticky) and KIP-848.
// One op is one cold group of ten; the figure is ms/rebalance.
//
//	go test ./protocol -run '^$' -bench Rebalance10 -benchtime 5x
func BenchmarkRebalance10(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"classic-range", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}},
		{"classic-cooperative-sticky", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"kip848", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer()}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := newGroupCluster(b)
			c.createTopic("r", 20)
			var total time.Duration
			for i := 0; i < b.N; i++ {
				total += rebalanceOnce(b, c, fmt.Sprintf("g%d", i), tc.opts)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/rebalance")
		})
	}
}

func rebalanceOnce(b *testing.B, c *testCluster, group string, opts []kgo.Opt) time.Duration {
	const members = 10
	var mu sync.Mutex
	owned := map[int]int{} // member -> partitions held
	all := make(chan struct{})
	var once sync.Once
	check := func() {
		n, full := 0, true
		for m := 0; m < members; m++ {
			n += owned[m]
			if owned[m] == 0 {
				full = false
			}
		}
		if full && n == 20 {
			once.Do(func() { close(all) })
		}
	}
	start := time.Now()
	var clients []*kgo.Client
	for m := 0; m < members; m++ {
		m := m
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics("r"),
			kgo.HeartbeatInterval(100 * time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				mu.Lock()
				owned[m] += len(a["r"])
				check()
				mu.Unlock()
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
				mu.Lock()
				owned[m] -= len(r["r"])
				mu.Unlock()
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
				mu.Lock()
				owned[m] -= len(r["r"])
				mu.Unlock()
			}),
		}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, cl)
		go func() {
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				fs := cl.PollFetches(ctx)
				cancel()
				if fs.IsClientClosed() {
					return
				}
			}
		}()
	}
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		b.Fatalf("10 members never all got partitions: %v", owned)
	}
	d := time.Since(start)
	for _, cl := range clients {
		cl.Close()
	}
	return d
}

// BenchmarkOffsetCommitWire measures OffsetCommit round trips from one kgo
// client over 127.0.0.1 (one partition per commit, one commit in flight,
// the newest version, topics by ID): the latency a committing consumer sees.
//
//	go test ./protocol -run '^$' -bench OffsetCommitWire -benchtime 2s
func BenchmarkOffsetCommitWire(b *testing.B) {
	c := newGroupCluster(b)
	c.createTopic("w", 1)
	cl := c.client()
	ctx := context.Background()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = "wire", -1
	ti, _ := c.broker.Topic("w")
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "w", TopicID: ti.ID, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, LeaderEpoch: -1}}}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.Topics[0].Partitions[0].Offset = int64(i)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatalf("commit: %v %+v", err, resp)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}
