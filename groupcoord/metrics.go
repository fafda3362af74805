package groupcoord

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/lagrate"
	"github.com/strata-io/strata/log"
)

// Every series the group coordinator exports, read at scrape time from the
// shards this broker has loaded (no work on the request path). Names
// follow Kafka (kafka.coordinator.group:type=GroupMetadataManager) and,
// for the per-group series Kafka leaves to external exporters, the
// widely used kafka_exporter's:
//
//	kafka_coordinator_group_metadata_manager_num_groups{state}   groups by state (Stable, Empty, ...), share groups included
//	kafka_consumergroup_members{group}                           members of each group (share groups too)
//	kafka_consumergroup_current_offset{group,topic,partition}    committed offset
//	kafka_consumergroup_lag{group,topic,partition}               high watermark - committed (>= 0),
//	                                                             only where this broker has the partition's log
//	kafka_consumergroup_lag_sum{group,topic}                     the same summed over the topic's partitions
//
// Over the sliding window LagWindow (strata.metrics.lag.window.ms), from
// one sample of the high watermark and the committed offset per scrape
// (internal/lagrate), per partition {group,topic,partition} and per topic
// {group,topic} (the strata_consumergroup_topic_* names):
//
//	strata_consumergroup_lag_growth_rate             records/s the lag grew (negative: draining)
//	strata_consumergroup_consumption_rate            records/s the committed offset advanced
//	strata_consumergroup_time_to_drain_seconds       lag / net consumption rate; +Inf while not shrinking, 0 with no lag
//	strata_consumergroup_oldest_unconsumed_age_seconds  age of the record at the committed offset by its
//	                                                    timestamp (its batch's first); 0 with no lag
//
// The rates appear from a partition's second scrape on.
//
// Bounds: a scrape asks each loaded shard for a snapshot through its call
// queue (one call per shard, the whole scrape bounded by scrapeTimeout; a
// shard that does not answer in time is left out of that scrape), and
// emits at most maxGroupSeries per-group series and maxOffsetSeries
// per-partition series; past those the rest are left out and counted in
// strata_consumergroup_series_dropped.
const (
	scrapeTimeout   = 2 * time.Second
	maxGroupSeries  = 10_000
	maxOffsetSeries = 50_000
	// seriesPerOffset: a committed offset's series (offset, lag, growth,
	// consumption, time to drain, oldest age), counted as dropped when
	// past maxOffsetSeries.
	seriesPerOffset = 6
)

var (
	descGroups = prometheus.NewDesc("kafka_coordinator_group_metadata_manager_num_groups",
		"Groups this broker coordinates, by state.", []string{"state"}, nil)
	descMembers = prometheus.NewDesc("kafka_consumergroup_members",
		"Members of a group this broker coordinates.", []string{"group"}, nil)
	descCommitted = prometheus.NewDesc("kafka_consumergroup_current_offset",
		"A group's committed offset for a partition.", []string{"group", "topic", "partition"}, nil)
	descLag = prometheus.NewDesc("kafka_consumergroup_lag",
		"Records between a group's committed offset and the partition's high watermark.", []string{"group", "topic", "partition"}, nil)
	descLagSum = prometheus.NewDesc("kafka_consumergroup_lag_sum",
		"A group's lag summed over a topic's partitions.", []string{"group", "topic"}, nil)
	descGrowth = prometheus.NewDesc("strata_consumergroup_lag_growth_rate",
		"Records per second a group's lag on a partition grew over the lag window (negative while draining).", []string{"group", "topic", "partition"}, nil)
	descConsume = prometheus.NewDesc("strata_consumergroup_consumption_rate",
		"Records per second a group's committed offset on a partition advanced over the lag window.", []string{"group", "topic", "partition"}, nil)
	descDrain = prometheus.NewDesc("strata_consumergroup_time_to_drain_seconds",
		"Estimated time for a group to consume a partition's lag at the net rate of the lag window: +Inf while the lag does not shrink, 0 with no lag.", []string{"group", "topic", "partition"}, nil)
	descAge = prometheus.NewDesc("strata_consumergroup_oldest_unconsumed_age_seconds",
		"Age, by its timestamp, of the record at a group's committed offset on a partition (the oldest it has not consumed); 0 with no lag.", []string{"group", "topic", "partition"}, nil)
	descTopicGrowth = prometheus.NewDesc("strata_consumergroup_topic_lag_growth_rate",
		"Records per second a group's lag on a topic grew over the lag window (negative while draining).", []string{"group", "topic"}, nil)
	descTopicConsume = prometheus.NewDesc("strata_consumergroup_topic_consumption_rate",
		"Records per second a group consumed from a topic over the lag window.", []string{"group", "topic"}, nil)
	descTopicDrain = prometheus.NewDesc("strata_consumergroup_topic_time_to_drain_seconds",
		"Estimated time for a group to consume its lag on a topic at the net rate of the lag window: +Inf while it does not shrink.", []string{"group", "topic"}, nil)
	descTopicAge = prometheus.NewDesc("strata_consumergroup_topic_oldest_unconsumed_age_seconds",
		"Age of the oldest record a group has not consumed on a topic (the largest of its partitions').", []string{"group", "topic"}, nil)
	descDropped = prometheus.NewDesc("strata_consumergroup_series_dropped",
		"Per-group and per-partition series left out of this scrape by the series limits.", nil, nil)
)

