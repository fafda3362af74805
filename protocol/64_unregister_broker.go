package protocol

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/replication"
)

// UnregisterBroker: v0
//
// Behaviour (kafka-cluster unregister --id N; Admin.unregisterBroker):
//   - Removes broker N's registration from the replicated metadata
//     (replication.Broker.UnregisterBroker, through the controller):
//     Metadata and DescribeCluster stop listing it, no new partition is
//     placed on it, and any replica it still holds is reported offline
//     (reassign its partitions away first). A broker registers itself again
//     when it starts.
//   - A broker that is not registered: BROKER_ID_NOT_REGISTERED.
//   - Any broker answers (Kafka's brokers forward to the controller).
func init() { register(64, 0, 0, barrier, (*Server).handleUnregisterBroker, needsCluster(acl.Alter)) }

func (s *Server) handleUnregisterBroker(ctx context.Context, req *kmsg.UnregisterBrokerRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	err := s.broker.UnregisterBroker(ctx, req.BrokerID)
	if err == nil {
		return resp, nil
	}
	msg := err.Error()
	resp.ErrorMessage = &msg
	if errors.Is(err, replication.ErrBrokerNotRegistered) {
		resp.ErrorCode = kerr.BrokerIDNotRegistered.Code
	} else {
		resp.ErrorCode = errCode(err)
	}
	return resp, nil
}
