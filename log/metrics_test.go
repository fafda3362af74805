package log

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strata-io/strata/segment"
)

// The per-partition series read the partition's offsets and size at
// scrape time.
func TestManagerMetrics(t *testing.T) {
	c := newClock()
	m := testManager(t, segment.NewMemFS(), c)
	defer m.Close()
	p, err := m.Open(TopicPartition{Topic: "t", Partition: 3}, Config{SegmentIndexBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Append(makeBatch(t, spec{n: 5, valueLen: 10, ts: c.now().UnixMilli()}), 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Commit(res.LastOffset + 1)
	if _, err := p.Append(makeBatch(t, spec{n: 2, valueLen: 10, ts: c.now().UnixMilli()}), 0); err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, s := range p.Segments() {
		size += s.Size
	}
	reg := prometheus.NewPedanticRegistry()
	RegisterMetrics(reg, m)
	want := `
# HELP kafka_log_high_watermark First offset not yet committed; consumers read below it.
# TYPE kafka_log_high_watermark gauge
kafka_log_high_watermark{partition="3",topic="t"} 5
# HELP kafka_log_log_end_offset Next offset the partition's log will assign.
# TYPE kafka_log_log_end_offset gauge
kafka_log_log_end_offset{partition="3",topic="t"} 7
# HELP kafka_log_log_start_offset First offset still stored.
# TYPE kafka_log_log_start_offset gauge
kafka_log_log_start_offset{partition="3",topic="t"} 0
# HELP kafka_log_num_log_segments Segments of the partition.
# TYPE kafka_log_num_log_segments gauge
kafka_log_num_log_segments{partition="3",topic="t"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kafka_log_high_watermark", "kafka_log_log_end_offset",
		"kafka_log_log_start_offset", "kafka_log_num_log_segments"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "kafka_log_size" && len(mf.GetMetric()) == 1 {
			found = true
			if got := mf.GetMetric()[0].GetGauge().GetValue(); got != float64(size) || size == 0 {
				t.Errorf("kafka_log_size %v, segments hold %d bytes", got, size)
			}
		}
	}
	if !found {
		t.Error("no kafka_log_size sample")
	}
}
