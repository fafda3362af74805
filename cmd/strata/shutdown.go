package main

import (
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// Bounded shutdown: SIGTERM ends the process within
// strata.shutdown.timeout.ms (T), whatever state Raft and the clients are
// in. serve splits T between the stages, each bounded on its own:
//
//	Kafka listener   until T/4   reading stops; queued answers are written for up to 2 s
//	                             (or half the share); then connections close and what
//	                             still runs is left behind (protocol.Server.Shutdown)
//	log cleaner                  stops between partitions
//	handoff          until 3T/5  leaderships to live replicas (replication.Broker.CloseContext;
//	                             its own 15 s bound applies too)
//	close            the rest    transport closed first, so nothing waits on a silent peer;
//	                             raft groups stopped, logs flushed and closed
//
// At T the watchdog logs the stage it was in and a summary of every
// goroutine, and exits with status 3 (exitShutdownTimeout) without
// flushing more: whatever the logs hold was written to their files before
// (the page cache keeps it when the process ends), only the fsync and the
// checkpoints are skipped, so a restart recovers from the last recovery
// point, and acknowledged records are committed on a quorum of replicas
// anyway.

// shutdownPlan is when each stage of a shutdown must be done.
type shutdownPlan struct {
	start, listener, handoff, end time.Time
}

func planShutdown(start time.Time, total time.Duration) shutdownPlan {
	return shutdownPlan{
		start:    start,
		listener: start.Add(total / 4),
		handoff:  start.Add(total * 3 / 5),
		end:      start.Add(total),
	}
}

// exitProcess ends the process when the watchdog fires (tests replace it).
var exitProcess = os.Exit

// shutdownWatchdog exits the process if the shutdown is not over by its
// deadline.
type shutdownWatchdog struct {
	logger *slog.Logger
	timer  *time.Timer
	start  time.Time
	total  time.Duration

	mu      sync.Mutex
	stage   string // protected by mu
	stopped bool   // protected by mu
}

func startShutdownWatchdog(plan shutdownPlan, logger *slog.Logger) *shutdownWatchdog {
	w := &shutdownWatchdog{logger: logger, start: plan.start, total: plan.end.Sub(plan.start), stage: "starting"}
	w.timer = time.AfterFunc(time.Until(plan.end), w.fire)
	return w
}

// enter records the stage the shutdown is in, for the watchdog's report.
func (w *shutdownWatchdog) enter(stage string) {
	w.mu.Lock()
	w.stage = stage
	w.mu.Unlock()
}

// stop disarms the watchdog: the shutdown is over.
func (w *shutdownWatchdog) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.timer.Stop()
}

func (w *shutdownWatchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock() // held until the exit: a racing stop() changes nothing
	if w.stopped {
		return
	}
	w.logger.Error("shutdown did not finish within strata.shutdown.timeout.ms; exiting without finishing it",
		"timeout", w.total, "took", time.Since(w.start).Round(time.Millisecond), "stage", w.stage, "exit_status", exitShutdownTimeout)
	for _, g := range goroutineSummary(25) {
		w.logger.Error("still running", "goroutines", g.count, "state", g.state, "at", g.where)
	}
	exitProcess(exitShutdownTimeout)
}

// goroutineGroup is a set of goroutines waiting in the same place.
type goroutineGroup struct {
	count int
	state string // the runtime's wait reason: select, sync.Mutex.Lock, IO wait...
	where string // the innermost frames in Strata or its Raft library, innermost first
}

// goroutineSummary groups every goroutine by its wait state and where it
// waits (its innermost three frames in Strata or hashicorp/raft, else its
// innermost frame), largest groups first, at most limit groups (the rest
// counted in one last line).
func goroutineSummary(limit int) []goroutineGroup {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		if len(buf) >= 64<<20 {
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return summarizeStacks(string(buf), limit)
}

var goroutineHeader = regexp.MustCompile(`^goroutine \d+(?: gp=\S+ m=\S+(?: mp=\S+)?)? \[([^,\]]+)`)

// summarizeStacks is goroutineSummary of a runtime.Stack dump.
func summarizeStacks(dump string, limit int) []goroutineGroup {
	counts := map[[2]string]int{}
	for _, g := range strings.Split(dump, "\n\n") {
		lines := strings.Split(strings.TrimSpace(g), "\n")
		m := goroutineHeader.FindStringSubmatch(lines[0])
		if m == nil {
			continue
		}
		var funcs []string
		for i := 1; i < len(lines); i += 2 { // a function line, then its file:line
			f := lines[i]
			if j := strings.LastIndex(f, "("); j > 0 {
				f = f[:j]
			}
			funcs = append(funcs, f)
		}
		var ours []string
		for _, f := range funcs {
			if strings.HasPrefix(f, "github.com/strata-io/") || strings.HasPrefix(f, "github.com/hashicorp/raft") || strings.HasPrefix(f, "main.") {
				ours = append(ours, shortFunc(f))
				if len(ours) == 3 {
					break
				}
			}
		}
		if len(ours) == 0 && len(funcs) > 0 {
			ours = append(ours, shortFunc(funcs[0]))
		}
		counts[[2]string{m[1], strings.Join(ours, " < ")}]++
	}
	out := make([]goroutineGroup, 0, len(counts))
	for k, n := range counts {
		out = append(out, goroutineGroup{count: n, state: k[0], where: k[1]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].count != out[j].count {
			return out[i].count > out[j].count
		}
		return out[i].where < out[j].where
	})
	if limit > 0 && len(out) > limit {
		rest := 0
		for _, g := range out[limit:] {
			rest += g.count
		}
		out = append(out[:limit], goroutineGroup{count: rest, state: "various", where: fmt.Sprintf("(%d other places)", len(out)-limit)})
	}
	return out
}

// shortFunc drops the module path: replication.(*Broker).Close.
func shortFunc(f string) string {
	if i := strings.LastIndex(f, "/"); i >= 0 {
		return f[i+1:]
	}
	return f
}
