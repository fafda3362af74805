package protocol

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/replication"
)

// ElectLeaders: v0-2
//
// Behaviour (as Kafka's KRaft controller, ReplicationControlManager):
//   - ElectionType 0 (preferred; always so in v0) makes each partition's
//     first replica its leader; ELECTION_NOT_NEEDED when it already leads
//     (always so with one replica, the single-node default). Type 1
//     (unclean) elects a leader for a leaderless partition;
//     ELECTION_NOT_NEEDED when it has one. Broker.ElectLeader decides from
//     the replicated metadata image, so any broker answers (Kafka's
//     brokers forward to the controller).
//   - A named partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION.
//   - Topics null: every partition of every topic, where, as Kafka,
//     partitions whose election is not needed are left out of the answer
//     (each topic is still listed).
//   - An ElectionType other than 0 or 1: INVALID_REQUEST, at the top level
//     (v1+) and for every named partition, as Kafka's error response.
//   - The election is decided before answering, so TimeoutMillis is not
//     needed.
//
// Version notes:
//   - v1: ElectionType, top-level ErrorCode; v2: flexible.
//
// A preferred election runs a raft leadership transfer from the current
// leader to the first replica (Broker.ElectLeader), and answers once it
// is done or failed (PREFERRED_LEADER_NOT_AVAILABLE with why: the replica
// is not in the ISR, or did not catch up in time). Unclean elections do
// not exist with Raft: a leaderless partition elects a leader as soon as a
// majority of its replicas are up, never one that lacks committed data;
// until then ELIGIBLE_LEADERS_NOT_AVAILABLE.
func init() {
	register(43, 0, 2, barrier, (*Server).handleElectLeaders,
		needsClusterElse(acl.Alter, electLeadersDenied))
}

func (s *Server) handleElectLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	typ := replication.ElectPreferred
	if req.Version >= 1 {
		typ = replication.ElectionType(req.ElectionType)
	}
	if typ != replication.ElectPreferred && typ != replication.ElectUnclean {
		s.log.Debug("elect leaders: unknown election type", "type", req.ElectionType)
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	result := func(partition int32, err error) kmsg.ElectLeadersResponseTopicPartition {
		sp := kmsg.NewElectLeadersResponseTopicPartition()
		sp.Partition = partition
		if resp.ErrorCode != 0 {
			sp.ErrorCode = resp.ErrorCode
			msg := "unknown election type"
			sp.ErrorMessage = &msg
			return sp
		}
		sp.ErrorCode = errCode(err)
		sp.ErrorMessage = errMessage(err)
		return sp
	}
	if req.Topics == nil {
		if resp.ErrorCode != 0 {
			return resp, nil
		}
		for _, t := range s.broker.Topics() {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = t.Name
			for _, pi := range t.Partitions {
				err := s.broker.ElectLeader(ctx, t.Name, pi.Partition, typ)
				if errors.Is(err, replication.ErrElectionNotNeeded) {
					continue
				}
				st.Partitions = append(st.Partitions, result(pi.Partition, err))
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil
	}
	resp.Topics = make([]kmsg.ElectLeadersResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewElectLeadersResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ElectLeadersResponseTopicPartition, len(rt.Partitions))
		for j, p := range rt.Partitions {
			var err error
			if resp.ErrorCode == 0 {
				err = s.broker.ElectLeader(ctx, rt.Topic, p, typ)
			}
			st.Partitions[j] = result(p, err)
		}
	}
	return resp, nil
}

func electLeadersDenied(r *kmsg.ElectLeadersRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = errClusterAuth
	for _, t := range r.Topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, errClusterAuth
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
