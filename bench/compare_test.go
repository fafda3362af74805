package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A short compare run (seconds) against the null broker, Strata and a
// 3-broker Strata cluster (topics at replication factor 3), built from
// this module, so CI keeps the tool working end to end: children
// started and stopped, CPU and RSS read, tables, JSON and chart written.
// Figures are not asserted.
func TestCompareSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds strata and starts brokers")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	mk := func(kind string) Workload {
		w := DefaultWorkload()
		w.Name, w.Kind, w.Partitions, w.RecordSize = "smoke-"+kind, kind, 2, 256
		switch kind {
		case KindE2E:
			w.Duration, w.Rate = 500*time.Millisecond, 1000
		default:
			w.NumRecords = 3000
		}
		return w
	}
	out, work := t.TempDir(), filepath.Join(t.TempDir(), "work")
	c := &CompareConfig{
		Workloads: []Workload{mk(KindProduce), mk(KindConsume), mk(KindE2E)},
		Brokers:   []string{BrokerNull, BrokerStrata, BrokerStrata3},
		Rounds:    2,
		StrataSrc: "..",
		OutDir:    out,
		WorkDir:   work,
		Command:   "test",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, progress bytes.Buffer
	if err := compareCLI(ctx, c, &stdout, &progress); err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	var rep Report
	js, err := os.ReadFile(filepath.Join(out, "compare.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Workloads) != 3 {
		t.Fatalf("%d workloads", len(rep.Workloads))
	}
	for _, wr := range rep.Workloads {
		for _, br := range wr.Brokers {
			if br.Name == BrokerStrata3 && (br.Processes != 3 || br.ReplicationFactor != 3) {
				t.Errorf("%s %s: %d processes, replication factor %d (skipped: %q)", wr.Workload.Name, br.Name,
					br.Processes, br.ReplicationFactor, br.Skipped)
			}
			if len(br.Samples) != 2 {
				t.Errorf("%s %s: %d samples, want 2", wr.Workload.Name, br.Name, len(br.Samples))
			}
			for _, s := range br.Samples {
				if s.Err != "" {
					t.Errorf("%s %s round %d: %s", wr.Workload.Name, br.Name, s.Round, s.Err)
				}
			}
			if _, ok := br.Median[FigMBps]; !ok {
				t.Errorf("%s %s: no MB/s median", wr.Workload.Name, br.Name)
			}
			if _, ok := br.Median[FigBrokerCPU]; !ok {
				t.Errorf("%s %s: no broker CPU figure", wr.Workload.Name, br.Name)
			}
			if br.PeakRSSMiB <= 0 {
				t.Errorf("%s %s: no peak RSS", wr.Workload.Name, br.Name)
			}
		}
	}
	// --work-dir keeps the brokers' data dirs (a cluster's broker logs are
	// there; with --out the others' logs go to out/logs).
	if ents, err := os.ReadDir(filepath.Join(work, "w0-strata", "data")); err != nil || len(ents) == 0 {
		t.Errorf("work dir: strata's data dir not kept (%v)", err)
	}
	if st, err := os.Stat(filepath.Join(work, "w2-strata-3", "data", "broker-3.log")); err != nil || st.Size() == 0 {
		t.Errorf("work dir: broker 3's log not kept (%v)", err)
	}
	if st, err := os.Stat(filepath.Join(out, "logs", "smoke-e2e-strata.log")); err != nil || st.Size() == 0 {
		t.Errorf("out dir: strata's log not kept (%v)", err)
	}
	md, _ := os.ReadFile(filepath.Join(out, "compare.md"))
	if !strings.Contains(string(md), "| strata |") || !strings.Contains(string(md), "#### smoke-e2e") ||
		!strings.Contains(string(md), "| strata-3 (RF 3, 3 processes) |") {
		t.Errorf("markdown:\n%s", md)
	}
	f, err := os.Open(filepath.Join(out, "compare.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("chart: %v", err)
	}
	t.Logf("%s\n%s", progress.String(), stdout.String())
}

// A --work-dir holding an earlier run's files is refused before any broker
// starts (they would start on its data).
func TestCompareRefusesNonEmptyWorkDir(t *testing.T) {
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "left-over"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &CompareConfig{Workloads: []Workload{DefaultWorkload()}, Brokers: []string{BrokerNull}, Rounds: 1,
		WorkDir: work, StrataBin: "/nonexistent/strata"}
	_, err := Compare(context.Background(), c, io.Discard)
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("err %v, want a usage error naming the non-empty work dir", err)
	}
}

func TestChartAndMarkdownOfSyntheticReport(t *testing.T) {
	wr := WorkloadReport{Workload: DefaultWorkload(), Figures: figureNames(KindProduce)}
	wr.Workload.Name = "p"
	wr.Brokers = []BrokerReport{
		{Name: "a", Samples: []Sample{{Figures: map[string]float64{FigMBps: 100}}}},
		{Name: "b", Samples: []Sample{{Figures: map[string]float64{FigMBps: 150}}}},
		{Name: "c", Skipped: "not here"},
	}
	summarize(&wr)
	e := WorkloadReport{Workload: DefaultWorkload(), Figures: figureNames(KindE2E)}
	e.Workload.Name, e.Workload.Kind = "e", KindE2E
	e.Brokers = []BrokerReport{{Name: "a", Samples: []Sample{{Figures: map[string]float64{FigE2EP50: 0.5, FigE2EP99: 2, FigE2EP999: 9}}}}}
	summarize(&e)
	rep := &Report{Command: "x", Rounds: 1, Workloads: []WorkloadReport{wr, e}}
	md := rep.Markdown()
	if !strings.Contains(md, "| b | 150 (1.50x) |") || !strings.Contains(md, "| c | skipped: not here |") {
		t.Errorf("markdown:\n%s", md)
	}
	b, err := Chart(rep)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil || img.Bounds().Dx() == 0 {
		t.Fatalf("png: %v", err)
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
}
