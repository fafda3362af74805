package protocol

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// DescribeQuorum: v0-2
//
// Behaviour (kafka-metadata-quorum describe --status / --replication):
//   - The one partition asked must be __cluster_metadata-0, else
//     UNKNOWN_TOPIC_OR_PARTITION at the top level, as Kafka's raft layer
//     answers.
//   - The metadata quorum as its leader (the controller) sees it
//     (replication.Broker.Quorum): leader, epoch (the raft term), high
//     watermark (the commit index), and per voter its log end offset (its
//     raft log's last index, asked over the replication listener),
//     LastFetchTimestamp (when the controller last heard from it) and
//     LastCaughtUpTimestamp (when it answered holding the commit index; -1
//     if not). Offsets are raft indexes, comparable among the replicas,
//     not with a Kafka cluster's. Observers: the quorum's non-voters.
//   - Any broker answers (Kafka's brokers forward to the controller; here
//     over the replication listener); with no controller reachable the
//     partition's error is NOT_LEADER_OR_FOLLOWER (retriable).
//
// Version notes:
//   - v1: LastFetchTimestamp, LastCaughtUpTimestamp; v2: ErrorMessage,
//     ReplicaDirectoryID (all zero: Strata has no directory IDs), Nodes
//     (each voter's replication listener, named CONTROLLER).
func init() {
	register(55, 0, 2, concurrent, (*Server).handleDescribeQuorum, needsCluster(acl.Describe))
}

// clusterMetadataTopic is the name Kafka's tools ask DescribeQuorum about.
const clusterMetadataTopic = "__cluster_metadata"

func (s *Server) handleDescribeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	if len(req.Topics) != 1 || req.Topics[0].Topic != clusterMetadataTopic ||
		len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != 0 {
		resp.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if req.Version >= 2 {
			msg := "DescribeQuorum describes " + clusterMetadataTopic + "-0 only"
			resp.ErrorMessage = &msg
		}
		return resp, nil
	}
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = clusterMetadataTopic
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	rp.Partition = 0
	qs, err := s.broker.Quorum(ctx)
	if err != nil {
		rp.ErrorCode, rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = kerr.NotLeaderForPartition.Code, -1, -1, -1
		if req.Version >= 2 {
			msg := err.Error()
			rp.ErrorMessage = &msg
		}
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil
	}
	rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = qs.LeaderID, qs.LeaderEpoch, qs.HighWatermark
	for _, v := range qs.Voters {
		rp.CurrentVoters = append(rp.CurrentVoters, quorumReplicaState(v.NodeID, v.LogEndOffset, v.LastFetch, v.LastCaughtUp))
		if req.Version >= 2 {
			n := kmsg.NewDescribeQuorumResponseNode()
			n.NodeID = v.NodeID
			if host, port, err := net.SplitHostPort(v.Addr); err == nil {
				if p, err := strconv.ParseUint(port, 10, 16); err == nil {
					l := kmsg.NewDescribeQuorumResponseNodeListener()
					l.Name, l.Host, l.Port = "CONTROLLER", host, uint16(p)
					n.Listeners = append(n.Listeners, l)
				}
			}
			resp.Nodes = append(resp.Nodes, n)
		}
	}
	for _, o := range qs.Observers {
		rp.Observers = append(rp.Observers, quorumReplicaState(o.NodeID, o.LogEndOffset, o.LastFetch, o.LastCaughtUp))
	}
	if rp.CurrentVoters == nil {
		rp.CurrentVoters = []kmsg.DescribeQuorumResponseTopicPartitionReplicaState{}
	}
	if rp.Observers == nil {
		rp.Observers = []kmsg.DescribeQuorumResponseTopicPartitionReplicaState{}
	}
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	return resp, nil
}

func quorumReplicaState(id int32, leo, fetch, caughtUp int64) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	st := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
	st.ReplicaID, st.LogEndOffset, st.LastFetchTimestamp, st.LastCaughtUpTimestamp = id, leo, fetch, caughtUp
	return st
}
