package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMetricsScrapeCost measures a /metrics scrape of a broker with
// STRATA_SCRAPE_PARTITIONS partitions (default 1,000: 10 topics) and
// STRATA_SCRAPE_GROUPS consumer groups (default 100, each committed on
// every partition of one topic, with a lag): the scrape's time, its size
// and the process CPU it costs. The long form of the metrics tests: it
// runs only with STRATA_SCRAPE_BENCH=1 (README "Monitoring" has the
// figures).
func TestMetricsScrapeCost(t *testing.T) {
	if os.Getenv("STRATA_SCRAPE_BENCH") == "" {
		t.Skip("set STRATA_SCRAPE_BENCH=1 to measure the scrape cost")
	}
	requireStorage(t)
	envInt := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
			return v
		}
		return def
	}
	partitions, groups := envInt("STRATA_SCRAPE_PARTITIONS", 1000), envInt("STRATA_SCRAPE_GROUPS", 100)
	const perTopic = 100
	topics := max(partitions/perTopic, 1)

	cfg, _, err := loadConfig([]string{"--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", t.TempDir(),
		"--set", "metrics.listener=127.0.0.1:0"}, nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	bound := make(chan net.Addr, 1)
	cfg.Monitoring.bound = func(a net.Addr) { bound <- a }
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), ready) }()
	defer func() { cancel(); <-done }()
	base := "http://" + (<-bound).String()
	addr := (<-ready).String()

	tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer tcancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	start := time.Now()
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprintf("scrape-%02d", i)
		if _, err := adm.CreateTopic(tctx, perTopic, 1, nil, names[i]); err != nil {
			t.Fatal(err)
		}
	}
	// Ten records in every partition; the groups commit offset 5.
	var recs []*kgo.Record
	for _, n := range names {
		for p := range int32(perTopic) {
			for i := range 10 {
				recs = append(recs, &kgo.Record{Topic: n, Partition: p, Value: []byte(strconv.Itoa(i))})
			}
		}
	}
	if err := cl.ProduceSync(tctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for g := range groups {
		offs := kadm.Offsets{}
		n := names[g%topics]
		for p := range int32(perTopic) {
			offs.Add(kadm.Offset{Topic: n, Partition: p, At: 5, LeaderEpoch: -1})
		}
		if err := adm.CommitAllOffsets(tctx, fmt.Sprintf("scrape-g%03d", g), offs); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("set up %d partitions, %d groups x %d partitions in %v", topics*perTopic, groups, perTopic, time.Since(start).Round(time.Millisecond))

	scrape(t, base) // warm-up: the windows' first samples, the timestamp reads
	const rounds = 20
	var took []time.Duration
	var size int
	cpu0 := processCPU()
	for range rounds {
		s := time.Now()
		body, _ := httpGet(t, base+"/metrics")
		took = append(took, time.Since(s))
		size = len(body)
	}
	cpu := (processCPU() - cpu0) / rounds
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	m := scrape(t, base)
	t.Logf("scrape: %d partitions, %d groups: median %v, max %v, %d bytes (%d series), process CPU %v per scrape (the HTTP client's share included)",
		topics*perTopic, groups, took[rounds/2].Round(time.Microsecond), took[rounds-1].Round(time.Microsecond), size, len(m), cpu.Round(time.Microsecond))
	if _, ok := m[`strata_consumergroup_lag_growth_rate{group="scrape-g000",partition="0",topic="scrape-00"}`]; !ok {
		t.Error("no growth rate series for scrape-g000")
	}
}

// processCPU is the user and system CPU this process used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
