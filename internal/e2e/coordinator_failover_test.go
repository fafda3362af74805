package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// foNode is one broker of a three-process cluster started the way
// `strata dev-cluster` starts them (node id, listener, data dir, the
// shared controller.quorum.voters), kept here rather than behind
// dev-cluster so that a test can SIGKILL or SIGTERM one broker.
type foNode struct {
	t    *testing.T
	id   int32
	addr string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs *bytes.Buffer // protected by mu
}

func (n *foNode) start() {
	n.t.Helper()
	cmd := exec.Command(strataBin, n.args...)
	n.mu.Lock()
	w := &lockedWriter{mu: &n.mu, buf: n.logs}
	n.mu.Unlock()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
}

// signal sends sig and waits (up to 40 s) for the process to exit.
func (n *foNode) signal(sig syscall.Signal) {
	n.t.Helper()
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		// Where it hangs: the Go runtime prints every goroutine's stack
		// on SIGQUIT (the head of the dump holds the stuck shutdown).
		cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		n.mu.Lock()
		out := n.logs.String()
		n.mu.Unlock()
		if i := strings.Index(out, "SIGQUIT"); i >= 0 {
			out = out[i:]
			if len(out) > 60000 {
				out = out[:60000] + "..."
			}
			n.t.Logf("broker %d goroutines after %v did not end it:\n%s", n.id, sig, out)
		}
		n.t.Fatalf("broker %d did not exit within 40s of %v", n.id, sig)
	}
	if sig == syscall.SIGTERM {
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			n.t.Fatalf("broker %d exited with code %d after SIGTERM", n.id, code)
		}
	}
}

// foCluster starts three brokers on 127.0.0.1, all voters of the metadata
// quorum, and waits until each answers Metadata listing all three.
func foCluster(t *testing.T) []*foNode {
	t.Helper()
	port := freePortRun(t, 0, 1, 2, 100, 101, 102)
	dir := t.TempDir()
	var voters []string
	for i := 0; i < 3; i++ {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, port+100+i))
	}
	nodes := make([]*foNode, 3)
	for i := range nodes {
		n := &foNode{t: t, id: int32(i + 1), addr: fmt.Sprintf("127.0.0.1:%d", port+i), logs: new(bytes.Buffer)}
		n.args = []string{"serve",
			"--set", "node.id=" + strconv.Itoa(i+1),
			"--set", "listeners=PLAINTEXT://" + n.addr,
			"--set", "log.dirs=" + filepath.Join(dir, fmt.Sprintf("broker-%d", i+1)),
			"--set", "controller.quorum.voters=" + strings.Join(voters, ","),
		}
		nodes[i] = n
		n.start()
	}
	t.Cleanup(func() {
		if t.Failed() {
			// Every live broker logs each raft group's state (role,
			// term, commit, log end, high watermark) before it dies.
			for _, n := range nodes {
				n.mu.Lock()
				if n.cmd != nil {
					n.cmd.Process.Signal(syscall.SIGUSR1)
				}
				n.mu.Unlock()
			}
			time.Sleep(500 * time.Millisecond)
		}
		for _, n := range nodes {
			n.signal(syscall.SIGKILL)
		}
		if t.Failed() {
			for _, n := range nodes {
				n.mu.Lock()
				out := foQuietLog(n.logs.String())
				n.mu.Unlock()
				if len(out) > 30000 {
					out = "..." + out[len(out)-30000:]
				}
				t.Logf("broker %d log:\n%s", n.id, out)
			}
		}
	})
	for _, n := range nodes {
		foWaitBrokers(t, n.addr, 3, 60*time.Second)
	}
	return nodes
}