// RegisterMetrics registers c's collector on reg.
func RegisterMetrics(reg prometheus.Registerer, c *Coordinator) {
	reg.MustRegister(collector{c, lagrate.NewTracker(c.cfg.LagWindow)})
}

type collector struct {
	c     *Coordinator
	rates *lagrate.Tracker
}

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGroups, descMembers, descCommitted, descLag, descLagSum, descGrowth, descConsume, descDrain, descAge,
		descTopicGrowth, descTopicConsume, descTopicDrain, descTopicAge, descDropped} {
		ch <- d
	}
}

// groupSnap is one group as a shard saw it.
type groupSnap struct {
	id      string
	state   string
	members int
	offsets []offsetSnap
}

type offsetSnap struct {
	topic     string
	partition int32
	offset    int64
}

func (col collector) Collect(ch chan<- prometheus.Metric) {
	c := col.c
	var shards []*shard
	for _, sh := range c.core.Shards() {
		if sh.IsLoaded() {
			shards = append(shards, sh.State())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()

	var groups []groupSnap
	for _, s := range shards {
		var snap []groupSnap
		_, code, err := c.doOn(ctx, s, 0, func(s *shard, e *effects, rid uint64) {
			snap = snapshotShard(s)
			e.reply(rid, nil)
		})
		if err != nil {
			break // out of time: report what was gathered
		}
		if code != 0 {
			continue // unloaded meanwhile
		}
		groups = append(groups, snap...)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].id < groups[j].id })

	byState := map[string]int{}
	dropped, offsetSeries := 0, 0
	type hwm struct {
		lp *log.Partition
		hw int64 // -1: not led here
	}
	hw := map[offsetSnap]hwm{} // topic/partition (offset field unused)
	scrape := col.rates.Begin(c.cfg.Now())
	defer scrape.End()
	for i, g := range groups {
		byState[g.state]++
		if i >= maxGroupSeries {
			dropped += 1 + seriesPerOffset*len(g.offsets)
			continue
		}
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(g.members), g.id)
		var sum lagrate.Sum
		sumTopic := ""
		flush := func() {
			if sumTopic == "" {
				return
			}
			ch <- prometheus.MustNewConstMetric(descLagSum, prometheus.GaugeValue, float64(sum.Lag), g.id, sumTopic)
			if sum.RatesOK {
				ch <- prometheus.MustNewConstMetric(descTopicGrowth, prometheus.GaugeValue, sum.Growth, g.id, sumTopic)
				ch <- prometheus.MustNewConstMetric(descTopicConsume, prometheus.GaugeValue, sum.Consumption, g.id, sumTopic)
				ch <- prometheus.MustNewConstMetric(descTopicDrain, prometheus.GaugeValue, sum.Drain(), g.id, sumTopic)
			}
			if sum.AgeOK {
				ch <- prometheus.MustNewConstMetric(descTopicAge, prometheus.GaugeValue, sum.OldestAge, g.id, sumTopic)
			}
			sum, sumTopic = lagrate.Sum{}, ""
		}
		for _, o := range g.offsets { // sorted by topic, partition
			if offsetSeries >= maxOffsetSeries {
				dropped += seriesPerOffset
				continue
			}
			offsetSeries++
			p := strconv.Itoa(int(o.partition))
			ch <- prometheus.MustNewConstMetric(descCommitted, prometheus.GaugeValue, float64(o.offset), g.id, o.topic, p)
			key := offsetSnap{topic: o.topic, partition: o.partition}
			h, ok := hw[key]
			if !ok {
				h.hw = -1
				if lp, err := c.broker.Partition(o.topic, o.partition); err == nil {
					h = hwm{lp: lp, hw: lp.Offsets().HighWatermark}
				}
				hw[key] = h
			}
			if h.hw < 0 {
				continue
			}
			if o.topic != sumTopic {
				flush()
				sumTopic = o.topic
			}
			pt := scrape.Observe(lagrate.Key{Group: g.id, Topic: o.topic, Partition: o.partition}, h.hw, o.offset, h.lp.FirstTimestamp)
			sum.Add(pt)
			ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(pt.Lag), g.id, o.topic, p)
			if pt.RatesOK {
				ch <- prometheus.MustNewConstMetric(descGrowth, prometheus.GaugeValue, pt.Rates.Growth, g.id, o.topic, p)
				ch <- prometheus.MustNewConstMetric(descConsume, prometheus.GaugeValue, pt.Rates.Consumption, g.id, o.topic, p)
				ch <- prometheus.MustNewConstMetric(descDrain, prometheus.GaugeValue, pt.Drain, g.id, o.topic, p)
			}
			if pt.AgeOK {
				ch <- prometheus.MustNewConstMetric(descAge, prometheus.GaugeValue, pt.OldestAge, g.id, o.topic, p)
			}
		}
		flush()
	}
	for state, n := range byState {
		ch <- prometheus.MustNewConstMetric(descGroups, prometheus.GaugeValue, float64(n), state)
	}
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.GaugeValue, float64(dropped))
}

