package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// runBroker runs `strata broker args... --bootstrap-server addr`.
func runBroker(t *testing.T, addr string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"broker"}, args...)
	args = append(args, "--bootstrap-server", addr, "--timeout", "10s")
	code := run(args, nil, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestBrokerConfigCLI: `strata broker alter-config` sets a dynamic
// log.retention.bytes on a running broker, retention deletes segments
// because of it, describe-config shows the sources, and the setting is
// still there after a restart.
func TestBrokerConfigCLI(t *testing.T) {
	requireStorage(t)
	dir := t.TempDir()
	addr, stop := startServe(t, dir, "--set", "log.retention.check.interval.ms=50", "--set", "log.segment.bytes=1024")
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	mustRun := func(addr, want string, args ...string) string {
		t.Helper()
		code, out, errOut := runBroker(t, addr, args...)
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("strata broker %v: exit %d\nstdout:\n%s\nstderr:\n%s\nwant stdout containing %q", args, code, out, errOut, want)
		}
		return out
	}
	mustFail := func(want string, args ...string) {
		t.Helper()
		code, out, errOut := runBroker(t, addr, args...)
		if code == exitOK || !strings.Contains(errOut, want) {
			t.Fatalf("strata broker %v: exit %d\nstdout:\n%s\nstderr:\n%s\nwant a failure naming %q", args, code, out, errOut, want)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("logs"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 40; i++ {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(strings.Repeat("x", 100))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	mustFail("--broker ID (one) or --default", "alter-config", "--set", "log.retention.bytes=0")
	mustFail("INVALID_REQUEST", "alter-config", "--broker", "1", "--set", "num.partitions=3")
	mustFail("log.retention.bytes", "alter-config", "--default", "--set", "log.retention.bytes=lots")
	mustRun(addr, "Validated config change for broker 1 (dry run", "alter-config", "--broker", "1", "--set", "log.retention.bytes=0", "--dry-run")
	mustRun(addr, "Completed updating config for the cluster-wide default: set log.retention.bytes=99999999.",
		"alter-config", "--default", "--set", "log.retention.bytes=99999999")
	mustRun(addr, "Completed updating config for broker 1: set log.retention.bytes=0.",
		"alter-config", "--broker", "1", "--set", "log.retention.bytes=0")

	adm := kadm.NewClient(cl)
	testwait.For(t, 10*time.Second, func() bool {
		starts, err := adm.ListStartOffsets(ctx, "logs")
		if err != nil {
			t.Fatal(err)
		}
		lo, _ := starts.Lookup("logs", 0)
		return lo.Offset > 0
	}, "dynamic log.retention.bytes=0 deleted no segment")

	describe := func(addr string) {
		t.Helper()
		out := mustRun(addr, "Dynamic configs for broker 1 are:", "describe-config")
		want := "  log.retention.bytes=0 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes=0, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=99999999, DEFAULT_CONFIG:log.retention.bytes=-1}\n"
		if !strings.Contains(out, want) || strings.Contains(out, "log.segment.bytes") {
			t.Fatalf("describe-config:\n%s\nwant %q", out, want)
		}
		out = mustRun(addr, "All configs for broker 1 are:", "describe-config", "--broker", "1", "--all")
		if !strings.Contains(out, "  log.segment.bytes=1024 sensitive=false synonyms={STATIC_BROKER_CONFIG:log.segment.bytes=1024, DEFAULT_CONFIG:log.segment.bytes=1073741824}\n") {
			t.Fatalf("describe-config --all:\n%s", out)
		}
		out = mustRun(addr, "Default configs for brokers in the cluster are:", "describe-config", "--default")
		if !strings.Contains(out, "  log.retention.bytes=99999999 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.bytes=99999999, DEFAULT_CONFIG:log.retention.bytes=-1}\n") {
			t.Fatalf("describe-config --default:\n%s", out)
		}
	}
	describe(addr)

	cl.Close()
	stopped = true
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	addr2, stop2 := startServe(t, dir, "--set", "log.retention.check.interval.ms=50", "--set", "log.segment.bytes=1024")
	defer stop2()
	describe(addr2)
}

// countRecords reads topic's partition 0 from the start to its high
// watermark and returns how many records it holds.
func countRecords(t *testing.T, ctx context.Context, addr, topic string) int {
	t.Helper()
	adm := kadm.NewClient(mustClient(t, addr))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cl := mustClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	n := 0
	for last := int64(-1); last < end.Offset-1; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v", topic, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { n, last = n+1, r.Offset })
	}
	return n
}

func mustClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestDynamicCleanerBackoff: log.cleaner.backoff.ms is dynamic, as in
// Kafka. With an hour's backoff set statically nothing is compacted; once
// the cluster default is lowered at run time, the cleaner compacts at its
// next check.
func TestDynamicCleanerBackoff(t *testing.T) {
	requireStorage(t)
	addr, stop := startServe(t, t.TempDir(), "--set", "log.cleaner.backoff.ms=3600000")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(mustClient(t, addr))
	configs := map[string]*string{"cleanup.policy": ptr("compact"), "segment.bytes": ptr("1024"), "min.cleanable.dirty.ratio": ptr("0.01")}
	if resp, err := adm.CreateTopic(ctx, 1, 1, configs, "cmp"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	prod := mustClient(t, addr, kgo.DefaultProduceTopic("cmp"))
	const n = 300
	for i := 0; i < n; i++ {
		r := &kgo.Record{Key: []byte{byte('a' + i%5)}, Value: []byte(strings.Repeat("v", 40))}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if got := countRecords(t, ctx, addr, "cmp"); got != n {
		t.Fatalf("%d records before the change, want %d (compacted with an hour's backoff?)", got, n)
	}
	code, out, errOut := runBroker(t, addr, "alter-config", "--default", "--set", "log.cleaner.backoff.ms=50")
	if code != exitOK {
		t.Fatalf("alter-config: %d %s %s", code, out, errOut)
	}
	testwait.For(t, 5*time.Second, func() bool { return countRecords(t, ctx, addr, "cmp") < n },
		"no compaction after log.cleaner.backoff.ms=50")
	_, out, _ = runBroker(t, addr, "describe-config", "--broker", "1")
	if !strings.Contains(out, "  log.cleaner.backoff.ms=50 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=50, STATIC_BROKER_CONFIG:log.cleaner.backoff.ms=3600000, DEFAULT_CONFIG:log.cleaner.backoff.ms=15000}\n") {
		t.Fatalf("describe-config:\n%s", out)
	}
}

func ptr(s string) *string { return &s }
