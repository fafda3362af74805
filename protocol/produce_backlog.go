package protocol

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/replication"
)

// The queue users' overflow rule: a topic may name a group whose backlog
// bounds it, so that producers get an error instead of filling the disk
// while the group's consumers fall behind (docs: README "Backlog limits").
//
//	strata.produce.backlog.group         the group (consumer group or share group)
//	strata.produce.backlog.max.records   the most records it may have unconsumed; -1 = no limit
//
// The backlog is the group's records not yet consumed on the topic, summed
// over its partitions: for a consumer group high watermark - committed
// offset (its lag), for a share group the records not yet acknowledged
// (released, acquired or available, from its start offset to the high
// watermark); a partition where the group has neither a committed offset
// nor share state counts whole (high watermark - log start).
//
// Evaluated off the produce path: every broker that leads a partition of
// such a topic recomputes the topic's backlog every
// Config.BacklogCheckInterval (strata.produce.backlog.check.interval.ms)
// and publishes, behind an atomic pointer, which topics are over; Produce
// reads that map once per topic. Reading the offsets is local where this
// broker has them (its partitions' watermarks and share state, a group it
// coordinates) and otherwise one OffsetFetch, one ListOffsets and one
// ReadShareGroupStateSummary per leader through the internal client. A
// failed check keeps the previous answer for up to backlogStaleChecks
// intervals, then lets producers through (the rule guards the disk; it
// must not stop a topic because its group's coordinator is unreachable).
//
// A refused partition gets NOT_ENOUGH_REPLICAS with a message naming the
// group, the backlog and the limit. That code says "not written, try
// again": every Kafka client retries it (Java producer, librdkafka,
// franz-go, kafka-python, sarama) with its retry backoff, without a
// metadata refresh, and an idempotent producer keeps its sequence -- so a
// producer with retries waits for the consumers, as back pressure, and
// fails only when its delivery timeout passes. POLICY_VIOLATION or
// THROTTLING_QUOTA_EXCEEDED would fail the send at once in most clients
// (the latter is unknown to librdkafka's and older clients' produce path),
// and KAFKA_STORAGE_ERROR would make clients refresh metadata on every try
// and reads like a broken disk.

// Topic configs of the rule (retention's table validates them).
const (
	BacklogGroupConfig      = "strata.produce.backlog.group"
	BacklogMaxRecordsConfig = "strata.produce.backlog.max.records"
)

// DefaultBacklogCheckInterval is strata.produce.backlog.check.interval.ms's default.
const DefaultBacklogCheckInterval = time.Second

// backlogStaleChecks: failed checks in a row after which a topic's last
// answer is dropped (producers let through).
const backlogStaleChecks = 10

// backlogState is one guarded topic as last checked.
type backlogState struct {
	group    string
	max      int64
	backlog  int64
	over     bool
	failures int // checks failed in a row since the last good one
}

// backlogGuard owns the guarded topics' states: one goroutine (loop)
// writes, Produce reads through states.
type backlogGuard struct {
	s        *Server
	every    time.Duration
	states   atomic.Pointer[map[string]backlogState]
	refusals *prometheus.CounterVec

	mu     sync.Mutex
	logged map[string]time.Time // protected by mu: last warning per topic
}

var (
	descBacklog = prometheus.NewDesc("strata_produce_backlog_records",
		"A topic's backlog for its strata.produce.backlog.group as last checked by this broker: records the group has not consumed. Exported by every broker leading a partition of the topic.",
		[]string{"topic", "group"}, nil)
	descBacklogLimit = prometheus.NewDesc("strata_produce_backlog_limit_records",
		"A topic's strata.produce.backlog.max.records: above it, producers get NOT_ENOUGH_REPLICAS.",
		[]string{"topic", "group"}, nil)
)

func newBacklogGuard(s *Server, every time.Duration, reg prometheus.Registerer) *backlogGuard {
	if every <= 0 {
		every = DefaultBacklogCheckInterval
	}
	g := &backlogGuard{s: s, every: every, logged: map[string]time.Time{},
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_produce_backlog_refusals_total",
			Help: "Produced batches refused (NOT_ENOUGH_REPLICAS) because the topic's strata.produce.backlog.group was over strata.produce.backlog.max.records, by topic.",
		}, []string{"topic"})}
	empty := map[string]backlogState{}
	g.states.Store(&empty)
	if reg != nil {
		reg.MustRegister(g.refusals, backlogCollector{g})
	}
	return g
}

