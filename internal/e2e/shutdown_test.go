package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// Bounded shutdown (issue 15): SIGTERM ends a broker within
// strata.shutdown.timeout.ms whatever state Raft and the clients are in.
// Three real brokers carry acks=all producers and long-poll fetches; then
// one broker is stopped with one peer SIGSTOPped (its partitions still
// have a quorum), with two peers SIGSTOPped (no quorum anywhere, no
// handover possible), and all three at once on a healthy cluster. Each
// case measures the time from SIGTERM to the process's exit.

// shutdownBound is strata.shutdown.timeout.ms in these tests (smaller than
// the default 20 s, so they are quick).
const shutdownBound = 8 * time.Second

// shutdownSlack is what the test allows past the bound for the process to
// be gone and reaped on a loaded machine (the broker's own last resort
// fires at the bound).
const shutdownSlack = 1500 * time.Millisecond

var shutdownArgs = []string{"--set", fmt.Sprintf("strata.shutdown.timeout.ms=%d", shutdownBound.Milliseconds())}

// inflight counts the requests a client has written to each broker and
// not yet read the answer of (franz-go's broker hooks).
type inflight struct {
	mu       sync.Mutex
	out      map[inflightKey]int
	lastRead map[inflightKey]time.Time
}

type inflightKey struct {
	node int32
	key  int16
}

func newInflight() *inflight {
	return &inflight{out: map[inflightKey]int{}, lastRead: map[inflightKey]time.Time{}}
}

func (f *inflight) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	f.mu.Lock()
	k := inflightKey{meta.NodeID, key}
	if f.out[k] == 0 {
		f.lastRead[k] = time.Now() // waiting since now
	}
	f.out[k]++
	f.mu.Unlock()
}

func (f *inflight) OnBrokerRead(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	f.mu.Lock()
	k := inflightKey{meta.NodeID, key}
	if f.out[k] > 0 {
		f.out[k]--
	}
	f.lastRead[k] = time.Now()
	f.mu.Unlock()
}

// pending returns how many requests of key are outstanding at node and
// for how long none of them has been answered.
func (f *inflight) pending(node int32, key int16) (int, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := inflightKey{node, key}
	if f.out[k] == 0 {
		return 0, 0
	}
	return f.out[k], time.Since(f.lastRead[k])
}

// Kafka API keys counted.
const (
	keyProduce = 0
	keyFetch   = 1
)

// shutdownCluster is three brokers with topics "load" (acks=all
// producers) and "quiet" (a group consumer long-polling, nothing produced), six
// partitions each on all three brokers, every broker leading some of
// each.
type shutdownCluster struct {
	t      *testing.T
	bs     []*broker
	addrs  []string
	flight *inflight
	seed1  *kgo.Client // seeded with broker 1 only (leadersSeenBy1)
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startShutdownCluster(t *testing.T) *shutdownCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts three brokers")
	}
	c := &shutdownCluster{t: t, bs: startQuorum(t, 3, shutdownArgs...), flight: newInflight()}
	for _, b := range c.bs {
		c.addrs = append(c.addrs, b.addr)
	}
	// Runs before startQuorum's kills (cleanups run last first).
	t.Cleanup(func() {
		for _, b := range c.bs {
			c.signal(b, syscall.SIGCONT)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"load", "quiet"} {
		var resp kadm.CreateTopicResponse
		var err error
		if !testwait.Until(40*time.Second, func() bool {
			resp, err = adm.CreateTopic(ctx, 6, 3, nil, topic)
			return err == nil && (resp.Err == nil || strings.Contains(resp.Err.Error(), "TOPIC_ALREADY_EXISTS"))
		}) {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
	}
	// Every partition elected, each broker leading some of both topics.
	var last string
	if !testwait.Until(60*time.Second, func() bool {
		md, err := adm.Metadata(ctx, "load", "quiet")
		ok := err == nil
		leads := map[string]map[int32]bool{}
		for _, topic := range []string{"load", "quiet"} {
			leads[topic] = map[int32]bool{}
			td := md.Topics[topic]
			ok = ok && td.Err == nil && len(td.Partitions) == 6
			for _, p := range td.Partitions {
				ok = ok && p.Err == nil && p.Leader > 0
				leads[topic][p.Leader] = true
			}
			ok = ok && len(leads[topic]) == 3
		}
		last = fmt.Sprintf("err %v, leaders %v", err, leads)
		return ok
	}) {
		t.Fatalf("partitions not led by all three brokers: %s", last)
	}
	c.startLoad()
	return c
}

// startLoad starts acks=all producers on "load" and a group consumer
// long-polling "quiet" (30 s MaxWait) until the test ends.
func (c *shutdownCluster) startLoad() {
	t := c.t
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.DefaultProduceTopic("load"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.WithHooks(c.flight))
	if err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.ConsumeTopics("quiet"), kgo.ConsumerGroup("quiet-readers"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(30*time.Second),
		kgo.WithHooks(c.flight), kgo.WithContext(ctx)) // cancelled: Close does not wait to leave the group
	if err != nil {
		t.Fatal(err)
	}
	// Two producers per partition: one whose leader is stopped blocks
	// only its own.
	for i := 0; i < 12; i++ {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				prod.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 6), Value: fmt.Appendf(nil, "p%d-%d", i, n)})
			}
		}()
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for ctx.Err() == nil {
			cons.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() {
		// Closing fails what the clients still hold (records to brokers
		// that are gone are retried until then).
		cancel()
		prod.Close()
		cons.Close()
		c.wg.Wait()
	})
}

