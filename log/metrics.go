package log

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Every series the log exports, one per open partition, read at scrape
// time from the Manager (no work on the append or read path). Names are
// Kafka's kafka.log:type=Log beans as the Prometheus JMX exporter spells
// them:
//
//	kafka_log_log_end_offset{topic,partition}     LogEndOffset
//	kafka_log_log_start_offset{topic,partition}   LogStartOffset
//	kafka_log_high_watermark{topic,partition}     (Strata; Kafka reports it per replica)
//	kafka_log_size{topic,partition}               Size (bytes of every segment's log file)
//	kafka_log_num_log_segments{topic,partition}   NumLogSegments
//
// Cardinality is bounded by the partitions open on this broker (which the
// broker's topic limits bound); partitions found on disk but not opened
// are not reported.
var (
	descLogEnd   = prometheus.NewDesc("kafka_log_log_end_offset", "Next offset the partition's log will assign.", []string{"topic", "partition"}, nil)
	descLogStart = prometheus.NewDesc("kafka_log_log_start_offset", "First offset still stored.", []string{"topic", "partition"}, nil)
	descHW       = prometheus.NewDesc("kafka_log_high_watermark", "First offset not yet committed; consumers read below it.", []string{"topic", "partition"}, nil)
	descSize     = prometheus.NewDesc("kafka_log_size", "Bytes of the partition's segment log files.", []string{"topic", "partition"}, nil)
	descSegments = prometheus.NewDesc("kafka_log_num_log_segments", "Segments of the partition.", []string{"topic", "partition"}, nil)
)

// RegisterMetrics registers m's per-partition collector on reg.
func RegisterMetrics(reg prometheus.Registerer, m *Manager) {
	reg.MustRegister(managerCollector{m})
}

type managerCollector struct{ m *Manager }

func (managerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLogEnd, descLogStart, descHW, descSize, descSegments} {
		ch <- d
	}
}

func (c managerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, tp := range c.m.Partitions() {
		p := c.m.Get(tp)
		if p == nil {
			continue
		}
		offs := p.Offsets()
		segs := p.Segments()
		var size int64
		for _, s := range segs {
			size += s.Size
		}
		part := strconv.Itoa(int(tp.Partition))
		ch <- prometheus.MustNewConstMetric(descLogEnd, prometheus.GaugeValue, float64(offs.LogEnd), tp.Topic, part)
		ch <- prometheus.MustNewConstMetric(descLogStart, prometheus.GaugeValue, float64(offs.LogStart), tp.Topic, part)
		ch <- prometheus.MustNewConstMetric(descHW, prometheus.GaugeValue, float64(offs.HighWatermark), tp.Topic, part)
		ch <- prometheus.MustNewConstMetric(descSize, prometheus.GaugeValue, float64(size), tp.Topic, part)
		ch <- prometheus.MustNewConstMetric(descSegments, prometheus.GaugeValue, float64(len(segs)), tp.Topic, part)
	}
}
