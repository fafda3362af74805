package protocol

import (
	"encoding/binary"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/lagrate"
	"github.com/strata-io/strata/sharepart"
)

// Per-topic traffic, Kafka's BrokerTopicMetrics beans as the JMX exporter
// spells them, counted by the Produce and Fetch handlers of this broker
// (as leader) and read at scrape time:
//
//	kafka_server_brokertopicmetrics_bytesin_total{topic}      record bytes appended by Produce
//	kafka_server_brokertopicmetrics_messagesin_total{topic}   records appended by Produce
//	kafka_server_brokertopicmetrics_bytesout_total{topic}     record bytes sent in Fetch responses
//	strata_topic_records_out_total{topic}                     records sent in Fetch responses (see below)
//
// Records out are counted from the batch headers of the copied record
// sets; a record set sent with sendfile is not read by the broker, so its
// records are estimated from its bytes at the topic's produced records
// per byte (exact for topics of uniform records).
//
// The data directory's file system, read with statfs at scrape time (as
// DescribeLogDirs v4 reports it; absent where statfs is not available):
//
//	strata_log_dir_total_bytes   size of the file system holding log.dirs
//	strata_log_dir_usable_bytes  bytes available to the broker there
//
// Share groups, per group and partition this broker leads, over the lag
// window (internal/lagrate; strata.metrics.lag.window.ms), as the
// consumer-group series of groupcoord/metrics.go:
//
//	strata_share_lag_growth_rate{group,topic,partition}        records/s the backlog grew (negative: draining)
//	strata_share_consumption_rate{group,topic,partition}       records/s acknowledged or archived
//	strata_share_time_to_drain_seconds{group,topic,partition}  backlog / net rate; +Inf while not shrinking
//
// and per topic {group,topic}: strata_share_topic_lag,
// strata_share_topic_lag_growth_rate, strata_share_topic_consumption_rate,
// strata_share_topic_time_to_drain_seconds and
// strata_share_topic_oldest_unacked_age_seconds.

// topicIO is one topic's counters.
type topicIO struct {
	bytesIn, recordsIn, bytesOut, recordsOut atomic.Int64
}

// topicCounters maps topic names to their counters.
type topicCounters struct {
	m sync.Map // string -> *topicIO
}

func (tc *topicCounters) get(topic string) *topicIO {
	if v, ok := tc.m.Load(topic); ok {
		return v.(*topicIO)
	}
	v, _ := tc.m.LoadOrStore(topic, &topicIO{})
	return v.(*topicIO)
}

// Offsets into a v2 record batch header.
const (
	ioBatchLength  = 8  // int32: bytes after this field
	ioBatchRecords = 57 // int32: records in the batch
	ioBatchHeader  = 61
)

// batchRecords counts the records of the whole batches in rec.
func batchRecords(rec []byte) int64 {
	var n int64
	for at := 0; at+ioBatchHeader <= len(rec); {
		l := int(int32(binary.BigEndian.Uint32(rec[at+ioBatchLength:])))
		if l < ioBatchHeader-12 {
			break
		}
		n += int64(max(int32(binary.BigEndian.Uint32(rec[at+ioBatchRecords:])), 0))
		at += 12 + l
	}
	return n
}

// produced counts records appended to topic by a Produce.
func (tc *topicCounters) produced(topic string, rec []byte) {
	t := tc.get(topic)
	t.bytesIn.Add(int64(len(rec)))
	t.recordsIn.Add(batchRecords(rec))
}

// fetched counts the record sets of a Fetch response about to be written.
func (tc *topicCounters) fetched(parts []*fetchPart) {
	for _, fp := range parts {
		if fp.part == nil || fp.failed {
			continue
		}
		var bytes, records int64
		if fp.region != nil {
			bytes = fp.region.Len
			if bytes == 0 {
				continue
			}
			t := tc.get(fp.name)
			if in := t.bytesIn.Load(); in > 0 {
				records = int64(float64(bytes) * float64(t.recordsIn.Load()) / float64(in))
			}
			t.bytesOut.Add(bytes)
			t.recordsOut.Add(records)
			continue
		}
		if rec := fp.resp.RecordBatches; len(rec) > 0 {
			t := tc.get(fp.name)
			t.bytesOut.Add(int64(len(rec)))
			t.recordsOut.Add(batchRecords(rec))
		}
	}
}

