package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// WriteTxnMarkers: v0-1
//
// Behaviour: what a transaction coordinator on another broker sends to a
// partition's leader: each marker is written as a control batch through
// Broker.Produce on the partition (txncoord.Coordinator.WriteMarkerLocal;
// a marker on __consumer_offsets also completes the group coordinator's
// pending transactional offsets). Per partition: NOT_LEADER_OR_FOLLOWER,
// UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR, and
// TRANSACTION_COORDINATOR_FENCED for a marker whose CoordinatorEpoch is
// older than that of the producer's last marker on the partition (a
// deposed coordinator's; the log refuses it, as Kafka's does).
//
// With ACLs on it needs CLUSTER_ACTION on the cluster, as in Kafka
// (acl_rules.go): the brokers' own clients are super users.
//
// Version notes: v1 flexible.
func init() {
	register(27, 0, 1, barrier, (*Server).handleWriteTxnMarkers,
		needsClusterElse(acl.ClusterAction, writeTxnMarkersDenied))
}

// maxMarkerPartitions bounds the markers of one request.
const maxMarkerPartitions = 100000

func (s *Server) handleWriteTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	n := 0
	for _, m := range req.Markers {
		rm := kmsg.WriteTxnMarkersResponseMarker{ProducerID: m.ProducerID}
		for _, t := range m.Topics {
			rt := kmsg.WriteTxnMarkersResponseMarkerTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				n++
				code := int16(0)
				if n > maxMarkerPartitions {
					code = kerr.InvalidRequest.Code
				} else if err := s.txns.WriteMarkerLocal(ctx, t.Topic, p, m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch); err != nil {
					code = errCode(err)
				}
				rt.Partitions = append(rt.Partitions, kmsg.WriteTxnMarkersResponseMarkerTopicPartition{Partition: p, ErrorCode: code})
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp, nil
}

func writeTxnMarkersDenied(r *kmsg.WriteTxnMarkersRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range r.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition, sp.ErrorCode = p, errClusterAuth
				st.Partitions = append(st.Partitions, sp)
			}
			rm.Topics = append(rm.Topics, st)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}
