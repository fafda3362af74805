package faults

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/faults/check"
)

var (
	seedFlag     = flag.Int64("faults.seed", 0, "seed of the schedule (0: the test's fixed seeds)")
	durationFlag = flag.Duration("faults.duration", 0, "faults for this long (0: the short run's 75s)")
	kindsFlag    = flag.String("faults.kinds", "all", "faults to draw from, comma-separated: "+fmt.Sprint(AllKinds))
	loopbackFlag = flag.Bool("faults.loopback", false, "the loopback fallback even where namespaces can be made (kill and pause only)")
	brokersFlag  = flag.Int("faults.brokers", 3, "brokers in the cluster (3 or 5)")
	dirFlag      = flag.String("faults.dir", "", "keep the brokers' data, logs and history.json in a new folder under this one")
)

// strataBin is built once by TestMain.
var strataBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "strata-faults-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	strataBin = filepath.Join(dir, "strata")
	build := exec.Command("go", "build", "-o", strataBin, "github.com/strata-io/strata/cmd/strata")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building strata:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestFaults runs 3 brokers in network namespaces under a seeded fault
// schedule with the workload recording, and checks the history. The
// short form (go test without -short) tries every fault kind once in
// about 50 s of faults (about 90 s in all); -args -faults.seed N
// -faults.duration 30m runs a long one by hand.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	loopback := *loopbackFlag
	if err := NetnsAvailable(); err != nil && !loopback {
		t.Logf("no network namespaces here (%v): the loopback fallback, kill and pause only", err)
		loopback = true
	}
	seed, dur := *seedFlag, *durationFlag
	if seed == 0 {
		seed = 1
	}
	if dur == 0 {
		dur = 75 * time.Second
	}
	kinds, err := ParseKinds(*kindsFlag)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if *dirFlag != "" {
		if dir, err = os.MkdirTemp(*dirFlag, "faults-"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d, %v of faults, data and history in %s", seed, dur, dir)
	start := time.Now()
	res, err := Run(context.Background(), Options{Binary: strataBin, Dir: dir, Seed: seed, Duration: dur, Kinds: kinds, Loopback: loopback, Brokers: *brokersFlag,
		Logf: func(f string, a ...any) { t.Logf("%6.1fs "+f, append([]any{time.Since(start).Seconds()}, a...)...) }})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[check.OpType]int{}
	for _, o := range res.History.Ops {
		counts[o.Type]++
	}
	t.Logf("%v: %d produces acknowledged, %d reads; ops %v; admin cycles %d (%d failed)", time.Since(start).Round(time.Second), res.Acked, res.Reads, counts, res.AdminCycles, res.AdminFailed)
	for _, l := range res.DiskHalts {
		t.Logf("stopped on a disk fault (expected): %.300s", l)
	}
	for i, g := range res.Gaps {
		if i == 6 {
			break
		}
		t.Logf("longest time without an acknowledged write: %s", g)
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); !loopback && err == nil && strings.Contains(string(out), nsPrefix) {
		t.Errorf("namespaces left after the run:\n%s", out)
	}
	for _, p := range res.Problems {
		t.Errorf("harness: %s", p)
	}
	if res.Acked == 0 || res.Reads == 0 {
		t.Errorf("the workload did nothing: %d acknowledged, %d reads", res.Acked, res.Reads)
	}
	if len(res.Violations) > 0 {
		rep := check.Report(res.History, res.Violations)
		if len(rep) > 20000 {
			rep = rep[:20000] + "\n..."
		}
		t.Errorf("%s\nhistory: %s", rep, filepath.Join(dir, "history.json"))
	}
	if t.Failed() && *dirFlag == "" {
		t.Logf("rerun with -args -faults.dir DIR to keep the brokers' logs")
	}
}

func TestSchedule(t *testing.T) {
	a := Schedule(7, time.Minute, 500*time.Millisecond, 3, AllKinds)
	b := Schedule(7, time.Minute, 500*time.Millisecond, 3, AllKinds)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("one seed, two schedules")
	}
	seen := map[Kind]bool{}
	var end time.Duration
	for _, s := range a {
		seen[s.Kind] = true
		if s.At < end {
			t.Fatalf("%s overlaps the step before", s)
		}
		end = s.At + s.For
		if s.Target < 1 || s.Target > 3 || (s.Kind == Bridge && (s.Other == s.Target || s.Other < 1 || s.Other > 3)) {
			t.Fatalf("bad targets: %s", s)
		}
		if s.Kind == Pause && s.For < 3*time.Second {
			t.Fatalf("pause shorter than 3 election timeouts: %s", s)
		}
	}
	if end > time.Minute || len(seen) != len(AllKinds) {
		t.Fatalf("a minute's schedule: ends at %v, kinds %v", end, seen)
	}
	if _, err := ParseKinds("kill,nap"); err == nil {
		t.Fatal("nap accepted")
	}
}

var historyFlag = flag.String("faults.history", "", "check this saved history.json instead of running (TestCheckHistory)")

// TestCheckHistory checks a history a run saved: go test
// ./internal/faults -run TestCheckHistory -args -faults.history FILE.
func TestCheckHistory(t *testing.T) {
	if *historyFlag == "" {
		t.Skip("-faults.history FILE checks a saved history")
	}
	b, err := os.ReadFile(*historyFlag)
	if err != nil {
		t.Fatal(err)
	}
	var h check.History
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	if vs := check.Check(&h, check.Config{ResumeWithin: 15 * time.Second}); len(vs) > 0 {
		t.Error(check.Report(&h, vs))
	}
}