// foQuietLog drops raft's once-per-retry complaints about a peer that is
// down (they fill a failed run's log tail) and says how many there were.
func foQuietLog(log string) string {
	var b strings.Builder
	dropped := 0
	for _, line := range strings.SplitAfter(log, "\n") {
		if strings.Contains(line, "failed to heartbeat to") || strings.Contains(line, "failed to appendEntries to") ||
			strings.Contains(line, "failed to contact") {
			dropped++
			continue
		}
		b.WriteString(line)
	}
	return fmt.Sprintf("(%d lines of raft retrying a peer left out)\n%s", dropped, b.String())
}

// foWaitBrokers waits until the broker at addr answers Metadata listing
// want brokers.
func foWaitBrokers(t *testing.T, addr string, want int, timeout time.Duration) {
	t.Helper()
	var last string
	if !testwait.Until(timeout, func() bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
		if err != nil {
			return false
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		last = fmt.Sprintf("err %v, %d brokers, controller %d", err, len(md.Brokers), md.Controller)
		return err == nil && len(md.Brokers) == want && md.Controller > 0
	}) {
		t.Fatalf("broker %s: not %d brokers within %v (last: %s)", addr, want, timeout, last)
	}
}

// foCoordinator asks FindCoordinator (through the brokers at seeds) for
// group's coordinator and checks that it is the leader of the
// __consumer_offsets partition the group hashes to, returning it with that
// partition's leader epoch. It waits (up to 60 s) for a coordinator other
// than not.
func foCoordinator(t *testing.T, ctx context.Context, seeds []string, group string, not int32) (node, partition, epoch int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var last string
	if testwait.Until(60*time.Second, func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = group
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && resp.ErrorCode == 0 {
			md, merr := adm.Metadata(ctx, "__consumer_offsets")
			td := md.Topics["__consumer_offsets"]
			if merr == nil && td.Err == nil && len(td.Partitions) > 0 {
				p := foPartitionFor(group, int32(len(td.Partitions)))
				pd := td.Partitions[p]
				if pd.Leader == resp.NodeID && len(pd.Replicas) == 3 && resp.NodeID != not {
					node, partition, epoch = resp.NodeID, p, pd.LeaderEpoch
					return true
				}
				last = fmt.Sprintf("coordinator %d, partition %d leader %d epoch %d replicas %v isr %v",
					resp.NodeID, p, pd.Leader, pd.LeaderEpoch, pd.Replicas, pd.ISR)
			} else {
				last = fmt.Sprintf("metadata: %v %v", merr, td.Err)
			}
		} else if err != nil {
			last = err.Error()
		} else {
			last = kerr.ErrorForCode(resp.ErrorCode).Error()
		}
		return false
	}) {
		return node, partition, epoch
	}
	t.Fatalf("no coordinator for %q: %s", group, last)
	return
}

// foPartitionFor is Kafka's abs(javaHashCode(group)) % n.
func foPartitionFor(group string, n int32) int32 {
	var h int32
	for _, r := range []rune(group) {
		if r > 0xffff { // UTF-16 surrogate pair, as Java sees it
			r -= 0x10000
			h = 31*h + int32(0xd800+(r>>10))
			h = 31*h + int32(0xdc00+(r&0x3ff))
			continue
		}
		h = 31*h + int32(r)
	}
	if h == -1<<31 {
		return 0
	}
	if h < 0 {
		h = -h
	}
	return h % n
}

// foConsumed is what one consumer polled: per partition, the offsets in
// order.
type foConsumed map[int32][]int64

// foConsume polls the group consumer cl until it has n more records,
// checking that each partition's offsets advance by one (no record
// skipped within a consumer, none repeated).
func foConsume(t *testing.T, ctx context.Context, cl *kgo.Client, n int, got foConsumed) {
	t.Helper()
	for total := 0; total < n; {
		fs := cl.PollRecords(ctx, n-total)
		if ctx.Err() != nil {
			per := map[int32]string{}
			for p, offs := range got {
				if len(offs) > 0 {
					per[p] = fmt.Sprintf("%d records, offsets %d..%d", len(offs), offs[0], offs[len(offs)-1])
				}
			}
			t.Fatalf("consumed %d of %d: %v; by partition: %v", total, n, ctx.Err(), per)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Logf("fetch error %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			offs := got[r.Partition]
			if len(offs) > 0 && r.Offset != offs[len(offs)-1]+1 {
				t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, offs[len(offs)-1])
			}
			if want := fmt.Sprintf("p%d-%d", r.Partition, r.Offset); string(r.Value) != want {
				t.Fatalf("partition %d offset %d: %q, want %q", r.Partition, r.Offset, r.Value, want)
			}
			got[r.Partition] = append(offs, r.Offset)
			total++
		})
	}
}

