package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// runTopic runs `strata topic args... --bootstrap-server addr`.
func runTopic(t *testing.T, addr string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"topic"}, args...)
	args = append(args, "--bootstrap-server", addr, "--timeout", "10s")
	code := run(args, nil, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestTopicCLI(t *testing.T) {
	requireStorage(t)
	addr, stop := startServe(t, t.TempDir(), "--set", "log.retention.check.interval.ms=50")
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	mustRun := func(want string, args ...string) string {
		t.Helper()
		code, out, errOut := runTopic(t, addr, args...)
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("strata topic %v: exit %d\nstdout:\n%s\nstderr:\n%s\nwant stdout containing %q", args, code, out, errOut, want)
		}
		return out
	}
	mustFail := func(want string, args ...string) {
		t.Helper()
		code, out, errOut := runTopic(t, addr, args...)
		if code == exitOK || !strings.Contains(errOut, want) {
			t.Fatalf("strata topic %v: exit %d\nstdout:\n%s\nstderr:\n%s\nwant a failure naming %q", args, code, out, errOut, want)
		}
	}

	mustRun("Created topic orders.", "create", "orders", "--partitions", "2", "--config", "retention.ms=5000")
	mustFail("TOPIC_ALREADY_EXISTS", "create", "orders")
	mustRun("", "create", "orders", "--if-not-exists")
	mustFail("INVALID_CONFIG", "create", "bad", "--config", "retention.ms=soon")

	out := mustRun("orders", "list")
	if !strings.Contains(out, "NAME") || !strings.Contains(strings.Join(strings.Fields(out), " "), "orders 2 1") {
		t.Fatalf("list:\n%s", out)
	}
	out = mustRun("Topic: orders\tTopicId: ", "describe", "orders")
	for _, want := range []string{"PartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=5000",
		"\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tLogStartOffset: 0\tHighWatermark: 0",
		"\tTopic: orders\tPartition: 1\t"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}

	// A config change through the CLI takes effect on the running broker:
	// retention.bytes=0 empties partition 0 at the next check (50 ms).
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 30; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	mustRun("Validated config change for topic orders (dry run", "alter-config", "orders", "--set", "retention.bytes=0", "--dry-run")
	if out := mustRun("", "describe", "orders"); !strings.Contains(out, "Configs: retention.ms=5000\n") {
		t.Fatalf("a dry run changed the configs:\n%s", out)
	}
	mustRun("Completed updating config for topic orders: set retention.bytes=0, deleted retention.ms.",
		"alter-config", "orders", "--set", "retention.bytes=0", "--delete", "retention.ms")
	if !testwait.Until(5*time.Second, func() bool {
		out = mustRun("", "describe", "orders")
		return strings.Contains(out, "Partition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tLogStartOffset: 30\tHighWatermark: 30")
	}) {
		t.Fatalf("retention.bytes=0 did not empty partition 0:\n%s", out)
	}
	if !strings.Contains(out, "Configs: retention.bytes=0\n") {
		t.Fatalf("describe after alter-config:\n%s", out)
	}
	mustRun("Completed updating config for topic orders: appended cleanup.policy=compact.", "alter-config", "orders", "--append", "cleanup.policy=compact")
	out = mustRun("cleanup.policy", "describe", "orders", "--all-configs")
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "cleanup.policy delete,compact DYNAMIC_TOPIC_CONFIG") {
		t.Fatalf("describe --all-configs:\n%s", out)
	}
	mustFail("segment.bytes", "alter-config", "orders", "--set", "segment.bytes=-5")
	mustFail("nothing to change", "alter-config", "orders")

	mustRun("Topic orders now has 3 partitions.", "add-partitions", "orders", "--partitions", "3")
	mustFail("INVALID_PARTITIONS", "add-partitions", "orders", "--partitions", "2")
	if out := mustRun("PartitionCount: 3", "describe", "orders"); !strings.Contains(out, "Partition: 2\t") {
		t.Fatalf("describe after add-partitions:\n%s", out)
	}
	mustRun("Deleted topic orders.", "delete", "orders")
	mustFail("orders", "describe", "orders")
	mustFail("unknown command", "frobnicate")
}
