package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// txnBrokerArgs makes transactions fast to test: few coordinator
// partitions, timeouts checked often, no initial rebalance delay.
var txnBrokerArgs = []string{
	"--set", "transaction.state.log.num.partitions=4",
	"--set", "offsets.topic.num.partitions=4",
	"--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
	"--set", "group.initial.rebalance.delay.ms=0",
	"--set", "group.min.session.timeout.ms=1000",
}

// TestTransactionalPipelineExactlyOnce runs a consume-transform-produce
// pipeline (kgo.GroupTransactSession, read_committed) from "in" to "out"
// while its workers are killed mid-transaction and restarted over and
// over, and the broker is restarted once: the committed output holds
// every input record exactly once.
func TestTransactionalPipelineExactlyOnce(t *testing.T) {
	for _, tv := range []string{"2", "1"} {
		t.Run("transaction.version="+tv, func(t *testing.T) {
			testPipeline(t, append([]string{"--set", "transaction.version=" + tv}, txnBrokerArgs...))
		})
	}
}

func testPipeline(t *testing.T, args []string) {
	const (
		inputs  = 3000
		workers = 3
	)
	b := startBroker(t, "", args...)
	createTopic(t, b, "in", 4)
	createTopic(t, b, "out", 4)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// Input, produced in chunks while the pipeline runs.
	prod := b.client(kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceInput := func(from, to int) {
		for i := from; i < to; i++ {
			prod.Produce(ctx, &kgo.Record{Topic: "in", Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("input produce: %v", err)
				}
			})
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatalf("input flush: %v", err)
		}
	}
	produceInput(0, inputs/3)

	var (
		kills, commits, aborts atomic.Int64
		stop                   = make(chan struct{})
		wg                     sync.WaitGroup
	)
	// killAt[slot] > 0 asks a worker to die after producing that many
	// records of its current transaction, without ending it.
	var killMu sync.Mutex
	killAt := make([]int, workers)
	// The chaos's randomness (which worker dies, when, how long it stays
	// away) comes from one logged seed: STRATA_SEED replays it.
	seed := testwait.Seed(t)

	runWorker := func(slot int) {
		defer wg.Done()
		rng := rand.New(rand.NewSource(seed + 1 + int64(slot)))
		for {
			select {
			case <-stop:
				return
			default:
			}
			sess, err := kgo.NewGroupTransactSession(
				kgo.SeedBrokers(b.addr),
				kgo.TransactionalID(fmt.Sprintf("pipe-%d", slot)),
				kgo.TransactionTimeout(10*time.Second),
				kgo.ConsumerGroup("pipe"),
				kgo.ConsumeTopics("in"),
				kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.SessionTimeout(3*time.Second),
				kgo.HeartbeatInterval(300*time.Millisecond),
				kgo.FetchMaxWait(100*time.Millisecond),
				kgo.RetryTimeout(30*time.Second),
			)
			if err != nil {
				t.Errorf("session: %v", err)
				return
			}
			died := func() bool {
				for {
					select {
					case <-stop:
						return false
					default:
					}
					pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
					fs := sess.PollRecords(pctx, 100)
					pcancel()
					if fs.IsClientClosed() {
						return false
					}
					if fs.NumRecords() == 0 {
						continue
					}
					if err := sess.Begin(); err != nil {
						return true // restart the session
					}
					killMu.Lock()
					k := killAt[slot]
					killAt[slot] = 0
					killMu.Unlock()
					n := 0
					fs.EachRecord(func(r *kgo.Record) {
						n++
						sess.Produce(ctx, &kgo.Record{Topic: "out", Key: r.Value, Value: r.Value}, nil)
						if k > 0 && n == k {
							if err := sess.Client().Flush(ctx); err != nil {
								t.Logf("flush before kill: %v", err)
							}
							panic(errKilled) // recovered below: die mid-transaction
						}
					})
					committed, err := sess.End(ctx, kgo.TryCommit)
					if committed {
						commits.Add(1)
					} else {
						aborts.Add(1)
					}
					if err != nil {
						return true
					}
				}
			}
			again := func() (again bool) {
				defer func() {
					if r := recover(); r != nil {
						if r != errKilled {
							panic(r)
						}
						kills.Add(1)
						again = true
					}
				}()
				return died()
			}()
			// Killed (or failed): the client goes away without ending its
			// transaction; a fresh instance with the same transactional
			// ID takes over after a moment (the scenario's restart delay,
			// from the seed), or not at all once the test stops.
			sess.Close()
			if !again {
				return
			}
			select {
			case <-time.After(time.Duration(50+rng.Intn(200)) * time.Millisecond):
			case <-stop:
				return
			}
		}
	}
	for i := range workers {
		wg.Add(1)
		go runWorker(i)
	}

	// Chaos: ask a random worker to die mid-transaction every 400 ms;
	// restart the broker once, a third of the way in.
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		rng := rand.New(rand.NewSource(seed))
		tk := time.NewTicker(400 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				killMu.Lock()
				killAt[rng.Intn(workers)] = 1 + rng.Intn(5)
				killMu.Unlock()
			}
		}
	}()
	time.Sleep(2 * time.Second)
	produceInput(inputs/3, 2*inputs/3)
	time.Sleep(time.Second)
	t.Log("restarting the broker")
	b.restart()
	produceInput(2*inputs/3, inputs)

	// Wait until the group has committed all of the input.
	adm := kadm.NewClient(b.client())
	var sum int64
	if !testwait.Until(60*time.Second, func() bool {
		sum = 0
		if os, err := adm.FetchOffsets(ctx, "pipe"); err == nil {
			os.Each(func(o kadm.OffsetResponse) { sum += o.At })
		}
		return sum >= inputs
	}) {
		close(stop)
		t.Fatalf("pipeline committed %d of %d inputs (kills %d, commits %d, aborts %d)", sum, inputs, kills.Load(), commits.Load(), aborts.Load())
	}
	close(stop)
	<-chaosDone
	wg.Wait()
	t.Logf("kills %d, commits %d, aborts %d", kills.Load(), commits.Load(), aborts.Load())
	// A worker killed just before the stop left its transaction open; a
	// new instance of each transactional ID fences and aborts it (as a
	// restarted worker would), so read_committed can pass it.
	fence := b.client()
	for i := range workers {
		id := fmt.Sprintf("pipe-%d", i)
		var last error
		if !testwait.Until(20*time.Second, func() bool {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID, req.TransactionTimeoutMillis = &id, 10000
			resp, err := req.RequestWith(ctx, fence)
			if err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			last = err
			return err == nil
		}) {
			t.Fatalf("fencing %s: %v", id, last)
		}
	}
	if kills.Load() < 3 {
		t.Fatalf("only %d workers were killed mid-transaction", kills.Load())
	}

	// The committed output: every input exactly once.
	out := b.client(kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int{}
	total := 0
	idle := 0
	for idle < 4 {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := out.PollFetches(pctx)
		pcancel()
		if fs.NumRecords() == 0 {
			idle++
			continue
		}
		idle = 0
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; total++ })
	}
	var dups, missing []string
	for i := 0; i < inputs; i++ {
		switch n := seen[strconv.Itoa(i)]; {
		case n == 0:
			missing = append(missing, strconv.Itoa(i))
		case n > 1:
			dups = append(dups, fmt.Sprintf("%d(x%d)", i, n))
		}
	}
	if len(dups) > 0 || len(missing) > 0 || total != inputs {
		sort.Strings(dups)
		t.Fatalf("output has %d records for %d inputs: %d duplicated %s, %d missing %s", total, inputs,
			len(dups), head(dups), len(missing), head(missing))
	}
	// read_uncommitted sees the aborted attempts too (the kills).
	raw := b.client(kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	rawTotal := 0
	idle = 0
	for idle < 3 {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := raw.PollFetches(pctx)
		pcancel()
		if fs.NumRecords() == 0 {
			idle++
			continue
		}
		idle = 0
		rawTotal += fs.NumRecords()
	}
	if rawTotal <= inputs {
		t.Fatalf("read_uncommitted saw %d records, want more than the %d committed (aborted attempts)", rawTotal, inputs)
	}
	t.Logf("read_uncommitted %d records, read_committed %d", rawTotal, total)
}

type killed struct{}

var errKilled = killed{}

func head(s []string) string {
	if len(s) > 10 {
		s = s[:10]
	}
	return strings.Join(s, ",")
}
