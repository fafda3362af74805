package retention

import (
	"bytes"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

// rec is one test record; a nil value is a tombstone.
type rec struct {
	key, value []byte
}

// makeBatch builds a real v2 batch (kmsg's encoding) of recs with
// timestamps ts, ts+1, ... compressed with codec (0 none .. 4 zstd).
func makeBatch(t testing.TB, ts int64, codec int8, recs ...rec) []byte {
	t.Helper()
	var body []byte
	for i, r := range recs {
		kr := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: r.key, Value: r.value}
		enc := kr.AppendTo(nil)[1:]
		kr.Length = int32(len(enc))
		body = kr.AppendTo(body)
	}
	switch codec {
	case 1:
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(body)
		w.Close()
		body = b.Bytes()
	case 2:
		body = s2.EncodeSnappy(nil, body)
	case 3:
		var b bytes.Buffer
		w := lz4.NewWriter(&b)
		w.Write(body)
		w.Close()
		body = b.Bytes()
	case 4:
		enc, _ := zstd.NewWriter(nil)
		body = enc.EncodeAll(body, nil)
		enc.Close()
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(codec),
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: ts, MaxTimestamp: ts + int64(len(recs)-1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)), Records: body,
	}
	rb.Length = int32(segment.HeaderSize - 12 + len(body))
	b := rb.AppendTo(nil)
	segment.SetCRC(b)
	return b
}

// valueBatch is one uncompressed record with a value of n bytes.
func valueBatch(t testing.TB, ts int64, n int) []byte {
	return makeBatch(t, ts, 0, rec{key: []byte("k"), value: bytes.Repeat([]byte{'v'}, n)})
}

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// clock is a settable test clock, safe for concurrent use through now.
type clock struct{ ms chan int64 }

func newClock(ms int64) *clock {
	c := &clock{ms: make(chan int64, 1)}
	c.ms <- ms
	return c
}

func (c *clock) now() time.Time {
	ms := <-c.ms
	c.ms <- ms
	return time.UnixMilli(ms)
}

func (c *clock) set(ms int64) {
	<-c.ms
	c.ms <- ms
}

// openManager opens a log manager on fsys (nil = a temp dir on disk).
func openManager(t testing.TB, fsys segment.FS, dir string, c *clock) *log.Manager {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	m, err := log.OpenManager(log.ManagerOptions{Dir: dir, FS: fsys, Logger: quietLogger, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// appendCommit appends b and commits it (a single voter).
func appendCommit(t testing.TB, p *log.Partition, b []byte) log.AppendResult {
	t.Helper()
	res, err := p.Append(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Commit(res.LastOffset + 1)
	return res
}
