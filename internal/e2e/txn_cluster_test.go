package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestTransactionsThreeBrokers: on a three-broker dev cluster, a
// transaction spanning partitions led by every broker commits and aborts
// as a whole: the coordinator writes the markers for partitions led
// elsewhere with WriteTxnMarkers.
func TestTransactionsThreeBrokers(t *testing.T) {
	port := freePortRun(t, 0, 1, 2, 100, 101, 102)
	args := []string{"dev-cluster", "--brokers", "3", "--dir", t.TempDir(), "--port", fmt.Sprint(port)}
	for i := 0; i+1 < len(txnBrokerArgs); i += 2 {
		args = append(args, "--set", txnBrokerArgs[i+1])
	}
	args = append(args, "--set", "transaction.state.log.replication.factor=1", "--set", "offsets.topic.replication.factor=1")
	cmd := exec.Command(strataBin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	gone := make(chan struct{})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		cmd.Wait()
		close(gone)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-gone:
		case <-time.After(40 * time.Second):
			cmd.Process.Kill()
		}
	})
	var bootstrap string
	deadline := time.After(60 * time.Second)
	for bootstrap == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("dev-cluster exited before printing its bootstrap addresses")
			}
			if b, found := strings.CutPrefix(l, "bootstrap: "); found {
				bootstrap = b
			}
		case <-deadline:
			t.Fatal("no bootstrap line within 60s")
		}
	}
	go func() {
		for range lines {
		}
	}()
	addrs := strings.Split(bootstrap, ",")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.RetryTimeout(30 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	adm := kadm.NewClient(newClient())
	var md kadm.Metadata
	var created kadm.CreateTopicResponse
	var createErr error
	if !testwait.Until(30*time.Second, func() bool {
		created, createErr = adm.CreateTopic(ctx, 6, 1, nil, "mb")
		return createErr == nil && created.Err == nil
	}) {
		t.Fatalf("create: %v %v", createErr, created.Err)
	}
	md, _ = adm.Metadata(ctx, "mb")
	leaders := map[int32]bool{}
	for _, p := range md.Topics["mb"].Partitions {
		leaders[p.Leader] = true
	}
	if len(leaders) < 2 {
		t.Fatalf("partitions led by %v: the test needs several leaders", leaders)
	}

	p := newClient(kgo.TransactionalID("mb-txn"), kgo.DefaultProduceTopic("mb"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txn := func(prefix string, n int, commit bool) {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			p.Produce(ctx, &kgo.Record{Partition: int32(i % 6), Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end (commit=%v): %v", commit, err)
		}
	}
	txn("c1", 60, true)
	txn("a", 30, false)
	txn("c2", 30, true)

	count := func(iso kgo.IsolationLevel, want int) (int, int) {
		cl := newClient(kgo.ConsumeTopics("mb"), kgo.FetchIsolationLevel(iso), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		n, aborted, idle := 0, 0, 0
		for idle < 4 && n <= want {
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			if fs.NumRecords() == 0 {
				if n >= want {
					idle++
				}
				continue
			}
			idle = 0
			fs.EachRecord(func(r *kgo.Record) {
				n++
				if strings.HasPrefix(string(r.Value), "a-") {
					aborted++
				}
			})
		}
		return n, aborted
	}
	if n, aborted := count(kgo.ReadCommitted(), 90); n != 90 || aborted != 0 {
		t.Fatalf("read_committed: %d records, %d aborted", n, aborted)
	}
	if n, aborted := count(kgo.ReadUncommitted(), 120); n != 120 || aborted != 30 {
		t.Fatalf("read_uncommitted: %d records, %d aborted", n, aborted)
	}
}
