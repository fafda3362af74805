package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// TestClientQuotasCluster: client quotas are replicated metadata, so
// every broker enforces them alike. Three brokers; quotas set through
// broker 1 are listed by every broker, a request_percentage quota set
// there throttles a client on each broker (throttle_time_ms > 0 from all
// three), and broker 2, SIGKILLed and restarted, still has them. Not in
// -short.
func TestClientQuotasCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three brokers: not in -short")
	}
	c := startChaosCluster(t, 3, 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	busy, anon := "busy", "ANONYMOUS"
	res, err := kadm.NewClient(c.direct(c.node(1))).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &anon}, {Type: "client-id", Name: &busy}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 0.001}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: nil}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 10485760}}},
	})
	if err != nil || len(res) != 2 || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("AlterClientQuotas through broker 1: %v %+v", err, res)
	}
	listed := func(id int32) int {
		d, err := kadm.NewClient(c.direct(c.node(id))).DescribeClientQuotas(ctx, false, nil)
		if err != nil {
			return -1
		}
		return len(d)
	}
	for id := int32(1); id <= 3; id++ {
		testwait.For(t, 30*time.Second, func() bool { return listed(id) == 2 }, "broker %d does not list the quotas", id)
	}
	// Each broker throttles the busy client: it is given a throttle time
	// within a few hundred metadata requests.
	cl := c.client(kgo.ClientID("busy"))
	for id := int32(1); id <= 3; id++ {
		var th int32
		testwait.For(t, time.Minute, func() bool {
			req := kmsg.NewPtrMetadataRequest()
			resp, err := cl.Broker(int(id)).Request(ctx, req)
			if err != nil {
				return false
			}
			th = resp.(*kmsg.MetadataResponse).ThrottleMillis
			return th > 0
		}, "broker %d never throttled the busy client", id)
		t.Logf("broker %d: throttle_time_ms %d", id, th)
	}
	// A broker SIGKILLed and restarted rebuilds the quotas from its own
	// metadata log and snapshots.
	n := c.node(2)
	n.kill()
	n.start()
	n.waitReady(time.Minute)
	c.mu.Lock()
	if d := c.directs[2]; d != nil {
		d.Close()
		delete(c.directs, 2)
	}
	c.mu.Unlock()
	testwait.For(t, 30*time.Second, func() bool { return listed(2) == 2 }, "broker 2 lost the quotas in its restart")
}
