package protocol

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/replication"
)

// Requests are counted by API and version, partition errors by Kafka
// name, request bytes as they are read; everything lands on the
// registerer given in Config.
func TestMetricsCountRequestsAndErrors(t *testing.T) {
	b := testBroker(t, nil)
	if _, err := b.CreateTopic(context.Background(), replication.CreateTopicRequest{Name: "m", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	s, addr := startServer(t, Config{Registerer: reg}, b)
	rc := dialRaw(t, addr)
	if sp := producePart(t, rc.roundTrip(produceReq(9, -1, "m", 0, makeBatch(batchOpts{}, values(3, "v")...)))); sp.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp := producePart(t, rc.roundTrip(produceReq(9, -1, "m", 7, makeBatch(batchOpts{}, values(1, "v")...)))); sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("produce to partition 7: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	if got := testutil.ToFloat64(s.metrics.reqs[0].versions[9-s.metrics.reqs[0].min]); got != 2 {
		t.Errorf("Produce v9 requests = %v, want 2", got)
	}
	if got := testutil.ToFloat64(s.metrics.errors.WithLabelValues("Produce", "UNKNOWN_TOPIC_OR_PARTITION")); got != 1 {
		t.Errorf("Produce UNKNOWN_TOPIC_OR_PARTITION errors = %v, want 1", got)
	}
	if got := testutil.ToFloat64(s.metrics.bytesIn); got <= 0 {
		t.Errorf("bytes in = %v", got)
	}
	if n, err := testutil.GatherAndCount(reg, "kafka_network_requests_total", "kafka_network_connection_count"); err != nil || n < 2 {
		t.Errorf("gathered %d series, %v", n, err)
	}
}
