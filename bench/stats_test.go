package bench

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

func TestHistogramPercentilesWithinBucketError(t *testing.T) {
	var h Histogram
	r := rand.New(rand.NewPCG(1, 2))
	var xs []time.Duration
	for i := 0; i < 100000; i++ {
		// log-uniform from 1 µs to 1 s, the range latencies live in
		d := time.Duration(math.Exp(r.Float64()*math.Log(1e6)) * 1e3)
		xs = append(xs, d)
		h.Record(d)
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
	for _, p := range []float64{1, 50, 90, 95, 99, 99.9, 100} {
		rank := int(math.Ceil(p/100*float64(len(xs)))) - 1
		want := float64(xs[rank])
		got := float64(h.Percentile(p))
		if math.Abs(got-want)/want > 1.0/subCount {
			t.Errorf("p%v = %v, exact %v: more than %.1f%% off", p, time.Duration(got), time.Duration(want), 100.0/subCount)
		}
	}
	if h.Max() != xs[len(xs)-1] || h.Min() != xs[0] {
		t.Errorf("max %v min %v, want %v %v", h.Max(), h.Min(), xs[len(xs)-1], xs[0])
	}
	if h.Count() != uint64(len(xs)) {
		t.Errorf("count %d", h.Count())
	}
}

func TestHistogramSmallValuesExactAndEdges(t *testing.T) {
	var h Histogram
	if h.Percentile(50) != 0 || h.Mean() != 0 || h.Min() != 0 {
		t.Fatal("empty histogram should read 0")
	}
	for _, v := range []time.Duration{1, 2, 3, 4, -5} {
		h.Record(v)
	}
	if got := h.Percentile(50); got != 2 {
		t.Errorf("p50 of 0,1,2,3,4 = %v, want 2", got)
	}
	if got := h.Percentile(100); got != 4 {
		t.Errorf("p100 = %v, want 4", got)
	}
	if got := h.Percentile(0); got != 0 {
		t.Errorf("p0 = %v, want 0 (negatives count as 0)", got)
	}
	if got := h.Mean(); got != 2 {
		t.Errorf("mean = %v, want 2", got)
	}
	// Every bucket's value lies in the bucket.
	for _, v := range []int64{63, 64, 65, 127, 128, 129, 1000, 1 << 40, math.MaxInt64} {
		i := bucketOf(v)
		if i >= histBuckets {
			t.Fatalf("bucket %d of %d out of range", i, v)
		}
		if bucketOf(bucketValue(i)) != i {
			t.Errorf("value %d: bucket %d, its middle %d falls in bucket %d", v, i, bucketValue(i), bucketOf(bucketValue(i)))
		}
	}
}

func TestMedianAndRatio(t *testing.T) {
	cases := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, c := range cases {
		in := append([]float64(nil), c.xs...)
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
		for i := range in {
			if in[i] != c.xs[i] {
				t.Fatalf("Median changed its input")
			}
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) should be NaN")
	}
	if got := Ratio(300, 200); got != 1.5 {
		t.Errorf("Ratio = %v", got)
	}
	if !math.IsNaN(Ratio(1, 0)) || !math.IsNaN(Ratio(math.NaN(), 1)) || !math.IsNaN(Ratio(1, math.NaN())) {
		t.Error("Ratio to zero or NaN should be NaN")
	}
}

func TestSummarizeMediansAndRatios(t *testing.T) {
	wr := WorkloadReport{Figures: []string{FigMBps, FigBrokerCPU}}
	mk := func(mbps ...float64) []Sample {
		var s []Sample
		for _, v := range mbps {
			s = append(s, Sample{Figures: map[string]float64{FigMBps: v}})
		}
		return s
	}
	wr.Brokers = []BrokerReport{
		{Name: "a", Samples: mk(100, 300, 200)},
		{Name: "b", Samples: append(mk(50, 150), Sample{Err: "boom", Figures: map[string]float64{FigMBps: 1e9}})},
	}
	wr.Brokers[1].Samples[0].Figures[FigBrokerCPU] = 2
	summarize(&wr)
	if m := wr.Brokers[0].Median[FigMBps]; m != 200 {
		t.Errorf("a median %v", m)
	}
	if m := wr.Brokers[1].Median[FigMBps]; m != 100 {
		t.Errorf("b median %v (a failed sample must not count)", m)
	}
	if r := wr.Brokers[1].Ratio[FigMBps]; r != 0.5 {
		t.Errorf("b ratio %v", r)
	}
	if _, ok := wr.Brokers[1].Ratio[FigBrokerCPU]; ok {
		t.Error("no ratio where the first broker has no figure")
	}
	if r := wr.Brokers[0].Ratio[FigMBps]; r != 1 {
		t.Errorf("first broker's ratio %v", r)
	}
}
