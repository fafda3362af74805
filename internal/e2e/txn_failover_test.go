package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// startQuorum starts n brokers forming one cluster (a metadata quorum of
// all of them), each its own process under the harness, and waits until
// every one answers.
func startQuorum(t *testing.T, n int, extra ...string) []*broker {
	t.Helper()
	// One run of distinct ports below the ephemeral range (freePortRun):
	// addresses picked one by one with freeAddr could come out twice (a
	// CI-like run failed with "duplicate address in configuration").
	var offs []int
	for i := range n {
		offs = append(offs, i, 100+i)
	}
	base := freePortRun(t, offs...)
	var voters []string
	reps := make([]string, n)
	for i := range n {
		reps[i] = fmt.Sprintf("127.0.0.1:%d", base+i)
		voters = append(voters, fmt.Sprintf("%d@%s", i+1, reps[i]))
	}
	bs := make([]*broker, n)
	for i := range n {
		args := append([]string{"--set", fmt.Sprintf("node.id=%d", i+1), "--set", "controller.quorum.voters=" + strings.Join(voters, ",")}, extra...)
		b := &broker{t: t, dataDir: t.TempDir(), addr: fmt.Sprintf("127.0.0.1:%d", base+100+i), logs: new(bytes.Buffer), args: args}
		bs[i] = b
		t.Cleanup(func() {
			b.kill()
			if t.Failed() {
				b.mu.Lock()
				out := b.logs.String()
				b.mu.Unlock()
				if len(out) > 8000 {
					out = "..." + out[len(out)-8000:]
				}
				t.Logf("broker %d log:\n%s", i+1, out)
			}
		})
		// Launch without waiting: a quorum member is ready only once the
		// others are up.
		cmdArgs := append([]string{"serve", "--set", "listeners=PLAINTEXT://" + b.addr, "--set", "log.dirs=" + b.dataDir}, b.args...)
		cmd := exec.Command(strataBin, cmdArgs...)
		w := &lockedWriter{mu: &b.mu, buf: b.logs}
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		b.mu.Lock()
		b.cmd, b.done = cmd, done
		b.mu.Unlock()
	}
	for _, b := range bs {
		b.mu.Lock()
		done := b.done
		b.mu.Unlock()
		b.waitReady(done)
	}
	return bs
}

// TestTransactionCoordinatorFailover: on three brokers with every
// partition replicated three ways, the broker coordinating an open
// transaction is killed; the new leader of its __transaction_state
// partition rebuilds the transaction from the replicated log, and the
// producer commits it there: read_committed consumers see both
// transactions whole.
func TestTransactionCoordinatorFailover(t *testing.T) {
	bs := startQuorum(t, 3, txnBrokerArgs...)
	var addrs []string
	for _, b := range bs {
		addrs = append(addrs, b.addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.RetryTimeout(60 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	admCl := newClient()
	adm := kadm.NewClient(admCl)
	var created kadm.CreateTopicResponse
	var createErr error
	if !testwait.Until(40*time.Second, func() bool {
		created, createErr = adm.CreateTopic(ctx, 3, 3, nil, "fo")
		return createErr == nil && created.Err == nil
	}) {
		t.Fatalf("create: %v %v", createErr, created.Err)
	}
	p := newClient(kgo.TransactionalID("fo-txn"), kgo.DefaultProduceTopic("fo"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.TransactionTimeout(60*time.Second))
	produce := func(prefix string, n int) {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			p.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce("one", 30)
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	produce("two", 30) // left open across the failover

	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = 1, "fo-txn", []string{"fo-txn"}
	resp, err := req.RequestWith(ctx, admCl)
	if err != nil {
		t.Fatal(err)
	}
	node := resp.NodeID
	if len(resp.Coordinators) > 0 {
		node = resp.Coordinators[0].NodeID
	}
	if node < 1 || int(node) > len(bs) {
		t.Fatalf("coordinator %d (%+v)", node, resp)
	}
	t.Logf("killing broker %d, the coordinator of fo-txn", node)
	bs[node-1].kill()

	var live []string
	for i, b := range bs {
		if int32(i+1) != node {
			live = append(live, b.addr)
		}
	}
	// The new coordinator rebuilds the open transaction from the
	// replicated __transaction_state partition. (A fresh client each try:
	// kgo keeps a coordinator it cannot dial until the broker answers
	// NOT_COORDINATOR, and the dead one never will.)
	var d kadm.DescribedTransaction
	var describeErr error
	if !testwait.Until(60*time.Second, func() bool {
		liveCl, err := kgo.NewClient(kgo.SeedBrokers(live...), kgo.RetryTimeout(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		dt, err := kadm.NewClient(liveCl).DescribeTransactions(ctx, "fo-txn")
		liveCl.Close()
		d, describeErr = dt["fo-txn"], err
		return err == nil && d.Err == nil && d.Coordinator != node
	}) {
		t.Fatalf("no new coordinator: %v %+v", describeErr, d)
	}
	if d.State != "Ongoing" || len(d.Topics["fo"]) != 3 {
		t.Fatalf("rebuilt transaction: %+v", d)
	}
	// The producer commits there -- or, when its client surfaces the lost
	// connection instead of retrying the EndTxn (kgo does: the commit's
	// fate is unknown to it), a new instance of the transactional ID
	// fences it and aborts the transaction. Either way the outcome is
	// whole on every partition.
	want := 60
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Logf("commit after the coordinator moved: %v; fencing with a new instance", err)
		p2 := newClient(kgo.SeedBrokers(live...), kgo.TransactionalID("fo-txn"), kgo.DefaultProduceTopic("fo"))
		if err := p2.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p2.ProduceSync(ctx, &kgo.Record{Value: []byte("three-0")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := p2.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		want = 31
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(live...), kgo.ConsumeTopics("fo"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
		pcancel()
	}
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	pcancel()
	two := 0
	for v := range got {
		if strings.HasPrefix(v, "two-") {
			two++
		}
	}
	if len(got) != want || (want == 31 && two != 0) {
		t.Fatalf("read_committed after the failover: %d records (%d of the open transaction), want %d", len(got), two, want)
	}
}