// snapshotShard copies what the collector needs; it runs on the shard's
// goroutine (the only one that touches its groups).
func snapshotShard(s *shard) []groupSnap {
	out := make([]groupSnap, 0, len(s.groups)+len(s.cgroups)+len(s.sgroups))
	seen := make(map[string]bool, len(s.cgroups))
	for id, g := range s.groups {
		gs := groupSnap{id: id, state: g.state.String(), members: len(g.members)}
		if cg := s.cgroups[id]; cg != nil {
			// A KIP-848 group: its offsets live on this classic
			// group, its state and members on the cgroup.
			gs.state, gs.members = cg.stateName(), len(cg.members)
			seen[id] = true
		}
		for topic, ps := range g.offsets {
			for p, o := range ps {
				gs.offsets = append(gs.offsets, offsetSnap{topic: topic, partition: p, offset: o.Offset})
			}
		}
		sort.Slice(gs.offsets, func(i, j int) bool {
			a, b := gs.offsets[i], gs.offsets[j]
			return a.topic < b.topic || a.topic == b.topic && a.partition < b.partition
		})
		out = append(out, gs)
	}
	for id, cg := range s.cgroups {
		if !seen[id] {
			out = append(out, groupSnap{id: id, state: cg.stateName(), members: len(cg.members)})
		}
	}
	for id, sg := range s.sgroups {
		out = append(out, groupSnap{id: id, state: sg.stateName(), members: len(sg.members)})
	}
	return out
}