var (
	descTopicBytesIn    = prometheus.NewDesc("kafka_server_brokertopicmetrics_bytesin_total", "Record bytes appended to the topic by Produce requests this broker led.", []string{"topic"}, nil)
	descTopicRecordsIn  = prometheus.NewDesc("kafka_server_brokertopicmetrics_messagesin_total", "Records appended to the topic by Produce requests this broker led.", []string{"topic"}, nil)
	descTopicBytesOut   = prometheus.NewDesc("kafka_server_brokertopicmetrics_bytesout_total", "Record bytes of the topic sent in Fetch responses.", []string{"topic"}, nil)
	descTopicRecordsOut = prometheus.NewDesc("strata_topic_records_out_total", "Records of the topic sent in Fetch responses (sendfile record sets estimated at the topic's produced records per byte).", []string{"topic"}, nil)

	descDirTotal  = prometheus.NewDesc("strata_log_dir_total_bytes", "Size of the file system holding the broker's data directory (log.dirs).", nil, nil)
	descDirUsable = prometheus.NewDesc("strata_log_dir_usable_bytes", "Bytes available to the broker on the file system holding its data directory.", nil, nil)

	descShareGrowth      = prometheus.NewDesc("strata_share_lag_growth_rate", "Records per second a share group's backlog on a partition grew over the lag window (negative while draining).", shareLabels, nil)
	descShareConsume     = prometheus.NewDesc("strata_share_consumption_rate", "Records per second a share group acknowledged or archived on a partition over the lag window.", shareLabels, nil)
	descShareDrain       = prometheus.NewDesc("strata_share_time_to_drain_seconds", "Estimated time for a share group to work off a partition's backlog at the net rate of the lag window: +Inf while it does not shrink, 0 with none.", shareLabels, nil)
	descShareTopicLag    = prometheus.NewDesc("strata_share_topic_lag", "A share group's backlog summed over a topic's partitions led here.", shareLabels[:2], nil)
	descShareTopicGrowth = prometheus.NewDesc("strata_share_topic_lag_growth_rate", "Records per second a share group's backlog on a topic grew over the lag window.", shareLabels[:2], nil)
	descShareTopicCons   = prometheus.NewDesc("strata_share_topic_consumption_rate", "Records per second a share group acknowledged or archived on a topic over the lag window.", shareLabels[:2], nil)
	descShareTopicDrain  = prometheus.NewDesc("strata_share_topic_time_to_drain_seconds", "Estimated time for a share group to work off its backlog on a topic: +Inf while it does not shrink.", shareLabels[:2], nil)
	descShareTopicAge    = prometheus.NewDesc("strata_share_topic_oldest_unacked_age_seconds", "Age, by its timestamp, of the oldest record a share group has not acknowledged on a topic (the largest of its partitions').", shareLabels[:2], nil)
)

// trafficCollector exports the per-topic counters and the share groups'
// rates.
type trafficCollector struct {
	s     *Server
	rates *lagrate.Tracker
}

func newTrafficCollector(s *Server) trafficCollector {
	span := s.cfg.Groups.LagWindow
	if span <= 0 {
		span = 5 * time.Minute
	}
	return trafficCollector{s: s, rates: lagrate.NewTracker(span)}
}

func (trafficCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDirTotal, descDirUsable, descTopicBytesIn, descTopicRecordsIn, descTopicBytesOut, descTopicRecordsOut,
		descShareGrowth, descShareConsume, descShareDrain, descShareTopicLag, descShareTopicGrowth, descShareTopicCons, descShareTopicDrain, descShareTopicAge} {
		ch <- d
	}
}

