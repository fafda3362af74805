package console

import (
	"time"

	dto "github.com/prometheus/client_model/go"
)

// sample is one series of a gathered metric.
type sample struct {
	labels map[string]string
	value  float64
	hist   *dto.Histogram // a histogram's buckets (nil for other types)
}

// gather returns the broker's metrics by name, walking the registry at
// most once per gatherTTL (a scrape costs a walk of every partition).
func (c *Console) gather() map[string][]sample {
	if c.opts.Gatherer == nil {
		return nil
	}
	c.gatherMu.Lock()
	defer c.gatherMu.Unlock()
	if c.gatherOut != nil && time.Since(c.gathered) < gatherTTL {
		return c.gatherOut
	}
	mfs, err := c.opts.Gatherer.Gather()
	out := map[string][]sample{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			s.value = metricValue(mf.GetType(), m)
			if mf.GetType() == dto.MetricType_HISTOGRAM {
				s.hist = m.GetHistogram()
			}
			out[mf.GetName()] = append(out[mf.GetName()], s)
		}
	}
	if err != nil && len(out) == 0 {
		return nil
	}
	c.gatherOut, c.gathered = out, time.Now()
	return out
}

func metricValue(t dto.MetricType, m *dto.Metric) float64 {
	switch t {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_UNTYPED:
		return m.GetUntyped().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	case dto.MetricType_SUMMARY:
		return float64(m.GetSummary().GetSampleCount())
	}
	return 0
}
