package protocol

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/replication"
)

// Leader discovery (KIP-951): a Produce (v10+) or Fetch (v16+) partition
// answered NOT_LEADER_OR_FOLLOWER (Fetch: also FENCED_LEADER_EPOCH) names
// the leader and epoch this broker's metadata holds (CurrentLeader), and
// the response carries those leaders' endpoints (NodeEndpoints), so that a
// client moves the partition at once instead of first refreshing its
// metadata -- from a broker that may not know the new leader yet. A
// partition whose leader is unknown here, not elected yet, or this broker
// gets no hint (the client refreshes its metadata as before).

// leaderHint returns the leader and epoch of t's partition when they are
// worth naming to a client this broker turned away.
func (s *Server) leaderHint(t replication.TopicInfo, partition int32) (leader, epoch int32, ok bool) {
	pi, found := partitionInfo(t, partition)
	if !found || pi.Leader < 0 || pi.LeaderEpoch <= 0 || pi.Leader == s.broker.NodeID() {
		return -1, -1, false
	}
	return pi.Leader, pi.LeaderEpoch, true
}

// hintedBrokers returns the endpoints of the brokers in ids, in node order
// (nothing, without reading the broker list, when ids is empty).
func (s *Server) hintedBrokers(ids map[int32]bool) []replication.BrokerInfo {
	if len(ids) == 0 {
		return nil
	}
	var out []replication.BrokerInfo
	for _, bi := range s.broker.Brokers() {
		if ids[bi.NodeID] {
			out = append(out, bi)
		}
	}
	return out
}

// addProduceLeaderHints fills CurrentLeader of every NOT_LEADER_OR_FOLLOWER
// partition of resp (v10+) and the response's NodeEndpoints. A response
// without such a partition costs one pass over its partitions.
func (s *Server) addProduceLeaderHints(resp *kmsg.ProduceResponse) {
	if resp.Version < 10 {
		return
	}
	var ids map[int32]bool
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		var t replication.TopicInfo
		known := false
		for j := range rt.Partitions {
			sp := &rt.Partitions[j]
			if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			if !known {
				if rt.Topic != "" {
					t, known = s.broker.Topic(rt.Topic)
				} else {
					t, known = s.broker.TopicByID(rt.TopicID) // v13+
				}
				if !known {
					break
				}
			}
			if leader, epoch, ok := s.leaderHint(t, sp.Partition); ok {
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
				ids = addHinted(ids, leader)
			}
		}
	}
	for _, bi := range s.hintedBrokers(ids) {
		nb := kmsg.NewProduceResponseBroker()
		nb.NodeID, nb.Host, nb.Port, nb.Rack = bi.NodeID, bi.Host, bi.Port, nullableString(bi.Rack)
		resp.Brokers = append(resp.Brokers, nb)
	}
}

// addHinted adds leader to ids, allocated on first use: most requests
// name no leader.
func addHinted(ids map[int32]bool, leader int32) map[int32]bool {
	if ids == nil {
		ids = map[int32]bool{}
	}
	ids[leader] = true
	return ids
}

// fetchLeaderHint fills sp's CurrentLeader (v16+) when code turned the
// partition away for leadership, and records the leader in *ids.
func (s *Server) fetchLeaderHint(version int16, code int16, t replication.TopicInfo, sp *kmsg.FetchResponseTopicPartition, ids *map[int32]bool) {
	if version < 16 || (code != kerr.NotLeaderForPartition.Code && code != kerr.FencedLeaderEpoch.Code) {
		return
	}
	if leader, epoch, ok := s.leaderHint(t, sp.Partition); ok {
		sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
		*ids = addHinted(*ids, leader)
	}
}

// addFetchNodeEndpoints sets resp's NodeEndpoints to the brokers in ids.
func (s *Server) addFetchNodeEndpoints(resp *kmsg.FetchResponse, ids map[int32]bool) {
	for _, bi := range s.hintedBrokers(ids) {
		nb := kmsg.NewFetchResponseBroker()
		nb.NodeID, nb.Host, nb.Port, nb.Rack = bi.NodeID, bi.Host, bi.Port, nullableString(bi.Rack)
		resp.Brokers = append(resp.Brokers, nb)
	}
}
