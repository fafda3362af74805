package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestDevClusterThreeBrokers runs `strata dev-cluster --brokers 3` (three
// real processes on 127.0.0.1, one metadata quorum): every broker answers
// Metadata from the replicated image with the same brokers, controller
// and leaders; acks=all records produced through one bootstrap address
// reach partitions led by all three brokers and read back in order; Ctrl-C
// (SIGINT) stops the cluster cleanly. Partitions have one replica each:
// per-partition Raft groups are not wired into the broker yet.
func TestDevClusterThreeBrokers(t *testing.T) {
	// Three Kafka listeners from port and, 100 up, three replication
	// listeners: all six must be free.
	port := freePortRun(t, 0, 1, 2, 100, 101, 102)
	dir := t.TempDir()
	cmd := exec.Command(strataBin, "dev-cluster", "--brokers", "3", "--dir", dir, "--port", fmt.Sprint(port))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	gone := make(chan struct{}) // closed once dev-cluster has exited
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
		close(gone)
	}()
	t.Cleanup(func() {
		select {
		case <-gone:
			return
		default:
		}
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
				t.Fatalf("dev-cluster exited before printing its bootstrap addresses: %s", stderr.String())
			}
			if b, found := strings.CutPrefix(l, "bootstrap: "); found {
				bootstrap = b
			}
		case <-deadline:
			t.Fatal("no bootstrap line within 60s")
		}
	}
	start := time.Now()
	t.Logf("cluster up: %s", bootstrap)
	addrs := strings.Split(bootstrap, ",")
	if len(addrs) != 3 {
		t.Fatalf("bootstrap %q", bootstrap)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs[0]), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("spread"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 6, 1, nil, "spread"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	// Every broker, asked directly, describes the same cluster.
	var want string
	for _, a := range addrs {
		one, err := kgo.NewClient(kgo.SeedBrokers(a))
		if err != nil {
			t.Fatal(err)
		}
		var got, last string
		testwait.Until(40*time.Second, func() bool {
			md, err := kadm.NewClient(one).Metadata(ctx, "spread")
			last = fmt.Sprintf("err %v, controller %d, %d brokers, topic err %v", err, md.Controller, len(md.Brokers), md.Topics["spread"].Err)
			// A broker answers LEADER_NOT_AVAILABLE for a partition until it
			// has applied the partition's first leader report (a moment after
			// the broker that created the topic): ask again.
			elected := true
			for _, p := range md.Topics["spread"].Partitions {
				elected = elected && p.Err == nil && p.Leader >= 0
			}
			if err == nil && md.Topics["spread"].Err == nil && len(md.Brokers) == 3 && md.Controller >= 1 && elected {
				got = fmt.Sprintf("controller %d brokers %d", md.Controller, len(md.Brokers))
				for _, p := range md.Topics["spread"].Partitions.Sorted() {
					got += fmt.Sprintf(" p%d:l%d:r%v", p.Partition, p.Leader, p.Replicas)
				}
				return true
			}
			return false
		})
		one.Close()
		if got == "" || (want != "" && got != want) {
			t.Fatalf("broker %s: %q, others %q (last: %s)", a, got, want, last)
		}
		want = got
	}
	leaders := map[int32]bool{}
	md, _ := adm.Metadata(ctx, "spread")
	for _, p := range md.Topics["spread"].Partitions {
		leaders[p.Leader] = true
	}
	if len(leaders) != 3 {
		t.Fatalf("partitions led by %v, want all three brokers", leaders)
	}

	t.Logf("metadata agreed after %v", time.Since(start))
	const perPartition = 200
	type ack struct{ off int64 }
	acked := map[int32][]int64{}
	for p := int32(0); p < 6; p++ {
		for i := 0; i < perPartition; i++ {
			r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("p%d-%d", p, i))}
			res := cl.ProduceSync(ctx, r)
			if err := res.FirstErr(); err != nil {
				t.Fatalf("produce to %d: %v", p, err)
			}
			acked[p] = append(acked[p], res[0].Record.Offset)
		}
	}
	t.Logf("produced after %v", time.Since(start))
	parts := map[int32]kgo.Offset{}
	for p := int32(0); p < 6; p++ {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs[2]), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"spread": parts}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[int32]int{}
	total := 0
	for total < 6*perPartition {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			i := got[r.Partition]
			if want := fmt.Sprintf("p%d-%d", r.Partition, i); string(r.Value) != want || r.Offset != acked[r.Partition][i] {
				t.Fatalf("partition %d record %d: %q at %d, want %q at %d", r.Partition, i, r.Value, r.Offset, want, acked[r.Partition][i])
			}
			got[r.Partition]++
			total++
		})
	}

	t.Logf("consumed after %v", time.Since(start))
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("dev-cluster after SIGINT: %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("dev-cluster did not stop within 40s of SIGINT")
	}
	t.Logf("stopped after %v", time.Since(start))
	for i := 1; i <= 3; i++ {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("broker-%d.log", i)))
		if l := strings.Split(strings.TrimSpace(string(b)), "\n"); len(l) > 0 {
			t.Logf("broker %d: %s", i, l[len(l)-1])
		}
	}
}

// freePortRun finds a base port such that base+off is free on 127.0.0.1
// for every offset, below the kernel's ephemeral range (32768 and up on
// Linux), where client connections of other tests cannot take one of them
// between this check and the broker's bind.
func freePortRun(t *testing.T, offsets ...int) int {
	t.Helper()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for try := 0; try < 50; try++ {
		base := 20000 + rng.Intn(12000-200)
		var lns []net.Listener
		ok := true
		for _, off := range offsets {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+off))
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no run of free ports found")
	return 0
}
