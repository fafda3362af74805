package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"
)

func startNull(t *testing.T) *NullBroker {
	t.Helper()
	b, err := NewNullBroker("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	go b.Serve()
	t.Cleanup(func() { b.Close() })
	return b
}

// Every kind of run works against the null broker with franz-go's client:
// it answers what kgo asks (ApiVersions, Metadata, CreateTopics,
// InitProducerID, Produce, Fetch, DeleteTopics).
func TestNullBrokerRuns(t *testing.T) {
	b := startNull(t)
	ctx := context.Background()
	opts := RunOptions{Bootstrap: []string{b.Addr()}, Timeout: 30 * time.Second}
	for _, w := range []Workload{
		{Kind: KindProduce, NumRecords: 5000, RecordSize: 100, Partitions: 4},
		{Kind: KindProduce, NumRecords: 2000, RecordSize: 10, Partitions: 2, Acks: "1", Keys: 3, Compression: "lz4"},
		{Kind: KindConsume, NumRecords: 3000, RecordSize: 200, Partitions: 3, ConsumersPerSubscription: 2},
		{Kind: KindE2E, Duration: 500 * time.Millisecond, Rate: 2000, RecordSize: 64, Partitions: 2},
	} {
		full := DefaultWorkload()
		full.Kind, full.NumRecords, full.RecordSize, full.Partitions = w.Kind, w.NumRecords, w.RecordSize, w.Partitions
		full.Duration, full.Rate, full.Keys = w.Duration, w.Rate, w.Keys
		if w.Acks != "" {
			full.Acks, full.Idempotence = w.Acks, false
		}
		if w.Compression != "" {
			full.Compression = w.Compression
		}
		if w.ConsumersPerSubscription > 0 {
			full.ConsumersPerSubscription = w.ConsumersPerSubscription
		}
		started, ended := false, false
		o := opts
		o.MeasureStart, o.MeasureEnd = func() { started = true }, func() { ended = true }
		r, err := Run(ctx, full, o)
		if err != nil {
			t.Fatalf("%s: %v", w.Kind, err)
		}
		if !started || !ended {
			t.Errorf("%s: measure hooks not called", w.Kind)
		}
		if r.Records == 0 || r.Bytes == 0 || r.MovedBytes == 0 || r.Errors != 0 {
			t.Errorf("%s: %+v", w.Kind, r)
		}
		if w.Kind == KindProduce && r.Records != w.NumRecords {
			t.Errorf("produce: %d records acknowledged, want %d", r.Records, w.NumRecords)
		}
		if w.Kind == KindE2E && (r.E2ELatency == nil || r.ConsumedRecords < r.Records) {
			t.Errorf("e2e: %+v", r)
		}
	}
	b.mu.Lock()
	n := len(b.topics)
	b.mu.Unlock()
	if n != 0 {
		t.Errorf("%d topics left after the runs (each run deletes its topics)", n)
	}
}

// Bad frames close the connection; the broker keeps serving others.
func TestNullBrokerBadInput(t *testing.T) {
	b := startNull(t)
	for _, frame := range [][]byte{
		{0xff, 0xff, 0xff, 0xff},                           // negative size
		{0, 0, 0, 2, 0, 0},                                 // too short for a header
		{0, 0, 0, 10, 0, 99, 0, 0, 0, 0, 0, 1, 0, 0},       // unknown api key
		{0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0},        // Produce v1, not offered
		{0, 0, 0, 12, 0, 3, 0, 5, 0, 0, 0, 1, 0, 50, 0, 0}, // client id longer than the frame
	} {
		c, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(frame)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var buf [4]byte
		if _, err := c.Read(buf[:]); err == nil {
			t.Errorf("frame %x: got a response, want the connection closed", frame)
		}
		c.Close()
	}
	// An ApiVersions newer than offered gets a v0 answer with the error.
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{0, 0, 0, 10, 0, 18, 0, 99, 0, 0, 0, 7, 0xff, 0xff})
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [10]byte
	if _, err := c.Read(hdr[:]); err != nil {
		t.Fatal(err)
	}
	if corr := binary.BigEndian.Uint32(hdr[4:]); corr != 7 {
		t.Errorf("correlation id %d", corr)
	}
	if code := int16(binary.BigEndian.Uint16(hdr[8:])); code != 35 {
		t.Errorf("error code %d, want 35 UNSUPPORTED_VERSION", code)
	}
}

// Progress lines come while producing, in kafka-producer-perf-test's form.
func TestProduceProgressLines(t *testing.T) {
	b := startNull(t)
	w := DefaultWorkload()
	w.Duration, w.Rate, w.RecordSize = 400*time.Millisecond, 2000, 10
	var out bytes.Buffer
	_, err := Run(context.Background(), w, RunOptions{Bootstrap: []string{b.Addr()}, Timeout: 30 * time.Second,
		Progress: &out, ProgressEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "records sent,") || !strings.Contains(out.String(), "ms max latency.") {
		t.Errorf("progress: %q", out.String())
	}
}
