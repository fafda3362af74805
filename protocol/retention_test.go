package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/retention"
)

// retentionCluster is a broker with its log manager and a retention
// cleaner that the test drives (RunOnce).
type retentionCluster struct {
	*testCluster
	logs    *log.Manager
	cleaner *retention.Cleaner
	// clock, when set (unix nanoseconds), is the cleaner's time instead
	// of the wall clock's.
	clock atomic.Int64
}

func newRetentionCluster(t *testing.T) *retentionCluster {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rc := &retentionCluster{}
	s, addr := startServerWith(t, Config{}, func(port int32) *replication.Broker {
		dir := t.TempDir()
		logs, err := log.OpenManager(log.ManagerOptions{Dir: dir, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		b, err := replication.NewBroker(replication.BrokerConfig{
			NodeID: 1, AdvertisedHost: "127.0.0.1", AdvertisedPort: port, DataDir: dir,
			NumPartitions: 1, DefaultReplicationFactor: 1, DeleteTopicEnable: true, Logger: quiet,
		}, logs)
		if err != nil {
			logs.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		rc.logs = logs
		rc.testCluster = &testCluster{t: t, b: b, broker: b}
		return b
	})
	rc.s, rc.addr = s, addr
	now := func() time.Time {
		if n := rc.clock.Load(); n != 0 {
			return time.Unix(0, n)
		}
		return time.Now()
	}
	rc.cleaner = retention.NewCleaner(retention.CleanerOptions{Logs: rc.logs, Logger: quiet, CheckInterval: time.Hour, Now: now})
	t.Cleanup(rc.cleaner.Close)
	return rc
}

// TestRetentionConsumerContinuesFromNewLogStart: a kgo consumer is reading
// old segments when retention deletes them. Its next fetch gets
// OFFSET_OUT_OF_RANGE, it resets to the earliest offset (ListOffsets
// follows the new log start) and reads on from there to the end, every
// record once and in order.
func TestRetentionConsumerContinuesFromNewLogStart(t *testing.T) {
	c := newRetentionCluster(t)
	ctx := testCtx(t)
	adm := c.admin()
	segBytes := "2048"
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &segBytes}, "ret"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	const n = 400
	prod := c.client(kgo.DefaultProduceTopic("ret"), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1))
	for i := 0; i < n; i++ {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(string(bytes.Repeat([]byte{'x'}, 100)))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons := c.client(kgo.ConsumeTopics("ret"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(1000), kgo.FetchMaxPartitionBytes(1000))
	var got []int64
	poll := func() {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("polling: %v (got %d records)", err, len(got))
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error (expected once): %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Offset) })
	}
	for len(got) < 10 {
		poll()
	}

	// Retention now keeps only the newest ~4 KiB.
	if err := c.broker.SetTopicConfigs(ctx, "ret", map[string]string{"segment.bytes": segBytes, "retention.bytes": "4096"}, false); err != nil {
		t.Fatal(err)
	}
	if c.cleaner.RunOnce() != 1 {
		t.Fatal("retention deleted nothing")
	}
	starts, err := adm.ListStartOffsets(ctx, "ret")
	if err != nil {
		t.Fatal(err)
	}
	lo, _ := starts.Lookup("ret", 0)
	if lo.Err != nil || lo.Offset <= got[len(got)-1]+20 {
		t.Fatalf("ListOffsets earliest after retention: %d (%v); consumer at %d", lo.Offset, lo.Err, got[len(got)-1])
	}
	for got[len(got)-1] < n-1 {
		poll()
	}
	// In order, no duplicates; after the jump, contiguous from the new log
	// start to the end.
	jump := -1
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("offsets out of order at %d: %d after %d", i, got[i], got[i-1])
		}
		if got[i] != got[i-1]+1 {
			if jump >= 0 {
				t.Fatalf("second gap at %d: %d after %d", i, got[i], got[i-1])
			}
			jump = i
		}
	}
	if jump < 0 || got[jump] != lo.Offset {
		t.Fatalf("consumer did not continue from the new log start %d (jump at %d, offsets %v...)", lo.Offset, jump, got[:min(len(got), 30)])
	}
}

