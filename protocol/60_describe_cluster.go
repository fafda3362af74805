package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: v0-2
//
// Behaviour:
//   - Cluster ID, controller ID and the registered brokers (host, port, rack).
//   - EndpointType (v1+): 1 (brokers) is answered; 2 (controllers) gets
//     MISMATCHED_ENDPOINT_TYPE, what a Kafka broker listener answers (KIP-919:
//     controllers are asked on the controller listener); anything else gets
//     UNSUPPORTED_ENDPOINT_TYPE.
//   - Brokers the controller fenced (not heard from for
//     broker.session.timeout.ms; replication/metadata_fencing.go) are left out, or,
//     with IncludeFencedBrokers (v2+), listed with IsFenced true.
//   - Cluster authorized operations, when asked for: those the principal
//     may perform (acl_rules.go; every one with ACLs off).
//
// Version notes:
// * v1: EndpointType; v2: IncludeFencedBrokers / IsFenced
func init() { register(60, 0, 2, concurrent, (*Server).handleDescribeCluster, fillsOps) }

func (s *Server) handleDescribeCluster(ctx context.Context, req *kmsg.DescribeClusterRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ClusterAuthorizedOperations = authorizedOpsNotRequested
	resp.EndpointType = 1
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.EndpointType = req.EndpointType
		code, msg := kerr.UnsupportedEndpointType.Code, "unsupported endpoint type"
		if req.EndpointType == 2 {
			code, msg = kerr.MismatchedEndpointType.Code, "the request was sent to a broker listener; controllers are not listed here"
		}
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp, nil
	}
	b := s.broker
	resp.ClusterID = b.ClusterID()
	resp.ControllerID = b.ControllerID()
	for _, bi := range b.Brokers() {
		if bi.Fenced && (req.Version < 2 || !req.IncludeFencedBrokers) {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = bi.NodeID, bi.Host, bi.Port, nullableString(bi.Rack)
		rb.IsFenced = bi.Fenced
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp, nil
}
