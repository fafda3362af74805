package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/procs"
	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/log"
)

// requireStorage skips while the storage engine is still a stub.
func requireStorage(t *testing.T) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Skipf("log.Manager not implemented yet: %v", r)
		}
	}()
	m, err := log.OpenManager(log.ManagerOptions{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

// startServe runs serve in the background on 127.0.0.1:0 and returns the
// address and a function that stops it and returns serve's result.
func startServe(t *testing.T, dir string, extra ...string) (string, func() error) {
	t.Helper()
	args := append([]string{"--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", dir}, extra...)
	cfg, _, err := loadConfig(args, nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() { done <- serve(ctx, nil, cfg, logger, ready) }()
	select {
	case addr := <-ready:
		return addr.String(), func() error {
			cancel()
			select {
			case err := <-done:
				return err
			case <-time.After(20 * time.Second):
				t.Fatal("serve did not stop within 20s")
				return nil
			}
		}
	case err := <-done:
		cancel()
		t.Fatalf("serve failed: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("serve not ready within 20s")
	}
	return "", nil
}

// Records produced before a clean shutdown are all there after a restart.
func TestServeRestartKeepsRecords(t *testing.T) {
	requireStorage(t)
	dir := t.TempDir()
	addr, stop := startServe(t, dir, "--set", "num.partitions=3")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("e2e"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	addr, stop = startServe(t, dir)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("second shutdown: %v", err)
		}
	}()
	cl, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("e2e"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]bool{}
	parts := map[int32]bool{}
	for len(seen) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d records after restart", len(seen), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)] = true
			parts[r.Partition] = true
		})
	}
	if len(parts) != 3 {
		t.Errorf("records in %d partitions, want 3 (num.partitions)", len(parts))
	}
}

func TestServeListenError(t *testing.T) {
	requireStorage(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg, _, err := loadConfig([]string{"--listeners", "PLAINTEXT://" + ln.Addr().String(), "--log-dirs", t.TempDir()}, nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = serve(context.Background(), nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err == nil || exitCodeFor(err) != exitError {
		t.Fatalf("err = %v", err)
	}
}

func TestServeNodeIDMismatchIsConfigError(t *testing.T) {
	requireStorage(t)
	dir := t.TempDir()
	_, stop := startServe(t, dir)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := loadConfig([]string{"--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", dir, "--node-id", "9"}, nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = serve(context.Background(), nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if exitCodeFor(err) != exitConfig {
		t.Fatalf("err = %v (exit %d)", err, exitCodeFor(err))
	}
}

// Idle mode end to end: a broker with no requests for strata.idle.after.ms
// goes down to one scheduler P; the next client's produce is answered and
// ends idle mode, and a consumer of the idle broker reads every record.
func TestServeIdleModeEndsOnFirstRequest(t *testing.T) {
	requireStorage(t)
	full := runtime.GOMAXPROCS(0)
	if full == 1 {
		t.Skip("one CPU: idle mode has nothing to shrink")
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Skip("GOMAXPROCS set: idle mode is off by design")
	}
	addr, stop := startServe(t, t.TempDir(), "--set", "strata.idle.after.ms=200", "--set", "num.partitions=2")
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if runtime.GOMAXPROCS(0) != full {
			t.Errorf("GOMAXPROCS %d after shutdown, want %d", runtime.GOMAXPROCS(0), full)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(from, n int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("idle"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for i := from; i < from+n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, 10)

	waitIdle := func() {
		t.Helper()
		testwait.For(t, 10*time.Second, procs.Shrunk, "the broker did not go idle within 10 s of its last request")
		if got := runtime.GOMAXPROCS(0); got != 1 {
			t.Fatalf("idle with GOMAXPROCS %d", got)
		}
	}
	waitIdle()
	_, grew := procs.Transitions()
	produce(10, 10)
	if _, g := procs.Transitions(); g == grew {
		t.Fatal("a produce on an idle broker did not end idle mode")
	}

	waitIdle()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("idle"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]bool{}
	for len(seen) < 20 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of 20 records", len(seen))
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
}
