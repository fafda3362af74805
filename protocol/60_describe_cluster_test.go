package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDescribeCluster(t *testing.T) {
	c := newCluster(t, nil)
	rc := dialRaw(t, c.addr)
	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = v
		r := rc.roundTrip(req).(*kmsg.DescribeClusterResponse)
		if r.ErrorCode != 0 || r.ClusterID != c.b.ClusterID() || r.ControllerID != 1 || len(r.Brokers) != 1 || r.Brokers[0].Host != "127.0.0.1" {
			t.Fatalf("v%d: %+v", v, r)
		}
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version = 1
	req.EndpointType = 2
	if r := rc.roundTrip(req).(*kmsg.DescribeClusterResponse); r.ErrorCode != kerr.MismatchedEndpointType.Code {
		t.Fatalf("controllers: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	req.EndpointType = 9
	if r := rc.roundTrip(req).(*kmsg.DescribeClusterResponse); r.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Fatalf("unknown endpoint type: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// kadm uses it for BrokerMetadata.
	md, err := c.admin().BrokerMetadata(testCtx(t))
	if err != nil || md.Cluster != c.b.ClusterID() {
		t.Fatalf("kadm: %v %+v", err, md)
	}
}
