package e2e

import (
	"context"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// churnRecords is how many records the churn test produces (the issue's
// 500,000 by default; STRATA_E2E_GROUP_RECORDS overrides it).
func churnRecords() int {
	if v, err := strconv.Atoi(os.Getenv("STRATA_E2E_GROUP_RECORDS")); err == nil && v > 0 {
		return v
	}
	return 500000
}

// Six consumers of one group join and leave at random (each runs for a
// random 0.3-1.5 s, at most four at once, the last two stay to the end)
// while records are produced. Every record is consumed; duplicates come
// only from windows a member read but had not committed when it lost the
// partition (leavers commit what they read first, so a clean leave adds
// none), and are counted. Eager range, cooperative-sticky and KIP-848.
func TestGroupConsumersChurn(t *testing.T) {
	total := churnRecords()
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"range", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}},
		{"cooperative-sticky", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"kip848", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, "", groupArgs...)
			createTopic(t, b, "churn", 6)
			rng := rand.New(rand.NewSource(testwait.Seed(t)))
			// Offsets are 0..n-1 per partition; a bitmap per partition
			// counts what was seen.
			var mu sync.Mutex
			seen := map[int32]map[int64]uint8{}
			got, dups := 0, 0
			done := make(chan struct{})
			var doneOnce sync.Once
			produced := make(chan struct{})

			// The first member never commits (auto-commit off, no commit
			// on leave): what it read is the uncommitted window that may
			// be delivered again.
			uncommitted := 0
			consumer := func(run time.Duration, neverCommit bool, wg *sync.WaitGroup) {
				defer wg.Done()
				opts := append([]kgo.Opt{kgo.SeedBrokers(b.addr), kgo.ConsumerGroup("churn"), kgo.ConsumeTopics("churn"),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.HeartbeatInterval(100 * time.Millisecond),
					kgo.FetchMaxWait(100 * time.Millisecond), kgo.SessionTimeout(6 * time.Second)}, tc.opts...)
				if neverCommit {
					opts = append(opts, kgo.DisableAutoCommit())
				} else {
					// Commit what was read before giving a partition up,
					// so the other members leave no uncommitted window.
					opts = append(opts, kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
						cl.CommitUncommittedOffsets(ctx)
					}))
				}
				cl, err := kgo.NewClient(opts...)
				if err != nil {
					t.Error(err)
					return
				}
				stop := time.After(run)
				defer func() {
					if !neverCommit {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						cl.CommitUncommittedOffsets(ctx)
					}
					cl.Close()
				}()
				for {
					select {
					case <-done:
						return
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
					fs := cl.PollFetches(ctx)
					cancel()
					mu.Lock()
					fs.EachRecord(func(r *kgo.Record) {
						if neverCommit {
							uncommitted++
						}
						m := seen[r.Partition]
						if m == nil {
							m = map[int64]uint8{}
							seen[r.Partition] = m
						}
						if m[r.Offset] > 0 {
							dups++
						} else {
							got++
						}
						m[r.Offset]++
					})
					if got == total {
						doneOnce.Do(func() { close(done) })
					}
					mu.Unlock()
				}
			}

			start := time.Now()
			var wg sync.WaitGroup
			go func() {
				defer close(produced)
				prod := b.client(kgo.DefaultProduceTopic("churn"), kgo.ProducerLinger(5*time.Millisecond))
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				val := []byte("0123456789")
				// Paced over about three seconds, so that members come and
				// go while records arrive.
				for i := 0; i < total; i++ {
					if i%(total/30+1) == 0 {
						time.Sleep(100 * time.Millisecond)
					}
					prod.Produce(ctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
						if err != nil {
							t.Errorf("produce: %v", err)
						}
					})
				}
				if err := prod.Flush(ctx); err != nil {
					t.Errorf("flush: %v", err)
				}
			}()
			// Four churners with random lifetimes, then two stayers.
			sem := make(chan struct{}, 4)
			for i := 0; i < 6; i++ {
				run := 300*time.Millisecond + time.Duration(rng.Int63n(int64(1200*time.Millisecond)))
				if i >= 4 {
					run = 2 * time.Minute
				}
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() { <-sem }()
					consumer(run, i == 0, &wg)
				}()
				time.Sleep(time.Duration(rng.Int63n(int64(400 * time.Millisecond))))
			}
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
				mu.Lock()
				g := got
				mu.Unlock()
				doneOnce.Do(func() { close(done) })
				wg.Wait()
				t.Fatalf("consumed %d of %d", g, total)
			}
			<-produced
			wg.Wait()
			t.Logf("%s: %d records consumed in %v, %d duplicate deliveries (%.2f%%), uncommitted window %d", tc.name, got, time.Since(start).Round(time.Millisecond), dups, 100*float64(dups)/float64(total), uncommitted)
			if dups > uncommitted {
				t.Errorf("%d duplicates, more than the %d records read without a commit", dups, uncommitted)
			}
			if n := committedSum(t, b, "churn"); n != int64(total) {
				t.Fatalf("committed %d, want %d", n, total)
			}
		})
	}
}
