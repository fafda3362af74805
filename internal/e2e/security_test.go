package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Issue 19's probes against the real binary: what an attacker on the same
// network could do with a few bytes. Each test checks that the broker
// survives, that its memory stays within budget, and that the records it
// stored are intact afterwards.

// muxWire encodes the replication transport's frames by hand, from its
// documented layout (replication/transport.go, transport_codec.go), as an
// attacker would.
type muxWire struct{ b []byte }

func (w *muxWire) u64(v uint64) *muxWire { w.b = binary.AppendUvarint(w.b, v); return w }
func (w *muxWire) i64(v int64) *muxWire  { w.b = binary.AppendVarint(w.b, v); return w }
func (w *muxWire) bytes(v []byte) *muxWire {
	w.u64(uint64(len(v)))
	w.b = append(w.b, v...)
	return w
}

// header is raft's RPCHeader: protocol version, node ID, address.
func (w *muxWire) header(id string) *muxWire {
	return w.u64(3).bytes([]byte(id)).bytes([]byte("127.0.0.1:1"))
}

// muxFrame frames body: len u32, kind u8, reqID u64, group, body.
func muxFrame(kind byte, group string, body []byte) []byte {
	b := make([]byte, 4, 64+len(body))
	b = append(b, kind)
	b = binary.BigEndian.AppendUint64(b, 1)
	b = binary.AppendUvarint(b, uint64(len(group)))
	b = append(b, group...)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// appendEntriesBody is one AppendEntries from node id at term with one
// entry of logType carrying data.
func appendEntriesBody(id string, term uint64, logType uint64, data []byte) []byte {
	w := &muxWire{}
	w.header(id).u64(term).bytes([]byte("127.0.0.1:1")).u64(1000).u64(1)
	w.u64(1) // one entry
	w.u64(1001).u64(term).u64(logType).bytes(data).bytes(nil).i64(0)
	w.u64(1000) // leader commit
	return w.b
}

// sendReplication dials the replication listener, sends the preface
// (version 2, RPC mode, the claimed node ID) and payload, and reports
// whether the broker closed the connection.
func sendReplication(t *testing.T, addr string, preface []byte, payload []byte) (closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(preface)
	c.Write(payload)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func replPreface(version, mode byte, id string) []byte {
	return append(append([]byte("STRX"), version, mode, byte(len(id))), id...)
}

// produceSome writes n records to a new topic and returns them.
func produceSome(t *testing.T, cl *kgo.Client, topic string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	var want []string
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("%s-%d", topic, i)
		want = append(want, v)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	return want
}

// checkRecords consumes topic from the start and compares with want.
func checkRecords(t *testing.T, addr, topic string, want []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for len(got) < len(want) && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("records of %s: got %q, want %q", topic, got, want)
	}
}

// rssKiB reads a process's resident set from /proc.
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	t.Fatal("no VmRSS in /proc/PID/status")
	return 0
}

func (b *broker) pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd.Process.Pid
}

func (b *broker) logText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.logs.String()
}

func (b *broker) alive(t *testing.T) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("broker not answering: %v", err)
	}
}

// TestForgedReplicationFrames: issue 19's forged replication traffic is
// refused at the transport. Before: one AppendEntries to __metadata
// carrying a configuration entry 0xc1 panicked the broker, and again at
// every restart (the metadata log was poisoned); terms above 2^31-1 and
// peers of any identity were accepted.
func TestForgedReplicationFrames(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	rep := freeAddr(t)
	b := startBroker(t, "", "--set", "node.id=1", "--set", "controller.quorum.voters=1@"+rep)
	want := produceSome(t, b.client(), "forged", 5)

	const (
		kindAppendEntries = 1
		kindRequestVote   = 2
		kindSnapshot      = 5
		kindForward       = 8
		logConfiguration  = 5
	)
	poison := muxFrame(kindAppendEntries, "__metadata", appendEntriesBody("1", 2, logConfiguration, []byte{0xc1}))
	cases := []struct {
		name             string
		preface, payload []byte
	}{
		{"transport version 1", []byte("STRX\x01\x00"), poison},
		{"node 7, neither voter nor broker", replPreface(2, 0, "7"), poison},
		{"node 7 forwarding a metadata command", replPreface(2, 0, "7"), muxFrame(kindForward, "", (&muxWire{}).bytes([]byte(`{"command":{"type":1}}`)).b)},
		{"configuration entry 0xc1 to __metadata", replPreface(2, 0, "1"), poison},
		{"unknown entry type", replPreface(2, 0, "1"), muxFrame(kindAppendEntries, "__metadata", appendEntriesBody("1", 2, 99, nil))},
		{"term 2^31", replPreface(2, 0, "1"), muxFrame(kindAppendEntries, "__metadata", appendEntriesBody("1", 1<<31, 0, nil))},
		{"vote at term 2^40", replPreface(2, 0, "1"), muxFrame(kindRequestVote, "__metadata",
			(&muxWire{}).header("1").u64(1<<40).bytes([]byte("1")).u64(1).u64(1).u64(0).b)},
		{"header naming node 2 on node 1's connection", replPreface(2, 0, "1"), muxFrame(kindAppendEntries, "__metadata", appendEntriesBody("2", 2, 0, nil))},
		{"snapshot with an undecodable configuration", replPreface(2, 1, "1"), append(muxFrame(kindSnapshot, "__metadata",
			(&muxWire{}).header("1").u64(1).u64(2).bytes(nil).u64(2000).u64(2).bytes(nil).bytes([]byte{0xc1}).u64(1).i64(25).b), make([]byte, 25)...)},
	}
	for _, tc := range cases {
		if !sendReplication(t, rep, tc.preface, tc.payload) {
			t.Errorf("%s: the broker kept the connection open", tc.name)
		}
	}
	b.alive(t)
	logs := b.logText()
	if strings.Contains(logs, "panic") {
		t.Fatalf("the broker panicked:\n%s", logs)
	}
	if n := strings.Count(logs, "raft transport: peer refused") + strings.Count(logs, "raft transport: bad preface"); n != 3 {
		t.Errorf("%d connections refused at the preface, want 3", n)
	}
	if n := strings.Count(logs, "raft transport: bad request; closing") + strings.Count(logs, "raft transport: bad InstallSnapshot; closing"); n != len(cases)-3 {
		t.Errorf("%d frames refused, want %d", n, len(cases)-3)
	}
	// The metadata log is not poisoned: the broker restarts and serves
	// what it stored.
	b.restart()
	checkRecords(t, b.addr, "forged", want)
	produceSome(t, b.client(), "forged-after", 1)
}