// refuse reports whether a batch for topic must be refused, with the
// message, and counts the refusal.
func (g *backlogGuard) refuse(topic string) (string, bool) {
	st, ok := (*g.states.Load())[topic]
	if !ok || !st.over {
		return "", false
	}
	g.refusals.WithLabelValues(topic).Inc()
	return fmt.Sprintf("topic %s refuses records while group %s has %d records not consumed, more than %s=%d; retry once it has caught up",
		topic, st.group, st.backlog, BacklogMaxRecordsConfig, st.max), true
}

// backlogRule returns the group and limit a topic's configs set, ok false
// when the rule is off.
func backlogRule(t replication.TopicInfo) (group string, max int64, ok bool) {
	group = strings.TrimSpace(t.Configs[BacklogGroupConfig])
	v, set := t.Configs[BacklogMaxRecordsConfig]
	if group == "" || !set {
		return "", 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return group, n, true
}

// loop checks every interval until stop closes.
func (g *backlogGuard) loop(stop <-chan struct{}) {
	t := time.NewTicker(g.every)
	defer t.Stop()
	// A check in flight when the server closes ends with it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		g.check(ctx)
	}
}

// check recomputes the backlog of every guarded topic this broker leads a
// partition of, and publishes the result.
func (g *backlogGuard) check(parent context.Context) {
	b := g.s.broker
	me := b.NodeID()
	prev := *g.states.Load()
	next := map[string]backlogState{}
	for _, t := range b.Topics() {
		group, limit, ok := backlogRule(t)
		if !ok {
			continue
		}
		leads := false
		for _, p := range t.Partitions {
			leads = leads || p.Leader == me
		}
		if !leads {
			continue
		}
		if parent.Err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(parent, max(g.every, 2*time.Second))
		n, err := g.s.topicBacklog(ctx, t, group)
		cancel()
		st := backlogState{group: group, max: limit, backlog: n, over: n > limit}
		if err != nil {
			old, had := prev[t.Name]
			st = backlogState{group: group, max: limit, failures: 1}
			if had && old.group == group {
				st.backlog, st.over, st.failures = old.backlog, old.over && old.failures+1 < backlogStaleChecks, old.failures+1
			}
			g.warn(t.Name, "checking a topic's backlog failed", "topic", t.Name, "group", group, "failures", st.failures, "err", err)
			if st.failures == backlogStaleChecks && old.over {
				g.s.log.Warn("topic takes records again: its group's backlog could not be read for the last checks", "topic", t.Name, "group", group,
					"checks", backlogStaleChecks, "err", err)
			}
		} else if old := prev[t.Name]; st.over != old.over {
			if st.over {
				g.s.log.Warn("topic refuses records: its group's backlog is over the limit", "topic", t.Name, "group", group, "backlog", n, "limit", limit)
			} else {
				g.s.log.Info("topic takes records again: its group's backlog is within the limit", "topic", t.Name, "group", group, "backlog", n, "limit", limit)
			}
		}
		next[t.Name] = st
	}
	g.states.Store(&next)
}

func (g *backlogGuard) warn(topic, msg string, args ...any) {
	g.mu.Lock()
	now := time.Now()
	if now.Sub(g.logged[topic]) < time.Minute {
		g.mu.Unlock()
		return
	}
	g.logged[topic] = now
	g.mu.Unlock()
	g.s.log.Warn(msg, args...)
}

