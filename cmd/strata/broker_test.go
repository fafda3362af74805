package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
	for i := 0; ; i++ {
		starts, err := adm.ListStartOffsets(ctx, "logs")
		if err != nil {
			t.Fatal(err)
		}
		if lo, _ := starts.Lookup("logs", 0); lo.Offset > 0 {
			break
		}
		if i == 200 {
			t.Fatal("dynamic log.retention.bytes=0 deleted no segment")
		}
		time.Sleep(50 * time.Millisecond)
	}

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