// leadersSeenBy1 returns the leader of each partition of "load" in broker
// 1's metadata (asked directly: the other brokers may be stopped).
func (c *shutdownCluster) leadersSeenBy1(t *testing.T) map[int32]int32 {
	t.Helper()
	if c.seed1 == nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs[0]))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		c.seed1 = cl
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("load")
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out := map[int32]int32{}
	resp, err := c.seed1.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return out
	}
	for _, td := range resp.(*kmsg.MetadataResponse).Topics {
		for _, p := range td.Partitions {
			if p.ErrorCode == 0 {
				out[p.Partition] = p.Leader
			}
		}
	}
	return out
}

func (c *shutdownCluster) signal(b *broker, sig syscall.Signal) {
	b.mu.Lock()
	cmd := b.cmd
	b.mu.Unlock()
	if cmd != nil {
		cmd.Process.Signal(sig)
	}
}

// waitFor polls cond every 20 ms until it holds, failing the test after
// limit with what() describing the state.
func (c *shutdownCluster) waitFor(limit time.Duration, what func() string, cond func() bool) {
	c.t.Helper()
	if !testwait.Until(limit, cond) {
		c.t.Fatalf("not within %v: %s", limit, what())
	}
}

// inFlightAt waits until node has both a produce and a fetch outstanding.
func (c *shutdownCluster) inFlightAt(node int32) {
	c.t.Helper()
	c.waitFor(30*time.Second, func() string { return c.describe(node) }, func() bool {
		p, _ := c.flight.pending(node, keyProduce)
		f, _ := c.flight.pending(node, keyFetch)
		return p > 0 && f > 0
	})
}

func (c *shutdownCluster) describe(node int32) string {
	p, pa := c.flight.pending(node, keyProduce)
	f, fa := c.flight.pending(node, keyFetch)
	return fmt.Sprintf("broker %d: %d produce requests outstanding (none answered for %v), %d fetches (%v)", node, p, pa.Round(time.Millisecond), f, fa.Round(time.Millisecond))
}

// terminate sends SIGTERM to each of bs at once and returns, for each, the
// time until its process had exited and its exit code. A broker still
// running 4x the bound after SIGTERM gets SIGQUIT (Go's goroutine dump
// lands in its log) and counts as not stopped (-1).
func (c *shutdownCluster) terminate(bs ...*broker) ([]time.Duration, []int) {
	took := make([]time.Duration, len(bs))
	codes := make([]int, len(bs))
	var wg sync.WaitGroup
	start := time.Now()
	for i, b := range bs {
		b.mu.Lock()
		cmd, done := b.cmd, b.done
		b.mu.Unlock()
		cmd.Process.Signal(syscall.SIGTERM)
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-done:
				took[i] = time.Since(start)
				codes[i] = cmd.ProcessState.ExitCode()
			case <-time.After(4 * shutdownBound):
				took[i], codes[i] = time.Since(start), -1
				cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					cmd.Process.Kill()
					<-done
				}
			}
			b.mu.Lock()
			b.cmd = nil
			b.mu.Unlock()
		}()
	}
	wg.Wait()
	return took, codes
}

// shutdownLog is the tail of b's log from its "shutting down" line.
func shutdownLog(b *broker) string {
	b.mu.Lock()
	out := b.logs.String()
	b.mu.Unlock()
	if i := strings.LastIndex(out, "shutting down"); i >= 0 {
		if j := strings.LastIndex(out[:i], "\n"); j >= 0 {
			out = out[j+1:]
		}
	}
	return out
}

// clip shortens a log for a failure message.
func clip(s string) string {
	if len(s) > 6000 {
		s = s[:3000] + "\n...\n" + s[len(s)-3000:]
	}
	return s
}

