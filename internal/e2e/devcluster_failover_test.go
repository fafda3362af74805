package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestDevClusterFailover is README's failover walk-through with real
// processes: `strata dev-cluster --brokers 3`; the leader of a topic at
// replication factor 3 is SIGKILLed; dev-cluster reports the exit and
// keeps the other two running, which elect a new leader and take acks=all
// writes; `strata dev-cluster status` and `restart N` (another process,
// through the control socket) and a command typed on dev-cluster's
// standard input bring the broker back; every acknowledged record reads
// back in order; Ctrl-C stops it all.
func TestDevClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	start := time.Now()
	port := freePortRun(t, 0, 1, 2, 100, 101, 102)
	dir := t.TempDir()
	cmd := exec.Command(strataBin, "dev-cluster", "--brokers", "3", "--dir", dir, "--port", fmt.Sprint(port),
		"--set", "strata.partition.heartbeat.timeout.ms=500")
	cmd.Env = brokerEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var outLines []string
	var readers sync.WaitGroup
	collect := func(r io.Reader, tag string) {
		defer readers.Done()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			mu.Lock()
			outLines = append(outLines, tag+sc.Text())
			mu.Unlock()
		}
	}
	readers.Add(2)
	go collect(stdout, "")
	go collect(stderr, "E ")
	var waitErr error
	gone := make(chan struct{}) // closed when dev-cluster has exited, after waitErr is set
	go func() { readers.Wait(); waitErr = cmd.Wait(); close(gone) }()
	output := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(outLines, "\n")
	}
	t.Cleanup(func() {
		select {
		case <-gone:
		default:
			cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-gone:
			case <-time.After(40 * time.Second):
				cmd.Process.Kill()
			}
		}
		if t.Failed() {
			t.Logf("dev-cluster output:\n%s", output())
		}
	})
	// waitOutput waits for a line matching re and returns its submatches.
	waitOutput := func(re *regexp.Regexp, timeout time.Duration) []string {
		t.Helper()
		var m []string
		testwait.For(t, timeout, func() bool {
			m = re.FindStringSubmatch(output())
			return m != nil
		}, "no %q in dev-cluster's output within %v", re, timeout)
		return m
	}
	bootstrap := strings.Split(waitOutput(regexp.MustCompile(`(?m)^bootstrap: (.*)$`), 60*time.Second)[1], ",")
	control := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(strataBin, append(append([]string{"dev-cluster"}, args...), "--dir", dir)...).CombinedOutput()
		if err != nil {
			t.Fatalf("strata dev-cluster %v: %v\n%s", args, err, out)
		}
		return string(out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic("walk"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, "walk"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	var values []string
	produce := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("r%d", len(values))
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			values = append(values, v)
		}
	}
	leader := func(not int32) int32 {
		t.Helper()
		var leader int32
		testwait.For(t, 30*time.Second, func() bool {
			md, err := adm.Metadata(ctx, "walk")
			if err != nil {
				return false
			}
			p, ok := md.Topics["walk"].Partitions[0]
			leader = p.Leader
			return ok && p.Err == nil && p.Leader > 0 && p.Leader != not
		}, "walk-0 has no leader other than %d after 30s", not)
		return leader
	}
	produce(50)
	old := leader(-1)
	t.Logf("cluster up, 50 writes: %v", time.Since(start))

	// Kill the leader the way a user would (kill -9 PID from status).
	st := control("status")
	m := regexp.MustCompile(fmt.Sprintf(`broker %d: running, pid (\d+)`, old)).FindStringSubmatch(st)
	if m == nil {
		t.Fatalf("status has no running broker %d:\n%s", old, st)
	}
	pid, _ := strconv.Atoi(m[1])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitOutput(regexp.MustCompile(fmt.Sprintf(`broker %d exited \(signal: killed`, old)), 30*time.Second)
	killed := time.Now()
	// The others go on: a new leader takes acks=all writes.
	nl := leader(old)
	produce(50)
	t.Logf("broker %d killed; broker %d leads and took 50 writes after %v", old, nl, time.Since(killed))
	if !regexp.MustCompile(fmt.Sprintf(`broker %d: exited \(signal: killed`, old)).MatchString(control("status")) {
		t.Fatal("status does not show the killed broker as exited")
	}
	out := control("restart", strconv.Itoa(int(old)))
	if !strings.Contains(out, fmt.Sprintf("broker %d ready", old)) {
		t.Fatalf("restart %d: %s", old, out)
	}
	produce(20)
	t.Logf("broker %d restarted, 20 writes: %v", old, time.Since(killed))

	// The same from dev-cluster's own standard input: stop the new
	// leader, restart it.
	fmt.Fprintf(stdin, "stop %d\n", nl)
	waitOutput(regexp.MustCompile(fmt.Sprintf(`broker %d \(pid \d+\): exit status`, nl)), 40*time.Second)
	produce(20)
	t.Logf("broker %d stopped, 20 writes: %v", nl, time.Since(killed))
	fmt.Fprintf(stdin, "r %d\n", nl)
	waitOutput(regexp.MustCompile(fmt.Sprintf(`broker %d ready`, nl)), 60*time.Second)
	fmt.Fprintln(stdin, "status")
	waitOutput(regexp.MustCompile(`(?s)broker 1: running.*broker 2: running.*broker 3: running`), 10*time.Second)
	produce(20)
	t.Logf("broker %d restarted, 20 writes: %v", nl, time.Since(killed))

	// Every record, read back in order from the restarted broker.
	cons, err := kgo.NewClient(kgo.SeedBrokers(bootstrap[old-1]),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"walk": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for len(got) < len(values) {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("after %d records: %v", len(got), err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if strings.Join(got, ",") != strings.Join(values, ",") {
		t.Fatalf("read back %v, produced %v", got, values)
	}
	if strings.Contains(output(), "stopping the others") {
		t.Fatal("dev-cluster stopped the other brokers")
	}
	t.Logf("%d records read back: %v", len(got), time.Since(killed))
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-gone:
		if waitErr != nil {
			t.Fatalf("dev-cluster after SIGINT: %v", waitErr)
		}
		t.Logf("stopped: %v", time.Since(killed))
	case <-time.After(40 * time.Second):
		t.Fatal("dev-cluster did not stop within 40s of SIGINT")
	}
}
