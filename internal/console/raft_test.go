package console

import (
	"math"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// hist builds a histogram of seconds with the given bucket bounds and
// cumulative counts.
func hist(sum float64, bounds []float64, cum []uint64) *dto.Histogram {
	h := &dto.Histogram{SampleCount: proto.Uint64(cum[len(cum)-1]), SampleSum: proto.Float64(sum)}
	for i, b := range bounds {
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(b), CumulativeCount: proto.Uint64(cum[i])})
	}
	return h
}

// TestLatencyQuantiles: p50 and p99 interpolate within the bucket that
// holds the rank (as histogram_quantile), past the last bound they are
// its lower edge, and a difference of two readings summarises only the
// observations between them.
func TestLatencyQuantiles(t *testing.T) {
	bounds := []float64{0.001, 0.01, 0.1, math.Inf(1)}
	// 100 observations: 50 under 1 ms, 40 in 1-10 ms, 9 in 10-100 ms, 1 above.
	h := hist(0.5, bounds, []uint64{50, 90, 99, 100})
	l := latency(h, nil)
	if l.Count != 100 || *l.Mean != 5 || *l.P50 != 1 || *l.P99 != 100 {
		t.Fatalf("latency %+v: mean %v p50 %v p99 %v", l, *l.Mean, *l.P50, *l.P99)
	}
	// Since an earlier reading of 50 all under 1 ms: the 50 new ones are
	// 40 in 1-10 ms (p50 at 1 + 9*25/40 ms) and 10 slower.
	prev := hist(0.02, bounds, []uint64{50, 50, 50, 50})
	l = latency(h, prev)
	if l.Count != 50 || math.Abs(*l.P50-6.625) > 1e-9 || *l.P99 != 100 || math.Abs(*l.Mean-9.6) > 1e-9 {
		t.Fatalf("latency since prev %+v: p50 %v p99 %v mean %v", l, *l.P50, *l.P99, *l.Mean)
	}
	// Every observation above the last finite bound: its lower edge.
	if l := latency(hist(5, bounds, []uint64{0, 0, 0, 2}), nil); *l.P50 != 100 || *l.P99 != 100 {
		t.Fatalf("beyond the buckets: %+v", l)
	}
	if l := latency(hist(0, bounds, []uint64{0, 0, 0, 0}), nil); l.Count != 0 || l.P50 != nil || l.Mean != nil {
		t.Fatalf("empty: %+v", l)
	}
	// A counter reset (the broker restarted): since start, not negative.
	if l := latency(prev, h); l.Count != 50 {
		t.Fatalf("after a reset: %+v", l)
	}
}

// TestRaftRecent: the recent figures appear once a reading is at least
// readingEvery old, compare with the newest reading at least a minute old
// after that, and readings are kept at most readingsKept, one per
// readingEvery.
func TestRaftRecent(t *testing.T) {
	var r raftState
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s int, elections float64) raftReading {
		return raftReading{at: t0.Add(time.Duration(s) * time.Second), elections: map[string]float64{"partition": elections, "metadata": 1},
			leaderChanges: map[string]float64{"partition": elections}}
	}
	if rc := r.recent(at(0, 3)); rc != nil {
		t.Fatalf("one reading: %+v", rc)
	}
	if rc := r.recent(at(5, 4)); rc != nil || len(r.readings) != 1 {
		t.Fatalf("5 s later: %+v, %d readings", rc, len(r.readings))
	}
	rc := r.recent(at(10, 5))
	if rc == nil || rc.Seconds != 10 || rc.Elections["partition"] != 2 || rc.Elections["metadata"] != 0 || rc.LeaderChanges["partition"] != 2 {
		t.Fatalf("10 s later: %+v", rc)
	}
	for s := 20; s <= 200; s += 10 {
		rc = r.recent(at(s, float64(s)))
	}
	if len(r.readings) != readingsKept {
		t.Fatalf("%d readings kept, want %d", len(r.readings), readingsKept)
	}
	// At 200 s the newest reading at least 60 s old is at 140 s.
	if rc.Seconds != 60 || rc.Elections["partition"] != 60 {
		t.Fatalf("at 200 s: %+v", rc)
	}
}
