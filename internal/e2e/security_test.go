package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// Issue 19's probes against the real binary: what an attacker on the same
// network could do with a few bytes. Each test checks that the broker
// survives, that its memory stays within budget, and that the records it
// stored are intact afterwards.

// muxWire encodes the replication transport's frames by hand, from its
// documented layout (replication/transport/mux.go, transport/codec.go), as an
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

// kafkaFrame frames a request: size, key, version, correlation ID, client
// ID, (a flexible header's empty tags), body.
func kafkaFrame(key, version int16, corr int32, flexible bool, body []byte) []byte {
	b := make([]byte, 4, 32+len(body))
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 5)
	b = append(b, "probe"...)
	if flexible {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// closedWithin reports whether the broker closes c within d (reading and
// dropping whatever it sends).
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// goHeapKiB reads go_memstats_heap_inuse_bytes from a broker's /metrics:
// memory allocated but not yet touched is not resident, so RSS alone
// misses a buffer sized from a claimed length (the 1.3 GB of the issue's
// announced frames showed as 43 MiB of RSS).
func goHeapKiB(metrics string) int64 {
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "go_memstats_heap_inuse_bytes" {
			v, _ := strconv.ParseFloat(f[1], 64)
			return int64(v) >> 10
		}
	}
	return -1
}

type memPeak struct{ rss, heap int64 }

