package retention

import "github.com/prometheus/client_golang/prometheus"

// Every series the cleaner exports, in one place. Counters are bumped
// once per deletion or compaction pass, off the produce/fetch path.
// Kafka's LogCleaner reports rates and maxima (kafka.log:type=LogCleaner);
// totals are what Prometheus wants, so the names are Strata's in Kafka's
// kafka_log_ namespace:
//
//	kafka_log_retention_deleted_segments_total   segments deleted by retention.ms / retention.bytes
//	kafka_log_retention_failures_total           retention passes on a partition that failed (logged)
//	kafka_log_cleaner_compactions_total          partitions compacted
//	kafka_log_cleaner_failures_total             compactions that failed (logged, retried)
//	kafka_log_cleaner_bytes_read_total           bytes of the segments the cleaner rewrote
//	kafka_log_cleaner_bytes_written_total        bytes of the cleaned segments it wrote
type metrics struct {
	deletedSegments  prometheus.Counter
	retentionFailed  prometheus.Counter
	compactions      prometheus.Counter
	compactionFailed prometheus.Counter
	bytesRead        prometheus.Counter
	bytesWritten     prometheus.Counter
}

// newMetrics builds the cleaner's series and registers them on reg (nil:
// kept but not exported).
func newMetrics(reg prometheus.Registerer) *metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &metrics{
		deletedSegments:  c("kafka_log_retention_deleted_segments_total", "Segments deleted by retention.ms / retention.bytes."),
		retentionFailed:  c("kafka_log_retention_failures_total", "Retention passes on a partition that failed (see the log)."),
		compactions:      c("kafka_log_cleaner_compactions_total", "Partitions compacted."),
		compactionFailed: c("kafka_log_cleaner_failures_total", "Compactions that failed (see the log); retried at the next check."),
		bytesRead:        c("kafka_log_cleaner_bytes_read_total", "Bytes of the segments the cleaner rewrote."),
		bytesWritten:     c("kafka_log_cleaner_bytes_written_total", "Bytes of the cleaned segments the cleaner wrote."),
	}
	if reg != nil {
		reg.MustRegister(m.deletedSegments, m.retentionFailed, m.compactions, m.compactionFailed, m.bytesRead, m.bytesWritten)
	}
	return m
}
