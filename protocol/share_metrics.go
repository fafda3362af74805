package protocol

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/sharepart"
)

// Share-group metrics, per share group and partition this broker leads:
//
//	strata_share_records_acquired_total{group,topic,partition}        acquisitions (deliveries)
//	strata_share_records_redelivered_total{group,topic,partition}     of which redeliveries (delivery count > 1)
//	strata_share_acknowledgements_total{group,topic,partition,type}   accept, release, reject, renew, gap
//	strata_share_records_archived_total{group,topic,partition,cause}  delivery_limit (poison), rejected, skipped (control, aborted, gone)
//	strata_share_lock_expirations_total{group,topic,partition}        locks that lapsed
//	strata_share_redeliveries_delayed_total{group,topic,partition}    records released (or lapsed) that wait for their backoff
//	strata_share_records_delayed{group,topic,partition}               records waiting for their redelivery backoff now
//	strata_share_records_expired_total{group,topic,partition}         records archived undelivered: older than strata.share.record.ttl.ms
//	strata_share_redeliveries_hurried_total{group,topic,partition}    waiting records delivered early: the record-lock window was full
//	strata_share_partition_lag{group,topic,partition}                 records not yet acknowledged or archived (backlog)
//	strata_share_records_in_flight{group,topic,partition}             records acquired under a live lock
//	strata_share_oldest_unacked_age_seconds{group,topic,partition}    age (by record timestamp) of the oldest such record
//	strata_share_sessions                                             open share sessions on this broker
//
// Counters live in memory on the leader that counted them (they restart
// with it, as Prometheus counters may); the gauges are read from the
// replicated state at scrape time. Label values are bounded by the share
// groups and partitions that exist.

type shareCounters struct {
	acquired, redelivered, expired, delayed     int64
	hurried, ttlExpired                         int64
	accepted, released, rejected, renewed, gaps int64
	archivedLimit, archivedSkip                 int64
}

// shareMetrics holds the per-share-partition counters.
type shareMetrics struct {
	mu sync.Mutex
	by map[shareKey]*shareCounters // protected by mu
}

func (m *shareMetrics) add(k shareKey, st sharepart.Stats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[shareKey]*shareCounters{}
	}
	c := m.by[k]
	if c == nil {
		c = &shareCounters{}
		m.by[k] = c
	}
	c.acquired += int64(st.Acquired)
	c.redelivered += int64(st.Redelivered)
	c.expired += int64(st.Expired)
	c.delayed += int64(st.Delayed)
	c.hurried += int64(st.Hurried)
	c.ttlExpired += int64(st.TTLExpired)
	c.accepted += int64(st.Accepted)
	c.released += int64(st.Released)
	c.rejected += int64(st.Rejected)
	c.renewed += int64(st.Renewed)
	c.gaps += int64(st.Gaps)
	c.archivedLimit += int64(st.ArchivedLimit)
	c.archivedSkip += int64(st.ArchivedSkip)
}

var (
	shareLabels       = []string{"group", "topic", "partition"}
	descShareAcquired = prometheus.NewDesc("strata_share_records_acquired_total", "Records acquired by share group members (every delivery).", shareLabels, nil)
	descShareRedeliv  = prometheus.NewDesc("strata_share_records_redelivered_total", "Acquisitions of records delivered before (delivery count above 1).", shareLabels, nil)
	descShareAcks     = prometheus.NewDesc("strata_share_acknowledgements_total", "Records acknowledged, by acknowledgement type (accept, release, reject, renew, gap).", append(shareLabels[:3:3], "type"), nil)
	descShareArchived = prometheus.NewDesc("strata_share_records_archived_total", "Records archived without being accepted, by cause: delivery_limit (the delivery count limit), rejected, skipped (control batches, aborted transactions, records gone from the log).", append(shareLabels[:3:3], "cause"), nil)
	descShareExpired  = prometheus.NewDesc("strata_share_lock_expirations_total", "Acquisition locks that lapsed before their records were acknowledged.", shareLabels, nil)
	descShareDelayedT = prometheus.NewDesc("strata_share_redeliveries_delayed_total", "Records released, or whose lock lapsed, that were made to wait for their redelivery backoff (strata.share.redelivery.backoff.*).", shareLabels, nil)
	descShareHurried  = prometheus.NewDesc("strata_share_redeliveries_hurried_total", "Records delivered before their redelivery backoff ended because they held the start offset with the record-lock window full (a backoff never stalls a partition).", shareLabels, nil)
	descShareTTL      = prometheus.NewDesc("strata_share_records_expired_total", "Records archived without being delivered: their batch was older than strata.share.record.ttl.ms (dead-lettered with reason ttl-expired when the group has a dead-letter topic).", shareLabels, nil)
	descShareDelayed  = prometheus.NewDesc("strata_share_records_delayed", "Records waiting for their redelivery backoff, or never delivered and held back by their strata.deliver.after.ms header: available, not before a later time.", shareLabels, nil)
	descShareLag      = prometheus.NewDesc("strata_share_partition_lag", "Records of the partition not yet acknowledged or archived by the share group (its backlog).", shareLabels, nil)
	descShareInFlight = prometheus.NewDesc("strata_share_records_in_flight", "Records acquired by a member under a live lock.", shareLabels, nil)
	descShareOldest   = prometheus.NewDesc("strata_share_oldest_unacked_age_seconds", "Age, by its timestamp, of the oldest record not yet acknowledged or archived (0 when none).", shareLabels, nil)
	descShareSessions = prometheus.NewDesc("strata_share_sessions", "Open share sessions on this broker.", nil, nil)
)

