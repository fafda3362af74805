package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeQuorum on one broker (the only voter, so the controller):
// every version describes __cluster_metadata-0 with this broker as leader
// and sole voter, caught up; anything else is UNKNOWN_TOPIC_OR_PARTITION.
// Three brokers, forwarding and kafka-metadata-quorum: internal/e2e
// TestMetadataQuorumTool.
func TestDescribeQuorum(t *testing.T) {
	c := newCluster(t, nil)
	rc := dialRaw(t, c.addr)
	ask := func(v int16, topic string, partition int32) *kmsg.DescribeQuorumResponse {
		req := kmsg.NewPtrDescribeQuorumRequest()
		req.Version = v
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewDescribeQuorumRequestTopicPartition()
		rp.Partition = partition
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rc.roundTrip(req).(*kmsg.DescribeQuorumResponse)
	}
	for v := int16(0); v <= 2; v++ {
		r := ask(v, "__cluster_metadata", 0)
		if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: %+v", v, r)
		}
		p := r.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch < 1 || p.HighWatermark < 1 || len(p.CurrentVoters) != 1 || len(p.Observers) != 0 {
			t.Fatalf("v%d: partition %+v", v, p)
		}
		st := p.CurrentVoters[0]
		if st.ReplicaID != 1 || st.LogEndOffset < p.HighWatermark {
			t.Fatalf("v%d: voter %+v, high watermark %d", v, st, p.HighWatermark)
		}
		if v >= 1 && (st.LastFetchTimestamp <= 0 || st.LastCaughtUpTimestamp <= 0) {
			t.Fatalf("v%d: voter timestamps %+v", v, st)
		}
		if v >= 2 && (len(r.Nodes) != 1 || r.Nodes[0].NodeID != 1) {
			t.Fatalf("v%d: nodes %+v", v, r.Nodes)
		}
	}
	for _, bad := range []struct {
		topic string
		p     int32
	}{{"__consumer_offsets", 0}, {"__cluster_metadata", 1}} {
		if r := ask(2, bad.topic, bad.p); r.ErrorCode != kerr.UnknownTopicOrPartition.Code || r.ErrorMessage == nil {
			t.Fatalf("%s-%d: %v", bad.topic, bad.p, kerr.ErrorForCode(r.ErrorCode))
		}
	}
}
