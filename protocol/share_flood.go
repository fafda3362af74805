package protocol

import (
	"context"
	"encoding/json"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The dead-letter flood guard (strata.share.dlq.flood.*), counted
// cluster-wide. A share group's records are delivered by the leaders of
// its partitions, on several brokers; a ratio of dead letters to
// deliveries judged on each alone would pause a healthy group for one
// poison partition (or miss a flood spread thin). So each broker only
// counts its decisions' deliveries and dead letters per group (note) and
// reports them every floodReportEvery to the controller
// (replication.AskController); the controller keeps every broker's
// reports of the last strata.share.dlq.flood.window.ms per group (a
// sliding window), sums them, and pauses the group (pause: its group
// config strata.share.dlq.flood.paused, replicated metadata) when the
// letters reach strata.share.dlq.flood.ratio of at least
// strata.share.dlq.flood.min.deliveries deliveries. The controller's
// settings decide. A new controller starts with an empty window; counts
// a broker could not report wait for the next report (dropped once older
// than the window).

const (
	// floodReportEvery is how often a broker reports its counts.
	floodReportEvery = 500 * time.Millisecond
	// floodRequest names the report's controller handler.
	floodRequest = "share-dlq-flood"
	// floodGrace is how long the controller waits, once a group's
	// window is past the ratio, for the other brokers' reports of the
	// same moments before it pauses the group.
	floodGrace = 4 * floodReportEvery
)

// floodCounts is one group's deliveries and dead letters (with records
// archived without a letter) over some time.
type floodCounts struct {
	Deliveries int64 `json:"d"`
	Letters    int64 `json:"l"`
}

// floodSample is one broker's report for one group, as the controller
// received it.
type floodSample struct {
	at time.Time
	floodCounts
}

// floodReport is a broker's report to the controller.
type floodReport struct {
	Broker int32                  `json:"broker"`
	Groups map[string]floodCounts `json:"groups"`
}

// floodLoop registers the controller's handler and reports this broker's
// counts every floodReportEvery until stop closes.
func (w *dlqWriter) floodLoop(stop <-chan struct{}) {
	b := w.l.broker
	if b == nil {
		return
	}
	b.HandleControllerRequests(floodRequest, w.floodReceive)
	b.HandleControllerRequests(drainRequest, w.drainReceive)
	t := time.NewTicker(floodReportEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		w.floodSend()
	}
}

// floodSend reports the counts gathered since the last report; on
// failure they are kept for the next one, at most a window long.
func (w *dlqWriter) floodSend() {
	now := w.l.cfg.Now()
	w.mu.Lock()
	if len(w.floodPending) == 0 {
		w.mu.Unlock()
		return
	}
	if w.floodSince.IsZero() {
		w.floodSince = now
	}
	rep := floodReport{Broker: w.l.broker.NodeID(), Groups: w.floodPending}
	since := w.floodSince
	w.floodPending, w.floodSince = map[string]floodCounts{}, time.Time{}
	w.mu.Unlock()
	payload, err := json.Marshal(rep)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), dlqRequestTimeout)
		_, err = w.l.broker.AskController(ctx, floodRequest, payload)
		cancel()
	}
	if err == nil {
		return
	}
	w.warn("flood", "dead-letter flood guard: counts not reported to the controller; kept for the next report", "err", err)
	w.mu.Lock()
	defer w.mu.Unlock()
	for g, c := range rep.Groups {
		if now.Sub(since) >= w.l.settings(g).dlq.floodWindow {
			continue // older than any window
		}
		p := w.floodPending[g]
		p.Deliveries += c.Deliveries
		p.Letters += c.Letters
		w.floodPending[g] = p
	}
	if len(w.floodPending) > 0 && (w.floodSince.IsZero() || since.Before(w.floodSince)) {
		w.floodSince = since
	}
}

// floodReceive is the controller's handler of a broker's report: it adds
// the counts to each group's window and pauses the groups past the
// ratio.
func (w *dlqWriter) floodReceive(payload []byte) ([]byte, error) {
	var r floodReport
	if err := json.Unmarshal(payload, &r); err != nil {
		return nil, err
	}
	now := w.l.cfg.Now()
	var judge []string
	w.mu.Lock()
	for g, c := range r.Groups {
		ds := w.l.settings(g).dlq
		if ds.floodRatio <= 0 || ds.topic == "" || c.Deliveries < 0 || c.Letters < 0 {
			delete(w.floodHist, g)
			continue
		}
		w.floodHist[g] = append(w.floodHist[g], floodSample{at: now, floodCounts: c})
		if over, _ := w.floodOverLocked(g, now); over && !w.floodJudging[g] {
			w.floodJudging[g] = true
			judge = append(judge, g)
		}
	}
	// Forget what left every window (and groups no longer reported).
	for g := range w.floodHist {
		w.floodOverLocked(g, now)
	}
	w.mu.Unlock()
	for _, g := range judge {
		// The other brokers' counts of the same moments may still be on
		// their way (each reports every floodReportEvery): judge again
		// once they are in.
		time.AfterFunc(floodGrace, func() { w.floodJudge(g) })
	}
	return []byte("{}"), nil
}

// floodOverLocked drops group's samples that left its window and reports
// whether the rest are past the ratio, and their sum. w.mu held.
func (w *dlqWriter) floodOverLocked(group string, now time.Time) (bool, floodCounts) {
	ds := w.l.settings(group).dlq
	h := w.floodHist[group]
	i := 0
	for i < len(h) && now.Sub(h[i].at) >= ds.floodWindow {
		i++
	}
	if i == len(h) {
		delete(w.floodHist, group)
		return false, floodCounts{}
	}
	if i > 0 {
		h = append(h[:0], h[i:]...)
		w.floodHist[group] = h
	}
	var sum floodCounts
	for _, s := range h {
		sum.Deliveries += s.Deliveries
		sum.Letters += s.Letters
	}
	over := ds.floodRatio > 0 && sum.Deliveries >= ds.floodMin && float64(sum.Letters) >= ds.floodRatio*float64(sum.Deliveries)
	return over, sum
}

// floodJudge pauses group if its window is still past the ratio, with
// every broker's reports of the moment that put it there in.
func (w *dlqWriter) floodJudge(group string) {
	w.mu.Lock()
	delete(w.floodJudging, group)
	over, sum := w.floodOverLocked(group, w.l.cfg.Now())
	if over {
		delete(w.floodHist, group) // after the pause, a fresh window
	}
	w.mu.Unlock()
	if over {
		w.pause(group, sum.Deliveries, sum.Letters)
	}
}

// collectFlood exports the controller's windows: how close each group is
// to a pause, and which pauses wait for their grace.
func (w *dlqWriter) collectFlood(ch chan<- prometheus.Metric) {
	now := w.l.cfg.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for g := range w.floodHist {
		_, sum := w.floodOverLocked(g, now)
		ch <- prometheus.MustNewConstMetric(descFloodDeliv, prometheus.GaugeValue, float64(sum.Deliveries), g)
		ch <- prometheus.MustNewConstMetric(descFloodLetter, prometheus.GaugeValue, float64(sum.Letters), g)
	}
	for g := range w.floodJudging {
		ch <- prometheus.MustNewConstMetric(descFloodJudge, prometheus.GaugeValue, 1, g)
	}
}
