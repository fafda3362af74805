package groupcoord

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	descDropped = prometheus.NewDesc("strata_consumergroup_series_dropped",
		"Per-group and per-partition series left out of this scrape by the series limits.", nil, nil)
)

// RegisterMetrics registers c's collector on reg.
func RegisterMetrics(reg prometheus.Registerer, c *Coordinator) {
	reg.MustRegister(collector{c})
}

type collector struct{ c *Coordinator }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGroups, descMembers, descCommitted, descLag, descDropped} {
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
	hw := map[offsetSnap]int64{} // topic/partition -> high watermark (offset field unused)
	for i, g := range groups {
		byState[g.state]++
		if i >= maxGroupSeries {
			dropped += 1 + 2*len(g.offsets)
			continue
		}
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(g.members), g.id)
		for _, o := range g.offsets {
			if offsetSeries >= maxOffsetSeries {
				dropped += 2
				continue
			}
			offsetSeries++
			p := strconv.Itoa(int(o.partition))
			ch <- prometheus.MustNewConstMetric(descCommitted, prometheus.GaugeValue, float64(o.offset), g.id, o.topic, p)
			key := offsetSnap{topic: o.topic, partition: o.partition}
			h, ok := hw[key]
			if !ok {
				h = -1
				if lp, err := c.broker.Partition(o.topic, o.partition); err == nil {
					h = lp.Offsets().HighWatermark
				}
				hw[key] = h
			}
			if h >= 0 {
				ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(max(h-o.offset, 0)), g.id, o.topic, p)
			}
		}
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