// TestCompactedTopicKgo: a kgo consumer reads a compacted topic after
// cleaning and sees exactly the latest value of every key (from
// compressed batches, rebuilt with their codec); tombstoned keys are
// still there as tombstones until delete.retention.ms has passed, and
// gone after the next cleaning.
func TestCompactedTopicKgo(t *testing.T) {
	c := newRetentionCluster(t)
	ctx := testCtx(t)
	adm := c.admin()
	configs := map[string]*string{
		"cleanup.policy": str("compact"), "segment.bytes": str("2048"),
		"delete.retention.ms": str("300"), "min.cleanable.dirty.ratio": str("0.01"),
	}
	if resp, err := adm.CreateTopic(ctx, 1, 1, configs, "cmp"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	// The cleaner's clock stands at the start of the test until the
	// tombstones are to go: however slow the run (the race detector on a
	// loaded machine took over delete.retention.ms to get to the first
	// cleaning, which then dropped them already), none is older than
	// delete.retention.ms before that.
	c.clock.Store(time.Now().UnixNano())
	prod := c.client(kgo.DefaultProduceTopic("cmp"), kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.ProducerLinger(5*time.Millisecond))
	latest := map[string]*string{}
	for round := 0; round < 10; round++ {
		for k := 0; k < 20; k++ {
			key := fmt.Sprintf("key-%02d", k)
			r := &kgo.Record{Key: []byte(key), Value: []byte(fmt.Sprintf("%s-round-%d-%s", key, round, strings.Repeat("x", 30)))}
			if round == 9 && k < 5 {
				r.Value = nil // tombstones for the first five keys
			}
			if r.Value == nil {
				latest[key] = nil
			} else {
				v := string(r.Value)
				latest[key] = &v
			}
			prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Error(err)
				}
			})
		}
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	part := c.logs.Get(log.TopicPartition{Topic: "cmp", Partition: 0})
	if err := part.Roll(); err != nil { // the active segment is never cleaned
		t.Fatal(err)
	}
	end := part.Offsets().HighWatermark
	if c.cleaner.CompactOnce() != 1 {
		t.Fatal("not compacted")
	}
	consume := func() map[string]*string {
		t.Helper()
		cons := c.client(kgo.ConsumeTopics("cmp"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		got := map[string]*string{}
		var n int
		var last int64 = -1
		for last < end-1 {
			fs := cons.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consuming: %v", err)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
			fs.EachRecord(func(r *kgo.Record) {
				n++
				if r.Offset <= last {
					t.Fatalf("offset %d after %d", r.Offset, last)
				}
				last = r.Offset
				if _, dup := got[string(r.Key)]; dup {
					t.Fatalf("key %s twice after compaction", r.Key)
				}
				if r.Value == nil {
					got[string(r.Key)] = nil
				} else {
					v := string(r.Value)
					got[string(r.Key)] = &v
				}
			})
		}
		cons.Close()
		return got
	}
	same := func(what string, got, want map[string]*string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d keys, want %d", what, len(got), len(want))
		}
		for k, w := range want {
			g, ok := got[k]
			if !ok || (g == nil) != (w == nil) || (g != nil && *g != *w) {
				t.Fatalf("%s: key %s = %v, want %v", what, k, g, w)
			}
		}
	}
	same("after compaction", consume(), latest)

	// delete.retention.ms later, one more record makes the log dirty and
	// the next cleaning drops the tombstones.
	c.clock.Store(time.Now().Add(time.Second).UnixNano())
	if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte("key-19"), Value: []byte("final")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	final := "final"
	latest["key-19"] = &final
	if err := part.Roll(); err != nil {
		t.Fatal(err)
	}
	end = part.Offsets().HighWatermark
	if c.cleaner.CompactOnce() != 1 {
		t.Fatal("not compacted the second time")
	}
	for k, v := range latest {
		if v == nil {
			delete(latest, k)
		}
	}
	same("after delete.retention.ms", consume(), latest)
}

// TestCompactedTopicRefusesKeylessRecords: as Kafka, a compacted topic
// refuses a record without a key (compressed or not) with INVALID_RECORD;
// keyed records go in; a delete topic takes keyless records.
func TestCompactedTopicRefusesKeylessRecords(t *testing.T) {
	c := newRetentionCluster(t)
	ctx := testCtx(t)
	adm := c.admin()
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": str("compact")}, "keyed"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	c.createTopic("plain", 1)
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.ZstdCompression()} {
		prod := c.client(kgo.ProducerBatchCompression(codec), kgo.RecordRetries(1))
		err := prod.ProduceSync(ctx, &kgo.Record{Topic: "keyed", Key: []byte("k"), Value: []byte("v")}, &kgo.Record{Topic: "keyed", Value: []byte("no key")}).FirstErr()
		if !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("keyless record to a compacted topic: %v, want INVALID_RECORD", err)
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "keyed", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("keyed record: %v", err)
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "plain", Value: []byte("no key")}).FirstErr(); err != nil {
			t.Fatalf("keyless record to a delete topic: %v", err)
		}
	}
}
