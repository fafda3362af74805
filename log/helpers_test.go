package log

import (
	"bytes"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/segment"
)

// spec describes a test batch.
type spec struct {
	n        int   // records
	valueLen int   // bytes per value
	ts       int64 // first timestamp (records are ts, ts+1, ...)
	pid      int64 // producer id; 0 means -1 (non-idempotent)
	epoch    int16
	seq      int32
	codec    int8 // 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
}

// makeBatch builds a real v2 batch with franz-go's kmsg types.
func makeBatch(t testing.TB, s spec) []byte {
	t.Helper()
	var recs []byte
	for i := 0; i < s.n; i++ {
		val := bytes.Repeat([]byte{byte('a' + i%26)}, s.valueLen)
		r := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: []byte{byte(i)}, Value: val}
		body := r.AppendTo(nil)[1:] // encoded with Length 0 (one varint byte)
		r.Length = int32(len(body))
		recs = r.AppendTo(recs)
	}
	switch s.codec {
	case 1:
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(recs)
		w.Close()
		recs = b.Bytes()
	case 2:
		recs = s2.EncodeSnappy(nil, recs)
	case 3:
		var b bytes.Buffer
		w := lz4.NewWriter(&b)
		w.Write(recs)
		w.Close()
		recs = b.Bytes()
	case 4:
		enc, _ := zstd.NewWriter(nil)
		recs = enc.EncodeAll(recs, nil)
		enc.Close()
	}
	pid, epoch, seq := s.pid, s.epoch, s.seq
	if pid == 0 {
		pid, epoch, seq = -1, -1, -1
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(s.codec),
		LastOffsetDelta: int32(s.n - 1), FirstTimestamp: s.ts, MaxTimestamp: s.ts + int64(s.n-1),
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: int32(s.n), Records: recs,
	}
	rb.Length = int32(segment.HeaderSize - 12 + len(recs))
	b := rb.AppendTo(nil)
	segment.SetCRC(b)
	return b
}

// quietLogger keeps expected recovery warnings out of test output.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// clock is a settable test clock, safe for the manager's background
// goroutine to read while a test moves it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// add moves the clock forward.
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.UnixMilli(1_700_000_000_000)} }

// testManager opens a manager on a fresh MemFS.
func testManager(t testing.TB, fsys segment.FS, c *clock) *Manager {
	t.Helper()
	m, err := OpenManager(ManagerOptions{Dir: "/data", FS: fsys, Now: c.now, Logger: quietLogger, FlushCheckInterval: time.Hour, CheckpointInterval: time.Hour,
		DefaultConfig: Config{SegmentIndexBytes: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// batchesOf splits a read result into batch headers.
func batchesOf(t testing.TB, b []byte) []segment.Header {
	t.Helper()
	spans, err := segment.SplitBatches(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []segment.Header
	for _, sp := range spans {
		h, err := segment.ValidateBatch(b[sp[0]:sp[1]])
		if err != nil {
			t.Fatalf("read back an invalid batch: %v", err)
		}
		out = append(out, h)
	}
	return out
}
