package retention

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

// The cleaner's counters follow what it did: segments deleted by
// retention.bytes, one compaction with its bytes read and written.
func TestCleanerMetrics(t *testing.T) {
	c := newClock(testNow)
	m := openManager(t, segment.NewMemFS(), "/data", c)
	del, err := m.Open(log.TopicPartition{Topic: "d", Partition: 0},
		log.Config{SegmentBytes: 1000, Cleanup: log.CleanupConfig{Delete: true, RetentionMs: -1, RetentionBytes: 2500}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		appendCommit(t, del, valueBatch(t, c.now().UnixMilli(), 200))
	}
	segsBefore := len(del.Segments())
	comp, err := m.Open(log.TopicPartition{Topic: "c", Partition: 0}, compactCfg())
	if err != nil {
		t.Fatal(err)
	}
	fillKeyed(t, comp, 0, 8, testNow)

	reg := prometheus.NewPedanticRegistry()
	cl := NewCleaner(CleanerOptions{Logs: m, Logger: quietLogger, Now: c.now, CheckInterval: time.Hour, Backoff: time.Hour, Registerer: reg})
	t.Cleanup(cl.Close)
	if n := cl.RunOnce(); n != 1 {
		t.Fatalf("RunOnce changed %d partitions, want 1", n)
	}
	if n := cl.CompactOnce(); n != 1 {
		t.Fatalf("CompactOnce compacted %d partitions, want 1", n)
	}
	deleted := segsBefore - len(del.Segments())
	if got := testutil.ToFloat64(cl.metrics.deletedSegments); got != float64(deleted) || deleted == 0 {
		t.Errorf("deleted segments counter %v, segments deleted %d", got, deleted)
	}
	if got := testutil.ToFloat64(cl.metrics.compactions); got != 1 {
		t.Errorf("compactions %v, want 1", got)
	}
	in, out := testutil.ToFloat64(cl.metrics.bytesRead), testutil.ToFloat64(cl.metrics.bytesWritten)
	if in <= 0 || out <= 0 || out >= in {
		t.Errorf("cleaner bytes read %v, written %v: want 0 < written < read", in, out)
	}
	if n, err := testutil.GatherAndCount(reg, "kafka_log_retention_deleted_segments_total", "kafka_log_cleaner_bytes_read_total"); err != nil || n != 2 {
		t.Errorf("registered series: %d, %v", n, err)
	}
}