// shutdownMilestones are the log lines of a shutdown's stages.
var shutdownMilestones = []string{`msg="shutting down"`, `msg="kafka listener closed`, `msg="partition leaderships handed off`,
	`msg="broker closed"`, `msg="strata stopped"`, `msg="shutdown did not finish`, `msg="still running"`}

// milestones returns b's shutdown milestone lines.
func milestones(b *broker) string {
	var out []string
	for _, l := range strings.Split(shutdownLog(b), "\n") {
		for _, m := range shutdownMilestones {
			if strings.Contains(l, m) {
				out = append(out, "  "+strings.TrimSpace(l))
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// checkStopped fails the test if a broker took longer than the bound (and
// the slack) to exit after SIGTERM, or (clean) exited non-zero.
func (c *shutdownCluster) checkStopped(b *broker, node int32, took time.Duration, code int, clean bool) {
	c.t.Helper()
	c.t.Logf("broker %d: exited %v after SIGTERM, code %d\n%s", node, took.Round(time.Millisecond), code, milestones(b))
	if code == -1 || took > shutdownBound+shutdownSlack {
		c.t.Errorf("broker %d did not stop within %v of SIGTERM (bound %v): %v, code %d; log:\n%s", node, shutdownBound+shutdownSlack, shutdownBound, took, code, clip(shutdownLog(b)))
		return
	}
	if clean && code != 0 {
		c.t.Errorf("broker %d exited with code %d; log:\n%s", node, code, clip(shutdownLog(b)))
	}
}

func TestShutdownBoundedOnePeerStopped(t *testing.T) { shutdownWithPeersStopped(t, 1) }

func TestShutdownBoundedQuorumLost(t *testing.T) { shutdownWithPeersStopped(t, 2) }

// shutdownWithPeersStopped SIGSTOPs stopped of broker 1's two peers while
// producers and fetches are in flight, then SIGTERMs broker 1. With one
// peer stopped its partitions keep a quorum, its leaderships can go to
// the other peer, and the exit must be clean; with two, nothing can
// commit or be handed over, votes and appends to the peers go
// unanswered, and the exit must still come within the bound. Broker 1
// then restarts on its data once the peers run again.
func shutdownWithPeersStopped(t *testing.T, stopped int) {
	c := startShutdownCluster(t)
	target := c.bs[0]
	c.inFlightAt(1)
	var led2 []int32 // partitions of "load" broker 2 leads before it stops
	for p, l := range c.leadersSeenBy1(t) {
		if l == 2 {
			led2 = append(led2, p)
		}
	}
	for _, b := range c.bs[1 : 1+stopped] {
		c.signal(b, syscall.SIGSTOP)
	}
	if stopped == 1 {
		// Broker 2's partitions are elected elsewhere (the cluster has
		// noticed it is gone) and the producers carry on at broker 1.
		c.waitFor(30*time.Second, func() string {
			return fmt.Sprintf("%s; broker 2 led %v, now %v", c.describe(1), led2, c.leadersSeenBy1(t))
		}, func() bool {
			moved := false
			for p, l := range c.leadersSeenBy1(t) {
				for _, q := range led2 {
					moved = moved || (p == q && l > 0 && l != 2)
				}
			}
			pr, since := c.flight.pending(1, keyProduce)
			f, _ := c.flight.pending(1, keyFetch)
			return moved && pr > 0 && f > 0 && since < 500*time.Millisecond
		})
	} else {
		// Quorum lost: broker 1 holds produce requests it cannot answer.
		c.waitFor(30*time.Second, func() string { return c.describe(1) }, func() bool {
			p, since := c.flight.pending(1, keyProduce)
			f, _ := c.flight.pending(1, keyFetch)
			return p > 0 && f > 0 && since > time.Second
		})
	}
	t.Logf("at SIGTERM: %s", c.describe(1))
	took, codes := c.terminate(target)
	c.checkStopped(target, 1, took[0], codes[0], stopped == 1)
	for _, b := range c.bs[1 : 1+stopped] {
		c.signal(b, syscall.SIGCONT)
	}
	// Whatever the shutdown left on disk, the broker starts from it.
	target.start()
}

// TestShutdownBoundedWholeCluster SIGTERMs all three brokers of a healthy
// cluster at once, with producers and fetches in flight at each: each
// hands its leaderships to brokers that are leaving too, and each must
// still exit cleanly within the bound.
func TestShutdownBoundedWholeCluster(t *testing.T) {
	c := startShutdownCluster(t)
	for node := int32(1); node <= 3; node++ {
		c.inFlightAt(node)
	}
	took, codes := c.terminate(c.bs...)
	for i, b := range c.bs {
		c.checkStopped(b, int32(i+1), took[i], codes[i], true)
	}
}