func (c trafficCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	if total, usable := diskSpace(s.broker.Config().DataDir); total >= 0 {
		ch <- prometheus.MustNewConstMetric(descDirTotal, prometheus.GaugeValue, float64(total))
		ch <- prometheus.MustNewConstMetric(descDirUsable, prometheus.GaugeValue, float64(usable))
	}
	topics := s.broker.Topics()
	exists := make(map[string]bool, len(topics))
	for _, t := range topics {
		exists[t.Name] = true
	}
	tc := &s.metrics.topics
	tc.m.Range(func(k, v any) bool {
		name := k.(string)
		if !exists[name] {
			tc.m.Delete(name) // deleted topic: a recreated one starts again
			return true
		}
		t := v.(*topicIO)
		ch <- prometheus.MustNewConstMetric(descTopicBytesIn, prometheus.CounterValue, float64(t.bytesIn.Load()), name)
		ch <- prometheus.MustNewConstMetric(descTopicRecordsIn, prometheus.CounterValue, float64(t.recordsIn.Load()), name)
		ch <- prometheus.MustNewConstMetric(descTopicBytesOut, prometheus.CounterValue, float64(t.bytesOut.Load()), name)
		ch <- prometheus.MustNewConstMetric(descTopicRecordsOut, prometheus.CounterValue, float64(t.recordsOut.Load()), name)
		return true
	})

	scrape := c.rates.Begin(s.share.cfg.Now())
	defer scrape.End()
	me := s.broker.NodeID()
	sums := map[[2]string]*lagrate.Sum{}
	var order [][2]string
	for _, t := range topics {
		for _, p := range t.Partitions {
			if p.Leader != me {
				continue
			}
			reg, err := s.broker.ShareRegistry(t.Name, p.Partition)
			if err != nil {
				continue
			}
			groups := reg.Groups()
			if len(groups) == 0 {
				continue
			}
			lp, err := s.broker.Partition(t.Name, p.Partition)
			if err != nil {
				continue
			}
			hw := lp.Offsets().HighWatermark
			part := strconv.Itoa(int(p.Partition))
			for _, g := range groups {
				st, _ := reg.Group(g)
				if st == nil {
					continue
				}
				lag := sharepart.Lag(st, hw)
				pt := scrape.ObserveOldest(lagrate.Key{Group: g, Topic: t.Name, Partition: p.Partition}, hw, hw-lag, sharepart.OldestUnacked(st, hw), lp.FirstTimestamp)
				if pt.RatesOK {
					ch <- prometheus.MustNewConstMetric(descShareGrowth, prometheus.GaugeValue, pt.Rates.Growth, g, t.Name, part)
					ch <- prometheus.MustNewConstMetric(descShareConsume, prometheus.GaugeValue, pt.Rates.Consumption, g, t.Name, part)
					ch <- prometheus.MustNewConstMetric(descShareDrain, prometheus.GaugeValue, pt.Drain, g, t.Name, part)
				}
				k := [2]string{g, t.Name}
				sum := sums[k]
				if sum == nil {
					sum = &lagrate.Sum{}
					sums[k] = sum
					order = append(order, k)
				}
				sum.Add(pt)
			}
		}
	}
	for _, k := range order {
		sum := sums[k]
		ch <- prometheus.MustNewConstMetric(descShareTopicLag, prometheus.GaugeValue, float64(sum.Lag), k[0], k[1])
		if sum.RatesOK {
			ch <- prometheus.MustNewConstMetric(descShareTopicGrowth, prometheus.GaugeValue, sum.Growth, k[0], k[1])
			ch <- prometheus.MustNewConstMetric(descShareTopicCons, prometheus.GaugeValue, sum.Consumption, k[0], k[1])
			ch <- prometheus.MustNewConstMetric(descShareTopicDrain, prometheus.GaugeValue, sum.Drain(), k[0], k[1])
		}
		if sum.AgeOK {
			ch <- prometheus.MustNewConstMetric(descShareTopicAge, prometheus.GaugeValue, sum.OldestAge, k[0], k[1])
		}
	}
}
