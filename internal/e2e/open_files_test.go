package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestOpenFileLimitRefusesPartitions: each idle partition replica keeps a
// few files open, so a broker's open-file limit bounds the replicas it can
// host. At 10,000 partitions under a limit of 20,000 the brokers failed to
// open partitions ("too many open files") and stopped on storage errors.
// A broker started with a limit of 1,200 files (sh's ulimit, which Go's
// raise at start cannot exceed) warns at start that it allows fewer
// replicas than max.broker.partitions, hosts a topic that fits, and
// refuses one that does not with POLICY_VIOLATION naming the open-file
// limit -- and stays up.
func TestOpenFileLimitRefusesPartitions(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	addr := freeAddr(t)
	var mu sync.Mutex
	logs := new(bytes.Buffer)
	cmd := exec.Command(sh, "-c", `ulimit -n 1200 && exec "$@"`, "sh", strataBin, "serve",
		"--set", "listeners=PLAINTEXT://"+addr, "--set", "log.dirs="+t.TempDir())
	cmd.Env = brokerEnv()
	cmd.Stdout = &lockedWriter{mu: &mu, buf: logs}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			mu.Lock()
			t.Logf("broker log:\n%s", logs.String())
			mu.Unlock()
		}
	})
	logged := func(s string) bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), s)
	}
	testwait.For(t, 60*time.Second, func() bool { return logged("strata ready") }, "the broker ready")
	// (1200-1024)/FDsPerReplica: 1 file per idle replica (its .log).
	if !logged("the open-file limit allows fewer partition replicas than max.broker.partitions") || !logged("replicas_allowed=176") {
		t.Fatal("no warning at start about the open-file limit allowing 176 replicas ((1200-1024)/1)")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if r, err := adm.CreateTopic(ctx, 170, 1, nil, "fits"); err != nil || r.Err != nil {
		t.Fatalf("170 partitions under a capacity of 176: %v %v %q", err, r.Err, r.ErrMessage)
	}
	r, err := adm.CreateTopic(ctx, 10, 1, nil, "past") // err is the topic's error
	if err != nil && err != r.Err {
		t.Fatal(err)
	}
	if r.Err != kerr.PolicyViolation || !strings.Contains(r.ErrMessage, "open-file limit") {
		t.Fatalf("10 more partitions past the open-file limit's 176: %v %q, want POLICY_VIOLATION naming the open-file limit", r.Err, r.ErrMessage)
	}
	// Still serving: the topic that fit takes a write.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "fits", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce after the refusal: %v", err)
	}
	select {
	case <-done:
		t.Fatal("the broker exited")
	default:
	}
}
