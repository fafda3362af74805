package protocol

import (
	"context"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/dlq"
	"github.com/strata-io/strata/internal/groupconfig"
)

// The depth of share groups' dead-letter topics as metrics: the letters
// waiting in each (not yet redriven, nor skipped as gone) and the age of
// the oldest, per group and dead-letter topic. Counting reads the waiting
// letters (internal/dlq.Inspect, what `strata dlq list` shows), so one
// broker does it per topic -- the leader of the dead-letter topic's
// partition 0, which exports the series (a sum over brokers counts each
// letter once) -- every strata.share.dlq.depth.interval.ms.

var (
	descDLQDepth  = prometheus.NewDesc("strata_share_dlq_depth", "Dead letters waiting in the share group's dead-letter topic: written and not yet redriven (as strata dlq list counts them). Exported by the leader of the dead-letter topic's partition 0, refreshed every strata.share.dlq.depth.interval.ms.", []string{"group", "topic"}, nil)
	descDLQOldest = prometheus.NewDesc("strata_share_dlq_oldest_age_seconds", "Age of the oldest dead letter waiting in the share group's dead-letter topic (0 when none), by the time it was written.", []string{"group", "topic"}, nil)
)

// dlqDepth is one group's dead-letter topic, as last counted.
type dlqDepth struct {
	letters  int
	oldestMs int64 // unix ms the oldest waiting letter was written; 0 = none
}

// depthLoop counts the depths every cfg.DLQDepthEvery until stop closes.
func (w *dlqWriter) depthLoop(stop <-chan struct{}) {
	t := time.NewTicker(w.l.cfg.DLQDepthEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		w.countDepths(stop)
	}
}

// countDepths counts the waiting letters of every share group whose
// dead-letter topic's partition 0 this broker leads.
func (w *dlqWriter) countDepths(stop <-chan struct{}) {
	b := w.l.broker
	if b == nil {
		return
	}
	me := b.NodeID()
	var seeds []string
	for _, bi := range b.Brokers() {
		seeds = append(seeds, net.JoinHostPort(bi.Host, strconv.Itoa(int(bi.Port))))
	}
	out := map[[2]string]dlqDepth{}
	for _, g := range b.GroupsWithConfigs() {
		select {
		case <-stop:
			return
		default:
		}
		topic := strings.TrimSpace(b.GroupConfigsView(g)[groupconfig.DLQTopicName])
		if topic == "" {
			continue
		}
		t, ok := b.Topic(topic)
		if !ok || len(t.Partitions) == 0 || t.Partitions[0].Leader != me {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), w.l.cfg.DLQDepthEvery)
		d, err := dlq.Inspect(ctx, seeds, g, topic, "", 0, w.l.interBroker...)
		cancel()
		if err != nil {
			w.warn("depth/"+g, "counting a dead-letter topic's depth failed", "group", g, "topic", topic, "err", err)
			continue
		}
		dd := dlqDepth{letters: d.Letters}
		if !d.Oldest.IsZero() {
			dd.oldestMs = d.Oldest.UnixMilli()
		}
		out[[2]string{g, topic}] = dd
	}
	w.mu.Lock()
	w.depths = out
	w.mu.Unlock()
}

// collectDepths exports the last count.
func (w *dlqWriter) collectDepths(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	keys := make([][2]string, 0, len(w.depths))
	for k := range w.depths {
		keys = append(keys, k)
	}
	depths := make([]dlqDepth, 0, len(keys))
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		depths = append(depths, w.depths[k])
	}
	w.mu.Unlock()
	now := w.l.cfg.Now().UnixMilli()
	for i, k := range keys {
		d := depths[i]
		age := 0.0
		if d.oldestMs > 0 {
			age = float64(max(now-d.oldestMs, 0)) / 1000
		}
		ch <- prometheus.MustNewConstMetric(descDLQDepth, prometheus.GaugeValue, float64(d.letters), k[0], k[1])
		ch <- prometheus.MustNewConstMetric(descDLQOldest, prometheus.GaugeValue, age, k[0], k[1])
	}
}
