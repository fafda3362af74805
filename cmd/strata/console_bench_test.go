package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsoleProduceOverhead measures produce throughput with the console
// open and refreshing against without: six rounds of runs of
// STRATA_CONSOLE_BENCH_SECONDS (default 5) in three modes (closed; open on
// a group's page, polling as the page does every 2 s; every view's API
// every 2 s), the lag sampler at 1 s over 20 groups throughout; it logs
// each mode's median and its ratio to closed, and the CPU of one refresh
// of every view.
// Only with STRATA_CONSOLE_BENCH=1 (README "Monitoring" has the figures).
func TestConsoleProduceOverhead(t *testing.T) {
	if os.Getenv("STRATA_CONSOLE_BENCH") != "1" {
		t.Skip("set STRATA_CONSOLE_BENCH=1 to measure")
	}
	secs := 5
	fmt.Sscan(os.Getenv("STRATA_CONSOLE_BENCH_SECONDS"), &secs)
	addr, ui := startServeConsole(t, "--set", "strata.console.lag.sample.ms=1000", "--set", "strata.console.lag.history.eager=true")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if r, err := adm.CreateTopic(ctx, 4, 1, nil, "bench"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	// 20 groups with commits on every partition: the sampler's work.
	for g := range 20 {
		os := kadm.Offsets{}
		for p := range int32(4) {
			os.Add(kadm.Offset{Topic: "bench", Partition: p, At: 0, LeaderEpoch: -1})
		}
		if _, err := adm.CommitOffsets(ctx, fmt.Sprintf("g%d", g), os); err != nil {
			t.Fatal(err)
		}
	}
	views := []string{"api/info", "api/cluster", "api/raft", "api/topics", "api/groups", "api/groups/g0", "api/share-groups/none", "api/topics/bench"}
	poll := func() {
		for _, p := range views {
			if resp, err := http.Get(ui + p); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
	// The process's CPU per refresh of every view, idle otherwise (the
	// HTTP client's share included: an upper bound of the broker's).
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	poll()
	c0 := cpu()
	for range 20 {
		poll()
	}
	t.Logf("CPU per refresh of all %d views (in-process broker and client): %v", len(views), ((cpu() - c0) / 20).Round(10*time.Microsecond))
	value := make([]byte, 1024)
	// run produces for secs with the console polled as views every 2 s
	// (none: closed) and returns records per second.
	run := func(views []string) float64 {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		if len(views) > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(2 * time.Second)
				defer tick.Stop()
				for {
					for _, p := range views {
						if resp, err := http.Get(ui + p); err == nil {
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					}
					select {
					case <-stop:
						return
					case <-tick.C:
					}
				}
			}()
		}
		var n atomic.Int64
		start := time.Now()
		deadline := start.Add(time.Duration(secs) * time.Second)
		for time.Now().Before(deadline) {
			cl.Produce(ctx, &kgo.Record{Topic: "bench", Value: value}, func(_ *kgo.Record, err error) {
				if err == nil {
					n.Add(1)
				}
			})
		}
		cl.Flush(ctx)
		rate := float64(n.Load()) / time.Since(start).Seconds()
		close(stop)
		wg.Wait()
		return rate
	}
	// Modes in rotation, so that the machine's drift hits each alike:
	// closed; a page open on a group (what the page polls: info and the
	// view); every view at once.
	modes := []struct {
		name  string
		views []string
	}{{"closed", nil}, {"open on a group", []string{"api/info", "api/groups/g0"}}, {"every view", views}}
	rates := make([][]float64, len(modes))
	for round := range 6 {
		for i := range modes {
			m := (i + round) % len(modes)
			rates[m] = append(rates[m], run(modes[m].views))
		}
	}
	median := func(xs []float64) float64 {
		s := append([]float64(nil), xs...)
		sort.Float64s(s)
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	base := median(rates[0])
	for i, m := range modes {
		t.Logf("%-16s median %6.0f records/s (ratio %.3f) of %.0f", m.name, median(rates[i]), median(rates[i])/base, rates[i])
	}
}
