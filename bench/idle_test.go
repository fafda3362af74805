package bench

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseIdleFlags(t *testing.T) {
	c, err := ParseIdleFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Brokers != 3 || c.Partitions != 1000 || c.Topics != 10 || c.ReplicationFactor != 3 || c.Duration != 30*time.Second {
		t.Errorf("defaults %+v", c)
	}
	c, err = ParseIdleFlags([]string{"--brokers", "1", "--partitions", "20", "--topics", "2"}, io.Discard)
	if err != nil || c.ReplicationFactor != 1 {
		t.Fatalf("%v %+v", err, c)
	}
	for _, args := range [][]string{
		{"--brokers", "0"},
		{"--brokers", "3", "--replication-factor", "4"},
		{"--partitions", "1001"},
		{"--topics", "0"},
		{"--duration", "10ms"},
		{"--profile-broker", "4"},
		{"extra"},
	} {
		if _, err := ParseIdleFlags(args, io.Discard); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}

func TestIdleLineParsing(t *testing.T) {
	if n := nodeIDArg([]string{"strata", "serve", "--set", "node.id=2", "--set", "x=y"}); n != 2 {
		t.Errorf("node id %d", n)
	}
	if n := nodeIDArg([]string{"strata", "serve"}); n != 0 {
		t.Errorf("node id %d", n)
	}
	a, ok := metricsAddrLine(`time=x level=INFO msg="metrics listener up" addr=127.0.0.1:4567 pprof=true`)
	if !ok || a != "127.0.0.1:4567" {
		t.Errorf("%q %v", a, ok)
	}
	if _, ok := metricsAddrLine(`msg="strata ready" addr=1.2.3.4:5`); ok {
		t.Error("only the metrics line counts")
	}
	if offs := devClusterOffsets(2); len(offs) != 4 || offs[3] != 101 {
		t.Errorf("offsets %v", offs)
	}
}

// A small idle run on a real 3-broker cluster (a few seconds): the
// figures exist for every broker, and the profile is written.
func TestIdleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds strata and starts a cluster")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	c := &IdleConfig{Brokers: 3, Partitions: 6, Topics: 2, ReplicationFactor: 3, Settle: 100 * time.Millisecond,
		Duration: time.Second, StrataSrc: "..", ProfileDir: t.TempDir(), ProfileBroker: 2, Dir: t.TempDir(), Command: "test"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress strings.Builder
	rep, err := Idle(ctx, c, &progress)
	if err != nil {
		logs, _ := filepath.Glob(filepath.Join(c.Dir, "data", "broker-*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("%s:\n%s", l, b)
		}
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(rep.PerBroker) != 3 {
		t.Fatalf("%d brokers", len(rep.PerBroker))
	}
	for i, b := range rep.PerBroker {
		if b.Node != i+1 || b.RSSMiB <= 0 || b.PeakRSSMiB < b.RSSMiB || b.CPUSeconds < 0 {
			t.Errorf("broker %+v", b)
		}
		if (b.Profile != "") != (b.Node == 2) {
			t.Errorf("broker %d profile %q", b.Node, b.Profile)
		}
	}
	md := rep.Markdown()
	if !strings.Contains(md, "6 partitions at replication factor 3") || !strings.Contains(md, "| 3 |") {
		t.Errorf("markdown:\n%s", md)
	}
	t.Log(md)
}
