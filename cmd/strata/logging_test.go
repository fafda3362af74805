package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A healthy single broker with log.format=json logs JSON lines only; its
// start and a topic creation log no WARN or ERROR (raft's normal
// elections are re-levelled: one "raft leader elected" line each, with the
// partition and the term, INFO for the metadata group and DEBUG for
// partitions; no second timestamp or level inside a message); request
// lines carry the API, the client ID and the connection.
func TestStructuredLogs(t *testing.T) {
	requireStorage(t)
	cfg, _, err := loadConfig([]string{"--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", t.TempDir(),
		"--log-level", "debug", "--set", "log.format=json"}, nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, nil, cfg, newLogger(out, cfg), ready) }()
	var addr string
	select {
	case a := <-ready:
		addr = a.String()
	case err := <-done:
		t.Fatalf("serve failed: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve not ready within 20s")
	}
	tctx, tcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer tcancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("log-test"), kgo.DefaultProduceTopic("logs"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(cl).CreateTopic(tctx, 2, 1, nil, "logs"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(tctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop within 20s")
	}

	var produceLine, metaElected bool
	elected := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		level, msg := m["level"], m["msg"].(string)
		if level == "WARN" || level == "ERROR" {
			t.Errorf("a healthy broker's start, topic creation and produce logged %s: %s", level, line)
		}
		if strings.Contains(msg, "[WARN]") || strings.Contains(msg, "[INFO]") || strings.Contains(msg, "[DEBUG]") || strings.Contains(msg, "T0") && strings.Contains(msg, "Z ") {
			t.Errorf("level or timestamp inside a message: %s", line)
		}
		if msg == "request" && m["api"] == "Produce" {
			produceLine = m["client_id"] == "log-test" && m["conn"] != nil && m["remote"] != nil && m["correlation_id"] != nil
			if !produceLine {
				t.Errorf("request line without client_id, conn or remote: %s", line)
			}
		}
		if msg == "raft leader elected" {
			if m["term"] == nil {
				t.Errorf("election line without its term: %s", line)
			}
			if p, ok := m["partition"].(string); ok {
				elected[p] = true
				if level != "DEBUG" {
					t.Errorf("a partition's election at %v: %s", level, line)
				}
			} else if level == "INFO" {
				metaElected = true
			}
		}
	}
	if !produceLine {
		t.Error("no request line for the Produce")
	}
	if !metaElected {
		t.Error("no INFO line for the metadata group's election")
	}
	for _, p := range []string{"logs-0", "logs-1"} {
		if !elected[p] {
			t.Errorf("no election line for %s (got %v)", p, elected)
		}
	}
}