// TestCoordinatorFailover (issue 4): committed offsets survive the loss of
// the group coordinator in a 3-broker cluster. The group's
// __consumer_offsets partition has three replicas; a group consumer
// commits, reads on past its commit (the uncommitted window), and the
// coordinator broker is then SIGKILLed (round 1) or SIGTERMed (round 2,
// after the killed broker is back). The partition's new leader, at a new
// leader epoch, becomes the coordinator: FetchOffsets through every live
// broker returns the committed offsets, the old consumer's leave and a new
// consumer's join go to it, and the new consumer resumes exactly at the
// committed offsets -- records of the uncommitted window are read again,
// none below the commit, and none is skipped.
func TestCoordinatorFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("three brokers, two failovers: not in -short")
	}
	start := time.Now()
	nodes := foCluster(t)
	t.Logf("cluster up after %v", time.Since(start))
	seeds := func() []string {
		var s []string
		for _, n := range nodes {
			n.mu.Lock()
			up := n.cmd != nil
			n.mu.Unlock()
			if up {
				s = append(s, n.addr)
			}
		}
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const (
		topic = "failover"
		group = "failover-group"
		parts = 4
	)
	pcl, err := kgo.NewClient(kgo.SeedBrokers(seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	if resp, err := kadm.NewClient(pcl).CreateTopic(ctx, parts, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	// produce appends n records to every partition, each valued
	// "p<partition>-<offset>" so that a consumer can check what it read.
	end := map[int32]int64{}
	produce := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []string
		for p := int32(0); p < parts; p++ {
			for i := 0; i < n; i++ {
				want := end[p]
				r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("p%d-%d", p, want))}
				wg.Add(1)
				pcl.Produce(ctx, r, func(r *kgo.Record, err error) {
					defer wg.Done()
					if err != nil || r.Offset != want {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("partition %d: record at %d, want %d: %v", r.Partition, r.Offset, want, err))
						mu.Unlock()
					}
				})
				end[p]++
			}
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("produce: %s", errs[0])
		}
	}
	newConsumer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds()...),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
			kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	committed := map[int32]int64{} // next offset to read, per partition
	var consumedA foConsumed

	for round, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		produce(60)
		t.Logf("round %d: produced after %v", round, time.Since(start))
		// Consumer A: resumes from the group's commits, reads some
		// records, commits them, reads on without committing.
		a := newConsumer()
		got := foConsumed{}
		var total int64
		for p := int32(0); p < parts; p++ {
			total += end[p] - committed[p]
		}
		foConsume(t, ctx, a, int(total/2), got)
		for p, offs := range got {
			if len(offs) > 0 && offs[0] != committed[p] {
				t.Fatalf("round %d: consumer A started partition %d at %d, committed %d", round, p, offs[0], committed[p])
			}
		}
		if err := a.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("round %d: commit: %v", round, err)
		}
		for p, eo := range a.CommittedOffsets()[topic] {
			committed[p] = eo.Offset
		}
		for p, offs := range got {
			if committed[p] != offs[len(offs)-1]+1 {
				t.Fatalf("round %d: partition %d committed %d, consumed up to %d", round, p, committed[p], offs[len(offs)-1])
			}
		}
		// The uncommitted window: read, never committed.
		window := foConsumed{}
		foConsume(t, ctx, a, int(total/4), window)
		consumedA = got

		coord, cp, epoch := foCoordinator(t, ctx, seeds(), group, -1)
		t.Logf("round %d: coordinator %d (__consumer_offsets-%d, epoch %d); committed %v; stopping it with %v",
			round, coord, cp, epoch, committed, sig)
		stopAt := time.Now()
		nodes[coord-1].signal(sig)

		newCoord, _, newEpoch := foCoordinator(t, ctx, seeds(), group, coord)
		t.Logf("round %d: new coordinator %d at epoch %d after %v", round, newCoord, newEpoch, time.Since(stopAt))
		if newCoord == coord || newEpoch <= epoch {
			t.Fatalf("round %d: coordinator %d epoch %d after stopping %d at epoch %d", round, newCoord, newEpoch, coord, epoch)
		}
		// Every live broker, as the bootstrap, finds the committed offsets.
		for _, s := range seeds() {
			cl, err := kgo.NewClient(kgo.SeedBrokers(s))
			if err != nil {
				t.Fatal(err)
			}
			var last string
			ok := testwait.Until(40*time.Second, func() bool {
				fo, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
				last = fmt.Sprintf("%v", err)
				ok := err == nil
				if ok {
					var seen []string
					for p := int32(0); p < parts; p++ {
						o, found := fo.Lookup(topic, p)
						seen = append(seen, fmt.Sprintf("%d:%v:%d/%v", p, found, o.At, o.Err))
						switch want := committed[p]; {
						case want == 0 && !found: // never committed
						case !found || o.Err != nil || o.At != want:
							ok = false
						}
					}
					last = strings.Join(seen, " ")
				}
				return ok
			})
			cl.Close()
			if !ok {
				t.Fatalf("round %d: FetchOffsets through %s: %s, want %v", round, s, last, committed)
			}
		}
		// A leaves through the new coordinator.
		lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
		if err := a.LeaveGroupContext(lctx); err != nil {
			t.Logf("round %d: consumer A leave: %v", round, err)
		}
		lcancel()
		a.Close()

		// Consumer B resumes at the commits: the window is read again,
		// nothing below the commit, nothing skipped, up to the end.
		b := newConsumer()
		var rest int64
		for p := int32(0); p < parts; p++ {
			rest += end[p] - committed[p]
		}
		gotB := foConsumed{}
		foConsume(t, ctx, b, int(rest), gotB)
		var again int
		for p := int32(0); p < parts; p++ {
			offs := gotB[p]
			if int64(len(offs)) != end[p]-committed[p] || (len(offs) > 0 && (offs[0] != committed[p] || offs[len(offs)-1] != end[p]-1)) {
				t.Fatalf("round %d: consumer B read partition %d at %v..., want %d..%d", round, p, foHead(offs), committed[p], end[p]-1)
			}
			for _, o := range window[p] {
				if o >= committed[p] {
					again++
				}
			}
		}
		t.Logf("round %d: consumer B resumed at %v; %d records of A's uncommitted window read again, A had committed %d partitions",
			round, committed, again, len(consumedA))
		if err := b.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatalf("round %d: consumer B commit: %v", round, err)
		}
		for p, eo := range b.CommittedOffsets()[topic] {
			committed[p] = eo.Offset
		}
		lctx, lcancel = context.WithTimeout(ctx, 30*time.Second)
		b.LeaveGroupContext(lctx)
		lcancel()
		b.Close()

		t.Logf("round %d: done after %v", round, time.Since(start))
		// Bring the stopped broker back for the next round; it catches up
		// as a follower.
		if round == 0 {
			nodes[coord-1].start()
			for _, n := range nodes {
				foWaitBrokers(t, n.addr, 3, 60*time.Second)
			}
			t.Logf("round %d: broker %d back after %v", round, coord, time.Since(start))
		}
	}
}

func foHead(offs []int64) []int64 {
	if len(offs) > 5 {
		offs = offs[:5]
	}
	return append([]int64(nil), offs...)
}