// shareCollector exports the share metrics of s.
type shareCollector struct{ s *Server }

func (c shareCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descShareAcquired, descShareRedeliv, descShareAcks, descShareArchived, descShareExpired, descShareDelayedT, descShareHurried, descShareTTL, descShareDelayed, descShareLag, descShareInFlight, descShareOldest, descShareSessions} {
		ch <- d
	}
	dlqDescribe(ch)
}

func (c shareCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	sl := s.share
	sl.dlq.collect(ch)
	ch <- prometheus.MustNewConstMetric(descShareSessions, prometheus.GaugeValue, float64(sl.sessions.count()))
	names := map[[16]byte]string{}
	for _, t := range s.broker.Topics() {
		names[t.ID] = t.Name
	}
	sl.metrics.mu.Lock()
	for k, v := range sl.metrics.by {
		topic, ok := names[k.topicID]
		if !ok {
			continue
		}
		lv := []string{k.group, topic, strconv.Itoa(int(k.partition))}
		counter := func(d *prometheus.Desc, n int64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(n), append(lv[:3:3], extra...)...)
		}
		counter(descShareAcquired, v.acquired)
		counter(descShareRedeliv, v.redelivered)
		counter(descShareExpired, v.expired)
		counter(descShareDelayedT, v.delayed)
		counter(descShareHurried, v.hurried)
		counter(descShareTTL, v.ttlExpired)
		counter(descShareAcks, v.accepted, "accept")
		counter(descShareAcks, v.released, "release")
		counter(descShareAcks, v.rejected, "reject")
		counter(descShareAcks, v.renewed, "renew")
		counter(descShareAcks, v.gaps, "gap")
		counter(descShareArchived, v.archivedLimit, "delivery_limit")
		counter(descShareArchived, v.rejected, "rejected")
		counter(descShareArchived, v.archivedSkip, "skipped")
	}
	sl.metrics.mu.Unlock()
	now := sl.cfg.Now()
	me := s.broker.NodeID()
	for _, t := range s.broker.Topics() {
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
			for _, g := range groups {
				st, _ := reg.Group(g)
				if st == nil {
					continue
				}
				lv := []string{g, t.Name, strconv.Itoa(int(p.Partition))}
				acquired, _, _ := st.Counts(now.UnixMilli())
				ch <- prometheus.MustNewConstMetric(descShareLag, prometheus.GaugeValue, float64(sharepart.Lag(st, hw)), lv...)
				ch <- prometheus.MustNewConstMetric(descShareInFlight, prometheus.GaugeValue, float64(acquired), lv...)
				ch <- prometheus.MustNewConstMetric(descShareDelayed, prometheus.GaugeValue, float64(st.Delayed(now.UnixMilli())), lv...)
				age := 0.0
				if off := sharepart.OldestUnacked(st, hw); off >= 0 {
					if ts, ok := lp.FirstTimestamp(off); ok {
						age = max(now.Sub(time.UnixMilli(ts)).Seconds(), 0)
					}
				}
				ch <- prometheus.MustNewConstMetric(descShareOldest, prometheus.GaugeValue, age, lv...)
			}
		}
	}
}
