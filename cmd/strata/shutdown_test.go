package main

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestShutdownTimeoutSetting(t *testing.T) {
	cfg, _, err := loadConfig(nil, nil, nil, nil)
	if err != nil || cfg.ShutdownTimeout != 20*time.Second {
		t.Fatalf("default: %v %v", cfg.ShutdownTimeout, err)
	}
	cfg, _, err = loadConfig([]string{"--set", "strata.shutdown.timeout.ms=8000"}, nil, nil, nil)
	if err != nil || cfg.ShutdownTimeout != 8*time.Second {
		t.Fatalf("set: %v %v", cfg.ShutdownTimeout, err)
	}
	cfg, _, err = loadConfig(nil, []string{"STRATA_STRATA_SHUTDOWN_TIMEOUT_MS=60000"}, nil, nil)
	if err != nil || cfg.ShutdownTimeout != time.Minute {
		t.Fatalf("from the environment: %v %v", cfg.ShutdownTimeout, err)
	}
	for _, bad := range []string{"strata.shutdown.timeout.ms=999", "strata.shutdown.timeout.ms=3600001", "strata.shutdown.timeout.ms=-1", "strata.shutdown.timeout.ms=20s"} {
		_, _, err := loadConfig([]string{"--set", bad}, nil, nil, nil)
		if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "strata.shutdown.timeout.ms") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestPlanShutdown(t *testing.T) {
	start := time.Unix(1000, 0)
	p := planShutdown(start, 20*time.Second)
	if p.listener.Sub(start) != 5*time.Second || p.handoff.Sub(start) != 12*time.Second || p.end.Sub(start) != 20*time.Second {
		t.Fatalf("%+v", p)
	}
}

// The watchdog, not stopped in time, logs where the process waits and
// exits with exitShutdownTimeout; stopped in time, it does nothing.
func TestShutdownWatchdog(t *testing.T) {
	var mu sync.Mutex
	codes := []int{}
	exited := make(chan struct{}, 1)
	old := exitProcess
	exitProcess = func(code int) {
		mu.Lock()
		codes = append(codes, code)
		mu.Unlock()
		exited <- struct{}{}
	}
	defer func() { exitProcess = old }()

	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	w := startShutdownWatchdog(planShutdown(time.Now(), 50*time.Millisecond), logger)
	w.enter("closing the broker")
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog did not fire")
	}
	w.stop()
	out := logs.String()
	for _, want := range []string{`msg="shutdown did not finish within strata.shutdown.timeout.ms`, `stage="closing the broker"`, "exit_status=3",
		`msg="still running"`, "TestShutdownWatchdog"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}

	w = startShutdownWatchdog(planShutdown(time.Now(), 50*time.Millisecond), logger)
	w.stop()
	select {
	case <-exited:
		t.Fatal("a stopped watchdog fired")
	case <-time.After(200 * time.Millisecond):
	}
	mu.Lock()
	defer mu.Unlock()
	if len(codes) != 1 || codes[0] != exitShutdownTimeout {
		t.Fatalf("exit codes %v", codes)
	}
}

func TestSummarizeStacks(t *testing.T) {
	dump := `goroutine 1 gp=0x1 m=nil [sync.WaitGroup.Wait, 2 minutes]:
runtime.gopark(0x1)
	/go/src/runtime/proc.go:462 +0xce
sync.(*WaitGroup).Wait(0x7e2019345c8)
	/go/src/sync/waitgroup.go:206 +0x85
github.com/hashicorp/raft.(*shutdownFuture).Error(0x7e201d86068)
	/raft/future.go:175 +0x29
github.com/strata-io/strata/replication.(*partitionGroup).shutdown(0x1, 0x2)
	/strata/replication/partition_group.go:353 +0x52
github.com/strata-io/strata/replication.(*Broker).closeGroups(0x1)
	/strata/replication/partition_group.go:372 +0x117
main.serve(0x1)
	/strata/cmd/strata/serve.go:220 +0x1d05

goroutine 7 [select]:
runtime.gopark(0x1)
	/go/src/runtime/proc.go:462 +0xce
github.com/strata-io/strata/replication.(*clientConn).wait(0x1)
	/strata/replication/transport.go:790 +0x1
github.com/strata-io/strata/replication.(*GroupTransport).rpc(0x1)
	/strata/replication/transport.go:1112 +0x1

goroutine 8 [select]:
runtime.gopark(0x1)
	/go/src/runtime/proc.go:462 +0xce
github.com/strata-io/strata/replication.(*clientConn).wait(0x1)
	/strata/replication/transport.go:790 +0x1
github.com/strata-io/strata/replication.(*GroupTransport).rpc(0x1)
	/strata/replication/transport.go:1112 +0x1

goroutine 9 [IO wait]:
internal/poll.runtime_pollWait(0x1)
	/go/src/runtime/netpoll.go:351 +0x85
`
	got := summarizeStacks(dump, 2)
	want := []goroutineGroup{
		{2, "select", "replication.(*clientConn).wait < replication.(*GroupTransport).rpc"},
		{1, "IO wait", "poll.runtime_pollWait"},
		{1, "various", "(1 other places)"},
	}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("group %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	all := summarizeStacks(dump, 0)
	if len(all) != 3 || all[2].where != "raft.(*shutdownFuture).Error < replication.(*partitionGroup).shutdown < replication.(*Broker).closeGroups" || all[2].state != "sync.WaitGroup.Wait" {
		t.Fatalf("%+v", all)
	}
}
