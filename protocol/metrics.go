package protocol

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every series the Kafka listener exports, in one place. Names follow
// Kafka's JMX beans as the Prometheus JMX exporter spells them where
// Kafka has one:
//
//	kafka_network_requests_total{request,version}         kafka.network:type=RequestMetrics,name=RequestsPerSec
//	kafka_network_errors_total{request,error}             kafka.network:type=RequestMetrics,name=ErrorsPerSec
//	kafka_network_request_total_time_seconds{request}     kafka.network:type=RequestMetrics,name=TotalTimeMs (read to written)
//	kafka_network_incoming_byte_total                     kafka.server:type=socket-server-metrics,incoming-byte-total
//	kafka_network_outgoing_byte_total                     kafka.server:type=socket-server-metrics,outgoing-byte-total
//	kafka_network_connection_count                        kafka.server:type=socket-server-metrics,connection-count
//	kafka_server_quota_throttle_time_seconds{quota_type}  kafka.server:type={Produce,Fetch,Request,ControllerMutation} throttle-time (quotas.go)
//
// Label values are bounded: request is one of the registered API names,
// version one of its supported versions (or "unsupported"), error one of
// Kafka's error code names.
//
// Cost on the request path: one counter add when a request is decoded, one
// histogram observe and one byte-counter add when its response is written,
// all on precomputed series (no label lookup); error codes are found by
// walking the response's partitions (no allocation unless one is non-zero).
type metrics struct {
	reqs    [256]keyMetrics // by API key, filled for registered keys
	errors  *prometheus.CounterVec
	bytesIn prometheus.Counter
	bytesOt prometheus.Counter
	// topics counts records and bytes in and out per topic
	// (topic_metrics.go).
	topics topicCounters
}

type keyMetrics struct {
	name        string
	min         int16
	versions    []prometheus.Counter // index version-min
	unsupported prometheus.Counter   // ApiVersions above our maximum
	latency     prometheus.Observer
}

// latencyBuckets span 100µs (a cached metadata answer) to 30s (a long
// poll or a rebalance).
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// newMetrics builds the listener's series and registers them on reg (nil:
// kept but not exported, as in tests). connCount reads the open
// connections at scrape time.
func newMetrics(reg prometheus.Registerer, connCount func() float64) *metrics {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafka_network_requests_total",
		Help: "Requests decoded, by API and version.",
	}, []string{"request", "version"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafka_network_errors_total",
		Help: "Non-zero error codes in responses (per partition where the response has partitions), by API and Kafka error name; connection-closing errors count as CONNECTION_CLOSED.",
	}, []string{"request", "error"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kafka_network_request_total_time_seconds",
		Help:    "Time from a request being read to its response being written, by API.",
		Buckets: latencyBuckets,
	}, []string{"request"})
	m := &metrics{
		errors: errs,
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_network_incoming_byte_total",
			Help: "Request bytes read from clients (frames, size prefix included).",
		}),
		bytesOt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_network_outgoing_byte_total",
			Help: "Response bytes written to clients (frames, size prefix included).",
		}),
	}
	for k := range apis {
		r := apis[k]
		if !r.ok {
			continue
		}
		name := kmsg.NameForKey(int16(k))
		km := keyMetrics{name: name, min: r.min, latency: latency.WithLabelValues(name)}
		for v := r.min; v <= r.max; v++ {
			km.versions = append(km.versions, requests.WithLabelValues(name, strconv.Itoa(int(v))))
		}
		km.unsupported = requests.WithLabelValues(name, "unsupported")
		m.reqs[k] = km
	}
	if reg != nil {
		reg.MustRegister(requests, errs, latency, m.bytesIn, m.bytesOt,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "kafka_network_connection_count",
				Help: "Open client connections.",
			}, connCount),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "strata_fetch_sendfile_bytes_total",
				Help: "Fetch record bytes sent from segment files with sendfile (the rest are copied).",
			}, func() float64 { return float64(sentByFile.Load()) }))
	}
	return m
}

// request counts one decoded request (key is registered: dispatchFrame
// checked).
func (m *metrics) request(key, version int16) {
	km := &m.reqs[key]
	if i := int(version) - int(km.min); i >= 0 && i < len(km.versions) {
		km.versions[i].Inc()
		return
	}
	km.unsupported.Inc()
}

// written records one response written (or, for acks=0, dropped).
func (m *metrics) written(key int16, start time.Time, n int) {
	if n > 0 {
		m.bytesOt.Add(float64(n))
	}
	if key >= 0 && int(key) < len(m.reqs) && m.reqs[key].latency != nil && !start.IsZero() {
		m.reqs[key].latency.Observe(time.Since(start).Seconds())
	}
}

// connClosedError is the error label of a request that closed its
// connection instead of being answered.
const connClosedError = "CONNECTION_CLOSED"

func (m *metrics) errorCode(key int16, code int16) {
	if code == 0 {
		return
	}
	name := "UNKNOWN_SERVER_ERROR"
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		name = e.Message
	}
	m.errorNamed(key, name)
}

func (m *metrics) errorNamed(key int16, name string) {
	req := "unknown"
	if key >= 0 && int(key) < len(m.reqs) && m.reqs[key].name != "" {
		req = m.reqs[key].name
	}
	m.errors.WithLabelValues(req, name).Inc()
}

// countErrors counts the error codes of a response: per partition for the
// data-path APIs, the top-level code for the coordinator APIs that carry
// one. Other responses are not walked (their errors are rare and logged).
func (m *metrics) countErrors(key int16, resp kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				m.errorCode(key, r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.FetchResponse:
		m.errorCode(key, r.ErrorCode)
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				m.errorCode(key, r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.ListOffsetsResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				m.errorCode(key, r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.OffsetCommitResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				m.errorCode(key, r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.FindCoordinatorResponse:
		m.errorCode(key, r.ErrorCode)
		for i := range r.Coordinators {
			m.errorCode(key, r.Coordinators[i].ErrorCode)
		}
	case *kmsg.JoinGroupResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.SyncGroupResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.HeartbeatResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.LeaveGroupResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.InitProducerIDResponse:
		m.errorCode(key, r.ErrorCode)
	case *kmsg.ConsumerGroupHeartbeatResponse:
		m.errorCode(key, r.ErrorCode)
	}
}