// topicBacklog sums group's unconsumed records over t's partitions.
func (s *Server) topicBacklog(ctx context.Context, t replication.TopicInfo, group string) (int64, error) {
	n := len(t.Partitions)
	starts, ends := make([]int64, n), make([]int64, n)
	local := make([]bool, n)
	remote := false
	me := s.broker.NodeID()
	for i, p := range t.Partitions {
		lp, err := s.broker.Partition(t.Name, p.Partition)
		if p.Leader != me || err != nil {
			remote = true
			continue
		}
		local[i] = true
		o := lp.Offsets()
		starts[i], ends[i] = o.LogStart, o.HighWatermark
	}
	if remote {
		cl, err := s.shareRemote.get()
		if err != nil {
			return 0, err
		}
		adm := kadm.NewClient(cl)
		so, err := adm.ListStartOffsets(ctx, t.Name)
		if err != nil {
			return 0, err
		}
		eo, err := adm.ListEndOffsets(ctx, t.Name)
		if err != nil {
			return 0, err
		}
		for i, p := range t.Partitions {
			if local[i] {
				continue
			}
			s1, ok1 := so.Lookup(t.Name, p.Partition)
			e1, ok2 := eo.Lookup(t.Name, p.Partition)
			if !ok1 || !ok2 || s1.Err != nil || e1.Err != nil {
				return 0, fmt.Errorf("offsets of %s-%d unavailable", t.Name, p.Partition)
			}
			starts[i], ends[i] = s1.Offset, e1.Offset
		}
	}
	committed, err := s.groupCommitted(ctx, group, t)
	if err != nil {
		return 0, err
	}
	var shareLag []shareSummary
	if len(committed) < n {
		tps := make([]shareTP, n)
		for i, p := range t.Partitions {
			tps[i] = shareTP{topic: t, partition: p.Partition, leader: p.Leader}
		}
		shareLag = s.summarize(ctx, group, tps)
	}
	var total int64
	for i, p := range t.Partitions {
		switch c, ok := committed[p.Partition]; {
		case ok:
			total += max(ends[i]-max(c, starts[i]), 0)
		case shareLag != nil && shareLag[i].code == 0 && shareLag[i].exists:
			total += max(shareLag[i].lag, 0)
		case shareLag != nil && shareLag[i].code != 0:
			return 0, fmt.Errorf("share state of %s-%d: %w", t.Name, p.Partition, kerr.ErrorForCode(shareLag[i].code))
		default:
			total += max(ends[i]-starts[i], 0)
		}
	}
	return total, nil
}

// groupCommitted returns group's committed offsets on t's partitions (only
// those it has), asking this broker's coordinator when it coordinates the
// group and the group's coordinator through the internal client otherwise.
func (s *Server) groupCommitted(ctx context.Context, group string, t replication.TopicInfo) (map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	// Both: kgo sends the newest version the coordinator speaks, and
	// v10 names topics by ID.
	rt.Topic, rt.TopicID = t.Name, t.ID
	for _, p := range t.Partitions {
		rt.Partitions = append(rt.Partitions, p.Partition)
	}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := s.groups.OffsetFetch(ctx, req)
	if err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == kerr.NotCoordinator.Code {
		cl, cerr := s.shareRemote.get()
		if cerr != nil {
			return nil, cerr
		}
		var kr kmsg.Response
		kr, err = cl.Request(ctx, req)
		if err == nil {
			resp = kr.(*kmsg.OffsetFetchResponse)
		}
	}
	if err != nil {
		return nil, err
	}
	if len(resp.Groups) != 1 {
		return nil, fmt.Errorf("OffsetFetch answered %d groups", len(resp.Groups))
	}
	if code := resp.Groups[0].ErrorCode; code != 0 {
		return nil, kerr.ErrorForCode(code)
	}
	out := map[int32]int64{}
	for _, rt := range resp.Groups[0].Topics {
		if rt.Topic != t.Name && rt.TopicID != t.ID {
			continue
		}
		for _, p := range rt.Partitions {
			if p.ErrorCode == 0 && p.Offset >= 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}

type backlogCollector struct{ g *backlogGuard }

func (backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descBacklog
	ch <- descBacklogLimit
}

func (c backlogCollector) Collect(ch chan<- prometheus.Metric) {
	states := *c.g.states.Load()
	names := make([]string, 0, len(states))
	for n := range states {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		st := states[n]
		ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, float64(st.backlog), n, st.group)
		ch <- prometheus.MustNewConstMetric(descBacklogLimit, prometheus.GaugeValue, float64(st.max), n, st.group)
	}
}