// rssWatch samples a process's RSS (and its Go heap in use, from the
// metrics listener) until stop and returns the largest of each.
func rssWatch(t *testing.T, pid int, metrics string, stop <-chan struct{}) <-chan memPeak {
	out := make(chan memPeak, 1)
	go func() {
		peak := int64(0)
		heap := int64(0)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			heap = max(heap, goHeapKiB(metrics))
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
						n, _ := strconv.ParseInt(f[1], 10, 64)
						peak = max(peak, n)
					}
				}
			}
			select {
			case <-stop:
				out <- memPeak{peak, heap}
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// TestClientLimitProbes: issue 19's memory and connection probes against
// the Kafka and replication listeners, with the limits set low enough to
// watch them act. The broker must survive each, its RSS stay within
// budget, and its records stay intact.
func TestClientLimitProbes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	rep, metrics := freeAddr(t), freeAddr(t)
	b := startBroker(t, "", "--set", "node.id=1", "--set", "controller.quorum.voters=1@"+rep,
		"--set", "metrics.listener="+metrics,
		"--set", "max.connections.per.ip=60",
		"--set", "queued.max.request.bytes=104857600",
		"--set", "strata.request.read.timeout.ms=2000",
		"--set", "strata.response.write.timeout.ms=2000",
		"--set", "connections.max.idle.ms=5000")
	cl := b.client()
	want := produceSome(t, cl, "probe", 20)
	// About 6 MB for the fetches of a client that stops reading.
	big := make([]byte, 100<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "big"); err != nil || resp.Err != nil {
		t.Fatalf("create big: %v %v", err, resp.Err)
	}
	for i := 0; i < 60; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: big}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pid := b.pid()
	base, baseHeap := rssKiB(t, pid), goHeapKiB(metrics)
	if baseHeap < 0 {
		t.Fatal("no go_memstats_heap_inuse_bytes from the metrics listener")
	}
	const budgetKiB = 150 << 10 // queued.max.request.bytes (100 MiB) and room
	t.Logf("at start: RSS %d MiB, Go heap in use %d MiB", base>>10, baseHeap>>10)

	// 1. 16 Kafka connections announcing 100 MiB Produce frames (before:
	// 12.5 MiB staged each, held forever; 1.37 GB with the replication
	// probe). Now 1 MiB each, and closed by the request read timeout.
	stop := make(chan struct{})
	peak := rssWatch(t, pid, metrics, stop)
	var conns []net.Conn
	for i := 0; i < 16; i++ {
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hdr := binary.BigEndian.AppendUint32(nil, 100<<20-1)
		c.Write(append(hdr, 0, 0, 0, 9, 0, 0, 0, 1))
		conns = append(conns, c)
	}
	// 2. 8 replication connections announcing 128 MiB frames.
	for i := 0; i < 8; i++ {
		c, err := net.Dial("tcp", rep)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		hdr := binary.BigEndian.AppendUint32(nil, 128<<20)
		c.Write(append(append(replPreface(2, 0, "1"), hdr...), 1))
		conns = append(conns, c)
	}
	for i, c := range conns[:16] {
		if !closedWithin(c, 20*time.Second) {
			t.Fatalf("kafka connection %d announcing 100 MiB and stalling was not closed", i)
		}
	}
	for _, c := range conns[16:] {
		c.Close()
	}
	close(stop)
	p := <-peak
	t.Logf("announced frames: RSS peak %d MiB, Go heap in use peak %d MiB", p.rss>>10, p.heap>>10)
	if p.rss-base > budgetKiB || p.heap-baseHeap > budgetKiB {
		t.Errorf("grew by %d MiB (RSS), %d MiB (heap) under announced frames", (p.rss-base)>>10, (p.heap-baseHeap)>>10)
	}

	// 3. One 8.4 MB Produce naming 2.8 million empty topics (before: RSS
	// 24 MB -> 422 MB). Refused before decoding: the connection closes.
	body := []byte{0, 0xff, 0xff, 0, 0, 0x75, 0x30} // no transactional ID, acks -1, timeout 30 s
	const topics = 2800000
	body = binary.AppendUvarint(body, topics+1)
	for i := 0; i < topics; i++ {
		body = append(body, 1, 1, 0) // empty name, no partitions, no tags
	}
	body = append(body, 0)
	stop = make(chan struct{})
	peak = rssWatch(t, pid, metrics, stop)
	c, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Write(kafkaFrame(0, 9, 1, true, body))
	if !closedWithin(c, 30*time.Second) {
		t.Fatal("the Produce of 2.8 million topics was not refused")
	}
	close(stop)
	p = <-peak
	t.Logf("2.8M-topic Produce: RSS peak %d MiB, Go heap in use peak %d MiB", p.rss>>10, p.heap>>10)
	if p.rss-base > budgetKiB || p.heap-baseHeap > budgetKiB {
		t.Errorf("grew by %d MiB (RSS), %d MiB (heap) under the 2.8M-topic Produce", (p.rss-base)>>10, (p.heap-baseHeap)>>10)
	}

	// 4. A client that sends fetches and stops reading is closed by the
	// write timeout (before: never).
	fc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	if tc, ok := fc.(*net.TCPConn); ok {
		tc.SetReadBuffer(4 << 10)
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 4
	fetch.MaxWaitMillis = 100
	fetch.MaxBytes = 50 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "big"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 50 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fbody := fetch.AppendTo(nil)
	for i := 0; i < 32; i++ {
		fc.Write(kafkaFrame(1, 4, int32(i), false, fbody))
	}
	testwait.For(t, 30*time.Second, func() bool {
		return strings.Contains(b.logText(), "did not read its response within the write timeout")
	}, "a client that stopped reading was not closed")

	// 5. max.connections.per.ip: of 61 more connections from 127.0.0.1,
	// those past 60 (the test's own clients hold a few) are closed at once.
	held := make([]net.Conn, 61)
	for i := range held {
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held[i] = c
	}
	closed := make(chan bool, len(held))
	for _, c := range held {
		go func() { closed <- closedWithin(c, time.Second) }()
	}
	refused := 0
	for range held {
		if <-closed {
			refused++
		}
	}
	for _, c := range held {
		c.Close()
	}
	if refused == 0 || refused > 10 {
		t.Fatalf("%d of 61 connections from one address refused with max.connections.per.ip=60", refused)
	}

	// 6. An idle connection is closed after connections.max.idle.ms.
	ic, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	if !closedWithin(ic, 20*time.Second) {
		t.Fatal("an idle connection outlived connections.max.idle.ms")
	}

	b.alive(t)
	if logs := b.logText(); strings.Contains(logs, "panic") {
		t.Fatalf("the broker panicked:\n%s", logs)
	}
	checkRecords(t, b.addr, "probe", want)
	t.Logf("RSS at the end: %d MiB", rssKiB(t, pid)>>10)
}
