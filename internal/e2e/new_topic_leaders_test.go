package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// TestNewTopicLeadersAreNeverPlaceholders: while a topic is created on a
// three-broker cluster and for a while after, every broker's Metadata
// answer for each new partition is either LEADER_NOT_AVAILABLE or an
// elected leader (epoch 1 or more) -- never the placeholder the metadata
// holds until the partition's first election is recorded (first replica,
// epoch 0). A broker's copy of the metadata trails the controller's by up
// to the metadata group's commit interval, and a client that took the
// placeholder was fenced by the elected epoch and stopped fetching that
// partition for franz-go's metadata min age (the bench's e2e at RF 3
// showed 3-second stalls). Once created, all brokers agree on each
// partition's leader and epoch.
func TestNewTopicLeadersAreNeverPlaceholders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := readyQuorum(t, ctx, 3)

	const topic, partitions = "fresh", 8
	type view struct {
		leader, epoch int32
	}
	var (
		mu      sync.Mutex
		bad     []string
		answers int
		last    = map[int32]map[int32]view{} // broker -> partition -> view
		allAt   = map[int32]time.Time{}      // broker -> when it first showed every partition elected
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for node := int32(1); node <= 3; node++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req := kmsg.NewPtrMetadataRequest()
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(topic)
				req.Topics = append(req.Topics, rt)
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				resp, err := req.RequestWith(rctx, cl.Broker(int(node)))
				rcancel()
				if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
					time.Sleep(time.Millisecond)
					continue // not created here yet
				}
				mu.Lock()
				answers++
				for _, p := range resp.Topics[0].Partitions {
					switch {
					case p.ErrorCode == kerr.LeaderNotAvailable.Code:
					case p.ErrorCode != 0:
						bad = append(bad, fmt.Sprintf("broker %d: partition %d: %v", node, p.Partition, kerr.ErrorForCode(p.ErrorCode)))
					case p.Leader < 1 || p.LeaderEpoch < 1:
						bad = append(bad, fmt.Sprintf("broker %d: partition %d led by %d at epoch %d", node, p.Partition, p.Leader, p.LeaderEpoch))
					default:
						if last[node] == nil {
							last[node] = map[int32]view{}
						}
						last[node][p.Partition] = view{p.Leader, p.LeaderEpoch}
					}
				}
				if _, ok := allAt[node]; !ok && len(last[node]) == partitions {
					allAt[node] = time.Now()
				}
				mu.Unlock()
			}
		}()
	}
	resp, err := adm.CreateTopic(ctx, partitions, 3, nil, topic)
	created := time.Now()
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("create: %v", err)
	}
	// Keep asking past the metadata group's commit interval (100-200 ms),
	// until every broker shows every partition elected.
	// Checked below, partition by partition.
	testwait.Until(10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		done := len(last) == 3
		for _, m := range last {
			done = done && len(m) == partitions
		}
		return done
	})
	time.Sleep(200 * time.Millisecond) // the probes go on a moment past it: a bad answer then fails too
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d bad partitions in %d answers, first: %s", len(bad), answers, bad[0])
	}
	for p := int32(0); p < partitions; p++ {
		v1, ok := last[1][p]
		if !ok {
			t.Fatalf("broker 1 never showed partition %d elected (%d answers)", p, answers)
		}
		for node := int32(2); node <= 3; node++ {
			if v := last[node][p]; v != v1 {
				t.Errorf("partition %d: broker %d shows leader %d epoch %d, broker 1 %d %d", p, node, v.leader, v.epoch, v1.leader, v1.epoch)
			}
		}
	}
	var lag time.Duration
	for _, at := range allAt {
		lag = max(lag, at.Sub(created))
	}
	// How long after CreateTopics answered the last broker showed every
	// partition's leader (measured, not asserted).
	t.Logf("%d Metadata answers checked; every broker showed every leader %v after CreateTopics answered", answers, lag.Round(time.Millisecond))
}

// readyQuorum starts an n-broker quorum and returns a client seeded with
// every broker once the cluster can create a topic ("warmup", one
// partition on n replicas). The client closes with the test.
func readyQuorum(t *testing.T, ctx context.Context, n int) (*kgo.Client, *kadm.Client) {
	t.Helper()
	bs := startQuorum(t, n)
	var addrs []string
	for _, b := range bs {
		addrs = append(addrs, b.addr)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	var resp kadm.CreateTopicResponse
	if !testwait.Until(40*time.Second, func() bool {
		resp, err = adm.CreateTopic(ctx, 1, int16(n), nil, "warmup")
		return err == nil && resp.Err == nil
	}) {
		t.Fatalf("create warmup: %v %v", err, resp.Err)
	}
	return cl, adm
}
