package transport

import (
	"sync/atomic"
	"time"
)

// LatencyHist is a fixed-bucket histogram of durations, safe for
// concurrent use and cheap enough for every heartbeat (atomic adds); the
// broker's collector exports it (replication's metrics.go, which also
// times commits with it). The transport keeps its own
// type rather than a Prometheus one, so it stays free of the metrics
// library.
type LatencyHist struct {
	counts [len(latencyBounds) + 1]atomic.Uint64 // the last is +Inf
	sumNs  atomic.Int64
}

// latencyBounds are the buckets' upper bounds: around raft's heartbeat
// interval (0.4-0.8 s for partition leaders), coalescing (50 ms) and the
// follower timeout (2-4 s).
var latencyBounds = [...]time.Duration{
	time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2 * time.Second, 4 * time.Second, 8 * time.Second,
}

// Observe counts one duration.
func (h *LatencyHist) Observe(d time.Duration) {
	i := 0
	for i < len(latencyBounds) && d > latencyBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

// Snapshot returns the cumulative counts per bound (seconds), the total
// count and the sum in seconds, as prometheus.MustNewConstHistogram takes
// them.
func (h *LatencyHist) Snapshot() (buckets map[float64]uint64, count uint64, sum float64) {
	buckets = make(map[float64]uint64, len(latencyBounds))
	for i, b := range latencyBounds {
		count += h.counts[i].Load()
		buckets[b.Seconds()] = count
	}
	count += h.counts[len(latencyBounds)].Load()
	return buckets, count, time.Duration(h.sumNs.Load()).Seconds()
}
