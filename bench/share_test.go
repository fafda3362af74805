package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseShareFlags(t *testing.T) {
	c, err := ParseShareFlags([]string{"--bootstrap-server", "a:1", "--partitions", "8", "--consumers", "4",
		"--num-records", "200000", "--record-size", "1024", "--broker-pid", "42", "--json"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	w := c.Workload
	if w.Kind != KindShare || w.Partitions != 8 || w.ConsumersPerSubscription != 4 || w.NumRecords != 200000 ||
		w.RecordSize != 1024 || w.Topics != 1 || w.Subscriptions != 1 || c.BrokerPID != 42 || !c.JSON {
		t.Errorf("parsed %+v, %+v", w, c)
	}
	for _, args := range [][]string{
		{"--num-records", "0"},
		{"--consumers", "0"},
		{"--consumers", "1000"},
		{"--partitions", "0"},
		{"--broker-pid", "-1"},
		{"extra"},
		{"--bootstrap-server", ""},
	} {
		if _, err := ParseShareFlags(args, io.Discard); !errors.Is(err, ErrUsage) && !errors.Is(err, ErrWorkload) {
			t.Errorf("%v: got %v, want a usage or workload error", args, err)
		}
	}
}

func TestShareWorkloadValidate(t *testing.T) {
	w := DefaultWorkload()
	w.Kind, w.NumRecords = KindShare, 10
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Workload){
		"no records":      func(w *Workload) { w.NumRecords = 0 },
		"two topics":      func(w *Workload) { w.Topics = 2 },
		"two subs":        func(w *Workload) { w.Subscriptions = 2 },
		"duration only":   func(w *Workload) { w.NumRecords, w.Duration = 0, time.Second },
		"too many client": func(w *Workload) { w.ConsumersPerSubscription = maxClients + 1 },
	} {
		v := w
		mut(&v)
		if err := v.Validate(); !errors.Is(err, ErrWorkload) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	f, err := os.Open("workloads/share-8p-1k.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sw, err := ParseWorkload(f)
	if err != nil || sw.Kind != KindShare || sw.Partitions != 8 || sw.ConsumersPerSubscription != 4 || sw.NumRecords != 200000 {
		t.Fatalf("share-8p-1k.yaml: %v %+v", err, sw)
	}
	if d := describe(sw); !strings.Contains(d, "share group of 4 workers") || !strings.Contains(d, "classic consumer group of 4") {
		t.Errorf("describe: %s", d)
	}
	// Kafka's tools cannot run it: refused before any tool starts.
	if _, err := RunKafkaTool(context.Background(), sw, RunOptions{Bootstrap: []string{"x:1"}}, LoadgenKafkaShare); !errors.Is(err, ErrUsage) {
		t.Errorf("kafka-share loadgen on a share workload: %v", err)
	}
}

func TestShareFiguresAndFormat(t *testing.T) {
	sf := &ShareFigures{Workers: 4, Acked: 200000, Redelivered: 3, ClassicRecords: 200000, ClassicSeconds: 1,
		ClassicRecordsPerSec: 200000, ClassicFirstRecordMs: 3000, Ratio: 0.5, HaveCPU: true,
		ClassicBrokerCPU: 0.2, ShareBrokerCPU: 2, SettledMs: 5000, SettledRecordsPerSec: 150000, SettledRatio: 0.75}
	r := &Result{Kind: KindShare, Records: 200000, Bytes: 200000 << 10, Seconds: 2, RecordsPerSec: 100000,
		MBPerSec: 97.66, FirstRecordMs: 50, MovedBytes: 400000 << 10, MeasuredSeconds: 7, Share: sf}
	f := figures(r, 2.2, 1, true)
	want := map[string]float64{FigRecs: 100000, FigClassicRecs: 200000, FigShareRatio: 0.5, FigShareCPUPerAck: 10,
		FigClassicCPUPerRc: 1, FigFirst: 50, FigClassicFirst: 3000, FigBrokerCore: 2.2 / 7,
		FigSettledRecs: 150000, FigSettledRatio: 0.75}
	for name, v := range want {
		if got, ok := f[name]; !ok || math.Abs(got-v) > 1e-9*math.Max(1, v) {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, v)
		}
	}
	for _, name := range figureNames(KindShare) {
		if _, ok := f[name]; !ok && name != FigMBps {
			t.Errorf("figure %q in the table but not derived", name)
		}
	}
	// Without the broker's CPU, no per-record CPU figure.
	sf.HaveCPU = false
	if f := figures(r, 0, 0, false); f[FigShareCPUPerAck] != 0 || f[FigClassicCPUPerRc] != 0 {
		t.Errorf("CPU figures without CPU: %v", f)
	}
	sf.HaveCPU = true
	out := FormatResult(r)
	for _, s := range []string{"share group, 4 workers: 200000 records acknowledged, 100000.0 records/sec",
		"3 redelivered", "classic group, 4 members: 200000 records, 200000.0 records/sec, 3000.0 ms to first record",
		"share/classic: 0.50", "10.0 µs per acknowledged record, 1.0 µs per classic record",
		"settled share group (from 5000 ms): 150000.0 records/sec, share/classic 0.75"} {
		if !strings.Contains(out, s) {
			t.Errorf("FormatResult lacks %q:\n%s", s, out)
		}
	}
	// A run too short to settle has no settled figure, and says so.
	sf.SettledRecordsPerSec, sf.SettledRatio = 0, 0
	if f := figures(r, 2.2, 1, true); f[FigSettledRecs] != 0 || f[FigSettledRatio] != 0 {
		t.Errorf("settled figures of a run that did not settle in time: %v", f)
	}
	if out := FormatResult(r); !strings.Contains(out, "too late for a settled figure") {
		t.Errorf("FormatResult of a late settle:\n%s", out)
	}
}

func TestShareStatsMark(t *testing.T) {
	var s shareStats
	for _, o := range []int64{0, 63, 64, 1000, 5} {
		if !s.mark(1, o) {
			t.Errorf("first mark of %d said seen", o)
		}
	}
	if s.mark(1, 63) || s.mark(1, 1000) {
		t.Error("second mark said new")
	}
	if !s.mark(2, 63) {
		t.Error("another partition's offset said seen")
	}
	if s.mark(1, -1) {
		t.Error("a negative offset was marked")
	}
}

// A short share run through compare against Strata and kfake (one
// round, 3,000 records, 2 workers): both groups read every record, the
// share workers acknowledge each once, and the figures are derived. Skipped
// under -short; about 15-25 s here (the build, and each broker's classic
// group waiting out its initial rebalance delay of 3 s).
func TestShareSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds strata and starts brokers")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	w := DefaultWorkload()
	w.Name, w.Kind, w.Partitions, w.RecordSize, w.NumRecords, w.ConsumersPerSubscription = "smoke-share", KindShare, 2, 256, 3000, 2
	c := &CompareConfig{
		Workloads: []Workload{w},
		Brokers:   []string{BrokerStrata, BrokerKfakeMem},
		Rounds:    1,
		StrataSrc: "..",
		WorkDir:   filepath.Join(t.TempDir(), "work"),
		Command:   "test",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := Compare(ctx, c, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	for _, br := range rep.Workloads[0].Brokers {
		if br.Skipped != "" || len(br.Samples) != 1 {
			t.Fatalf("%s: skipped %q, %d samples\n%s", br.Name, br.Skipped, len(br.Samples), progress.String())
		}
		s := br.Samples[0]
		if s.Err != "" || s.Result == nil || s.Result.Share == nil {
			t.Fatalf("%s: %q\n%s", br.Name, s.Err, progress.String())
		}
		sf := s.Result.Share
		if sf.Acked != 3000 || sf.ClassicRecords < 3000 || sf.AckErrors != 0 || !sf.HaveCPU {
			t.Errorf("%s: %+v", br.Name, sf)
		}
		for _, name := range []string{FigRecs, FigClassicRecs, FigShareRatio} {
			if v := br.Median[name]; !(v > 0) {
				t.Errorf("%s: %s = %v", br.Name, name, v)
			}
		}
		// CPU is read from /proc in clock ticks (10 ms): an in-memory
		// broker can ack 3,000 records within one, so 0 is a reading.
		if v, ok := br.Median[FigShareCPUPerAck]; !ok || !(v >= 0) {
			t.Errorf("%s: %s = %v (present %v)", br.Name, FigShareCPUPerAck, v, ok)
		}
	}
	if md := rep.Markdown(); !strings.Contains(md, FigShareRatio) || !strings.Contains(md, "kfake-mem") {
		t.Errorf("markdown:\n%s", md)
	}
}
