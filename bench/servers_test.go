package bench

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// kfake-server (in memory and with a data dir) and null-server print
// their address and serve a run until their context ends.
func TestServerCommands(t *testing.T) {
	for _, args := range [][]string{
		{"null-server"},
		{"kfake-server"},
		{"kfake-server", "--data-dir", t.TempDir()},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		done := make(chan int, 1)
		go func() { done <- Main(ctx, args, pw, io.Discard); pw.Close() }()
		line, err := bufio.NewReader(pr).ReadString('\n')
		if err != nil {
			cancel()
			t.Fatalf("%v: %v", args, err)
		}
		go io.Copy(io.Discard, pr)
		addr, ok := readyAddr(strings.TrimSpace(line))
		if !ok {
			cancel()
			t.Fatalf("%v: ready line %q", args, line)
		}
		w := DefaultWorkload()
		w.NumRecords, w.RecordSize = 500, 100
		r, err := Run(ctx, w, RunOptions{Bootstrap: []string{addr}, Timeout: 30 * time.Second})
		if err != nil {
			t.Errorf("%v: %v", args, err)
		} else if r.Records != w.NumRecords {
			t.Errorf("%v: %d records acknowledged, want %d", args, r.Records, w.NumRecords)
		}
		if args[0] == "kfake-server" {
			// kfake has consumer groups: the group mode works end to end.
			g := DefaultWorkload()
			g.Kind, g.NumRecords, g.RecordSize, g.Partitions = KindConsume, 600, 50, 3
			g.ConsumersPerSubscription, g.ConsumerGroups = 2, true
			r, err := Run(ctx, g, RunOptions{Bootstrap: []string{addr}, Timeout: 60 * time.Second})
			if err != nil {
				t.Errorf("%v groups: %v", args, err)
			} else if r.Records < g.NumRecords {
				// More is possible: without commits, a rebalance
				// hands a partition over from its start again.
				t.Errorf("%v groups: read %d records, want at least %d", args, r.Records, g.NumRecords)
			}
		}
		cancel()
		select {
		case code := <-done:
			if code != exitOK {
				t.Errorf("%v: exit %d", args, code)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%v: did not stop", args)
		}
	}
}

func TestReadyAddr(t *testing.T) {
	for line, want := range map[string]string{
		"listening 127.0.0.1:5":                                           "127.0.0.1:5",
		"bootstrap: 127.0.0.1:1,127.0.0.1:2":                              "127.0.0.1:1,127.0.0.1:2", // dev-cluster
		`time=x level=INFO msg="strata ready" listener=127.0.0.1:9 adv=y`: "127.0.0.1:9",
	} {
		if got, ok := readyAddr(line); !ok || got != want {
			t.Errorf("%q: %q %v", line, got, ok)
		}
	}
	if _, ok := readyAddr("msg=other listener=1.2.3.4:5"); ok {
		t.Error("only the ready line counts")
	}
}
