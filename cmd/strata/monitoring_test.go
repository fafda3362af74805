package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// scrape returns the /metrics samples as "name{labels}" -> value.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	body, code := httpGet(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: status %d", code)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

func httpGet(t *testing.T, url string) (string, int) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.StatusCode
}

// A broker with metrics.listener serves /healthz, /readyz, pprof and
// /metrics whose series follow what clients did: bytes in, requests by
// API, the partition's offsets, the group's committed offset and lag.
func TestMonitoringEndpoints(t *testing.T) {
	requireStorage(t)
	cfg, _, err := loadConfig([]string{"--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", t.TempDir(),
		"--set", "metrics.listener=127.0.0.1:0", "--pprof"}, nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	bound := make(chan net.Addr, 1)
	cfg.Monitoring.bound = func(a net.Addr) { bound <- a }
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), ready) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop within 20s")
		}
	}()
	var base, addr string
	for base == "" || addr == "" {
		select {
		case a := <-bound:
			base = "http://" + a.String()
		case a := <-ready:
			addr = a.String()
		case err := <-done:
			t.Fatalf("serve failed: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("serve not ready within 20s")
		}
	}
	if _, code := httpGet(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if _, code := httpGet(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d", code)
	}
	if _, code := httpGet(t, base+"/debug/pprof/"); code != http.StatusOK {
		t.Errorf("/debug/pprof/: %d", code)
	}

	tctx, tcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer tcancel()
	const n = 20
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("mon"),
		kgo.ConsumeTopics("mon"), kgo.ConsumerGroup("mon-group"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(tctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for got < n {
		fs := cl.PollFetches(tctx)
		if tctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, n)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(tctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	m := scrape(t, base)
	want := map[string]float64{
		`kafka_log_high_watermark{partition="0",topic="mon"}`:                             n,
		`kafka_log_log_end_offset{partition="0",topic="mon"}`:                             n,
		`kafka_log_log_start_offset{partition="0",topic="mon"}`:                           0,
		`kafka_consumergroup_current_offset{group="mon-group",partition="0",topic="mon"}`: n,
		`kafka_consumergroup_lag{group="mon-group",partition="0",topic="mon"}`:            0,
		`kafka_network_connection_count`:                                                  -1, // present
		`kafka_server_replicamanager_underreplicatedpartitions`:                           0,
		`kafka_controller_kafkacontroller_activecontrollercount`:                          1,
		`strata_partition_snapshot_installs_total`:                                        -1,
	}
	for k, v := range want {
		g, ok := m[k]
		if !ok {
			t.Errorf("missing series %s", k)
		} else if v >= 0 && g != v {
			t.Errorf("%s = %v, want %v", k, g, v)
		}
	}
	for _, k := range []string{`kafka_network_incoming_byte_total`, `kafka_network_outgoing_byte_total`,
		`kafka_log_size{partition="0",topic="mon"}`, `kafka_coordinator_group_metadata_manager_num_groups{state="Stable"}`,
		`kafka_server_replicamanager_leadercount`, `kafka_server_replicamanager_partitioncount`} {
		if m[k] <= 0 {
			t.Errorf("%s = %v, want > 0", k, m[k])
		}
	}
	var produces, fetchObs float64
	for k, v := range m {
		if strings.HasPrefix(k, `kafka_network_requests_total{request="Produce"`) {
			produces += v
		}
		if k == `kafka_network_request_total_time_seconds_count{request="Fetch"}` {
			fetchObs = v
		}
	}
	if produces < n {
		t.Errorf("Produce requests counted: %v, want >= %d", produces, n)
	}
	if fetchObs == 0 {
		t.Error("no Fetch latency observed")
	}
}

func TestMonitoringSettings(t *testing.T) {
	if _, _, err := loadConfig([]string{"--pprof"}, nil, nil, io.Discard); !errors.Is(err, errConfig) {
		t.Errorf("--pprof without metrics.listener: %v", err)
	}
	if _, _, err := loadConfig([]string{"--set", "metrics.listener=nope"}, nil, nil, io.Discard); !errors.Is(err, errConfig) {
		t.Errorf("bad metrics.listener: %v", err)
	}
	cfg, _, err := loadConfig(nil, nil, nil, io.Discard)
	if err != nil || cfg.Monitoring.Listener != "" || cfg.Monitoring.Pprof {
		t.Errorf("default: %+v, %v", cfg.Monitoring, err)
	}
}
