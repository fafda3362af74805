package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseProduceFlags(t *testing.T) {
	c, err := ParseRunFlags(KindProduce, []string{"--bootstrap-server", "a:1,b:2", "--num-records", "1000",
		"--record-size", "100", "--throughput", "-1", "--acks", "all", "--compression", "lz4", "--linger", "2ms",
		"--batch-size", "16384", "--partitions", "8", "--keys", "4", "--json"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	w := c.Workload
	if len(c.Bootstrap) != 2 || c.Bootstrap[1] != "b:2" || !c.JSON {
		t.Errorf("bootstrap %v json %v", c.Bootstrap, c.JSON)
	}
	if w.Kind != KindProduce || w.NumRecords != 1000 || w.RecordSize != 100 || w.Rate != 0 || w.Acks != "all" ||
		!w.Idempotence || w.Compression != "lz4" || w.Linger != 2*time.Millisecond || w.BatchSize != 16384 ||
		w.Partitions != 8 || w.Keys != 4 {
		t.Errorf("workload %+v", w)
	}
}

func TestParseRunFlagsAcksAndIdempotence(t *testing.T) {
	c, err := ParseRunFlags(KindProduce, []string{"--num-records", "1", "--acks", "1"}, io.Discard)
	if err != nil || c.Workload.Idempotence {
		t.Fatalf("acks=1 should turn idempotence off by default: %v %+v", err, c)
	}
	c, err = ParseRunFlags(KindProduce, []string{"--num-records", "1", "--acks", "-1"}, io.Discard)
	if err != nil || c.Workload.Acks != "all" {
		t.Fatalf("acks=-1 is all: %v", err)
	}
	_, err = ParseRunFlags(KindProduce, []string{"--num-records", "1", "--acks", "0", "--idempotence"}, io.Discard)
	if !errors.Is(err, ErrWorkload) {
		t.Errorf("explicit idempotence with acks=0: %v", err)
	}
}

func TestParseRunFlagsErrors(t *testing.T) {
	cases := [][]string{
		{"--num-records", "1", "--bogus"},
		{"--num-records", "1", "extra"},
		{}, // no count, no duration
		{"--num-records", "1", "--bootstrap-server", ","},
		{"--num-records", "1", "--partitions", "0"},
		{"--num-records", "x"},
	}
	for _, args := range cases {
		if _, err := ParseRunFlags(KindProduce, args, io.Discard); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
	// e2e defaults to 10s at 5000 records/s.
	c, err := ParseRunFlags(KindE2E, nil, io.Discard)
	if err != nil || c.Workload.Duration != 10*time.Second || c.Workload.Rate != 5000 {
		t.Fatalf("e2e defaults: %v %+v", err, c)
	}
	if _, err := ParseRunFlags(KindConsume, []string{"--duration", "1s"}, io.Discard); err == nil {
		t.Error("consume without a record count")
	}
}

func TestParseCompareFlags(t *testing.T) {
	c, err := ParseCompareFlags([]string{"--brokers", "null,strata", "--rounds", "2", "--external", "x=h:1",
		"workloads/produce-8p-1k.yaml", "workloads/e2e-5k.yaml"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Brokers, ",") != "null,strata,x" || c.Rounds != 2 || len(c.Workloads) != 2 ||
		c.External["x"] != "h:1" || c.Workloads[1].Kind != KindE2E {
		t.Errorf("%+v", c)
	}
	c, err = ParseCompareFlags([]string{"--brokers", "strata,strata-3", "--replication-factor", "strata=1",
		"--replication-factor", "strata-3=2", "workloads/produce-8p-1k.yaml"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.replicationFactor(BrokerStrata) != 1 || c.replicationFactor(BrokerStrata3) != 2 || c.replicationFactor(BrokerNull) != 1 {
		t.Errorf("replication factors %v", c.ReplicationFactor)
	}
	if c, _ := ParseCompareFlags([]string{"--brokers", "strata-3", "workloads/produce-8p-1k.yaml"}, io.Discard); c.replicationFactor(BrokerStrata3) != 3 {
		t.Error("strata-3 defaults to replication factor 3")
	}
	c, err = ParseCompareFlags([]string{"--brokers", "strata-base,strata,strata-base-fsync", "--strata-base", "/tmp/old-strata",
		"workloads/e2e-5k.yaml"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Brokers, ",") != "strata-base,strata,strata-base-fsync" || c.StrataBaseBin != "/tmp/old-strata" {
		t.Errorf("%+v", c)
	}
	for _, args := range [][]string{
		{"--brokers", "nope", "workloads/e2e-5k.yaml"},
		{"--brokers", "null,null", "workloads/e2e-5k.yaml"},
		{"--rounds", "0", "workloads/e2e-5k.yaml"},
		{"--external", "bad", "workloads/e2e-5k.yaml"},
		{"--external", "null=h:1", "workloads/e2e-5k.yaml"},
		{"--brokers", "strata,strata-base", "workloads/e2e-5k.yaml"}, // no --strata-base
		{"--brokers", "strata", "--replication-factor", "kfake-mem=1", "workloads/e2e-5k.yaml"},
		{"--brokers", "strata-3", "--replication-factor", "strata-3=0", "workloads/e2e-5k.yaml"},
		{"--brokers", "strata-3", "--replication-factor", "strata-3", "workloads/e2e-5k.yaml"},
		{},
	} {
		if _, err := ParseCompareFlags(args, io.Discard); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}

func TestMainUsageAndHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), nil, &out, &errb); code != exitUsage {
		t.Errorf("no args: exit %d", code)
	}
	if code := Main(context.Background(), []string{"nope"}, &out, &errb); code != exitUsage {
		t.Errorf("unknown: exit %d", code)
	}
	if code := Main(context.Background(), []string{"produce", "--help"}, &out, io.Discard); code != exitOK {
		t.Errorf("--help: exit %d", code)
	}
	if code := Main(context.Background(), []string{"produce", "--partitions", "0", "--num-records", "1"}, &out, io.Discard); code != exitUsage {
		t.Errorf("bad flags: exit %d", code)
	}
}

func TestFormatResult(t *testing.T) {
	r := &Result{Kind: KindProduce, Records: 10, RecordsPerSec: 5, MBPerSec: 1,
		ProduceLatency: &Latency{AvgMs: 1, P50Ms: 1, P95Ms: 2, P99Ms: 3, P999: 4, MaxMs: 5}}
	s := FormatResult(r)
	if !strings.HasPrefix(s, "10 records sent, 5.0 records/sec (1.00 MB/sec)") || !strings.Contains(s, "4.00 ms 99.9th") {
		t.Errorf("%q", s)
	}
	c := FormatResult(&Result{Kind: KindConsume, Records: 3})
	if !strings.Contains(c, "nMsg.sec") {
		t.Errorf("%q", c)
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"--note", "it's noisy", "a.yaml", ""})
	want := `--note 'it'\''s noisy' a.yaml ''`
	if got != want {
		t.Errorf("got %s want %s", got, want)
	}
}

func TestFileSafe(t *testing.T) {
	if got := fileSafe("1 topic / 16 partitions / 1kb"); got != "1_topic___16_partitions___1kb" {
		t.Errorf("%q", got)
	}
	if fileSafe("") != "workload" {
		t.Error("empty name")
	}
}
