package raftconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// raftLogLines runs f against a raftLogger over a JSON handler at level
// and returns the lines it wrote.
func raftLogLines(t *testing.T, level slog.Level, electionLevel slog.Level, f func(*raftLogger)) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	l := newRaftLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level})).With("partition", "t-0"), electionLevel)
	f(l)
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// A normal election logs one line, with its term, at the group's election
// level; raft's WARN about the heartbeat timeout that starts it, and its
// other steps, are DEBUG.
func TestRaftLoggerElections(t *testing.T) {
	election := func(l *raftLogger) {
		l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", "", "last-leader-id", "")
		l.Info("entering candidate state", "node", nil, "term", 2)
		l.Info("election won", "term", uint64(2), "tally", 1)
		l.Info("entering leader state", "leader", nil)
	}
	lines := raftLogLines(t, slog.LevelInfo, slog.LevelInfo, election)
	if len(lines) != 1 || lines[0]["msg"] != "raft leader elected" || lines[0]["level"] != "INFO" || lines[0]["term"] != float64(2) || lines[0]["partition"] != "t-0" {
		t.Fatalf("metadata election at INFO: %v", lines)
	}
	if lines := raftLogLines(t, slog.LevelInfo, slog.LevelDebug, election); len(lines) != 0 {
		t.Fatalf("a partition's election at INFO level logged %v", lines)
	}
	lines = raftLogLines(t, slog.LevelDebug, slog.LevelDebug, election)
	if len(lines) != 4 || lines[2]["msg"] != "raft leader elected" || lines[0]["last_leader_addr"] == nil {
		t.Fatalf("a partition's election at DEBUG: %v", lines)
	}
	for _, m := range lines {
		if m["level"] != "DEBUG" {
			t.Errorf("normal election step at %v: %v", m["level"], m)
		}
	}
}

// The same failure about the same peer is logged once per repeatWindow,
// broker-wide; the next line counts those suppressed.
func TestRaftLoggerRepeats(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	setNow := func(f func() time.Time) {
		raftRepeats.mu.Lock()
		raftRepeats.now = f
		raftRepeats.mu.Unlock()
	}
	setNow(func() time.Time { return now }) // called under raftRepeats.mu
	defer setNow(time.Now)
	peer := "127.0.0.1:" + t.Name() // a key no other test uses
	lines := raftLogLines(t, slog.LevelInfo, slog.LevelDebug, func(l *raftLogger) {
		for range 100 {
			l.Error("failed to heartbeat to", "peer", peer, "backoff time", time.Second, "error", errors.New("connection refused"))
		}
		l.Warn("failed to contact", "server-id", peer, "time", time.Second) // another message: its own line
		raftRepeats.mu.Lock()
		now = now.Add(repeatWindow)
		raftRepeats.mu.Unlock()
		l.Error("failed to heartbeat to", "peer", peer, "error", errors.New("connection refused"))
	})
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3: %v", len(lines), lines)
	}
	if lines[0]["level"] != "ERROR" || lines[0]["error"] != "connection refused" || lines[0]["suppressed"] != nil {
		t.Errorf("first line %v", lines[0])
	}
	if lines[1]["msg"] != "failed to contact" {
		t.Errorf("second line %v", lines[1])
	}
	if lines[2]["suppressed"] != float64(99) {
		t.Errorf("third line %v, want suppressed=99", lines[2])
	}
}
