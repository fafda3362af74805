package txncoord

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/coord"
)

// Every series the transaction coordinator exports. Transactions by state
// are read at scrape time from the loaded shards (one call per shard,
// bounded by scrapeTimeout); the counters are bumped where the events
// happen. Names follow Kafka's where it has one
// (kafka.coordinator.transaction), else strata_:
//
//	kafka_coordinator_transaction_num_transactions{state}   transactional IDs by state
//	strata_transaction_markers_written_total                markers appended (local and remote)
//	strata_transaction_markers_failed_total                 marker writes that failed (retried)
//	strata_transaction_timeouts_total                       transactions aborted by transaction.timeout.ms
//	strata_transaction_ids_expired_total                    IDs forgotten by transactional.id.expiration.ms
var (
	descTxns = prometheus.NewDesc("kafka_coordinator_transaction_num_transactions",
		"Transactional IDs this broker coordinates, by state.", []string{"state"}, nil)
	descMarkers = prometheus.NewDesc("strata_transaction_markers_written_total",
		"Transaction markers written to partitions.", nil, nil)
	descMarkerFailures = prometheus.NewDesc("strata_transaction_markers_failed_total",
		"Transaction marker writes that failed and were retried.", nil, nil)
	descTimeouts = prometheus.NewDesc("strata_transaction_timeouts_total",
		"Transactions aborted because they outlived transaction.timeout.ms.", nil, nil)
	descExpired = prometheus.NewDesc("strata_transaction_ids_expired_total",
		"Transactional IDs forgotten after transactional.id.expiration.ms.", nil, nil)
)

// counters are the coordinator's event counts.
type counters struct {
	markers, markerFailures, timeouts, expired atomic.Int64
}

// RegisterMetrics registers c's collector on reg.
func RegisterMetrics(reg prometheus.Registerer, c *Coordinator) {
	reg.MustRegister(collector{c})
}

type collector struct{ c *Coordinator }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTxns, descMarkers, descMarkerFailures, descTimeouts, descExpired} {
		ch <- d
	}
}

func (col collector) Collect(ch chan<- prometheus.Metric) {
	c := col.c
	shards := c.core.Shards()
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	byState := map[string]float64{}
	for st := stateEmpty; st <= statePrepareFence; st++ {
		if st != stateDead {
			byState[StateName(st)] = 0
		}
	}
	for _, s := range shards {
		if !s.IsLoaded() {
			continue
		}
		counts := map[string]float64{}
		code, err := coord.Do(ctx, s, 0, func(s *shard) {
			for _, m := range s.mc.txns {
				counts[StateName(m.state)]++
			}
		})
		if err != nil || code != 0 {
			continue
		}
		for k, v := range counts {
			byState[k] += v
		}
	}
	for st, n := range byState {
		ch <- prometheus.MustNewConstMetric(descTxns, prometheus.GaugeValue, n, st)
	}
	ch <- prometheus.MustNewConstMetric(descMarkers, prometheus.CounterValue, float64(c.stats.markers.Load()))
	ch <- prometheus.MustNewConstMetric(descMarkerFailures, prometheus.CounterValue, float64(c.stats.markerFailures.Load()))
	ch <- prometheus.MustNewConstMetric(descTimeouts, prometheus.CounterValue, float64(c.stats.timeouts.Load()))
	ch <- prometheus.MustNewConstMetric(descExpired, prometheus.CounterValue, float64(c.stats.expired.Load()))
}
