package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/replication"
)

func metadataReq(version int16, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		name := tp
		rt.Topic = &name
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func TestMetadataVersions(t *testing.T) {
	c := newCluster(t, func(cfg *replication.BrokerConfig) { cfg.AutoCreateTopics = false })
	c.createTopic("m1", 3)
	c.createTopic("m2", 1)
	rc := dialRaw(t, c.addr)

	// v0: an empty list means every topic.
	r := rc.roundTrip(metadataReq(0, []string{}...)).(*kmsg.MetadataResponse)
	if len(r.Topics) != 2 || len(r.Brokers) != 1 || r.Brokers[0].NodeID != 1 {
		t.Fatalf("v0 all: %+v", r)
	}
	// v1: null means every topic, empty means none.
	if r := rc.roundTrip(metadataReq(1)).(*kmsg.MetadataResponse); len(r.Topics) != 2 || r.ControllerID != 1 {
		t.Fatalf("v1 null: %+v", r)
	}
	if r := rc.roundTrip(metadataReq(1, []string{}...)).(*kmsg.MetadataResponse); len(r.Topics) != 0 {
		t.Fatalf("v1 empty: %d topics", len(r.Topics))
	}

	maxV := kmsg.NewPtrMetadataRequest().MaxVersion()
	r = rc.roundTrip(metadataReq(maxV, "m1", "missing", "bad name!")).(*kmsg.MetadataResponse)
	if r.ClusterID == nil || *r.ClusterID != c.b.ClusterID() || r.ErrorCode != 0 {
		t.Fatalf("cluster: %+v", r)
	}
	m1 := r.Topics[0]
	ti, _ := c.b.Topic("m1")
	if m1.ErrorCode != 0 || m1.TopicID != ti.ID || len(m1.Partitions) != 3 || m1.AuthorizedOperations != -2147483648 {
		t.Fatalf("m1: %+v", m1)
	}
	for _, p := range m1.Partitions {
		if p.Leader != 1 || len(p.Replicas) != 1 || len(p.ISR) != 1 || p.ErrorCode != 0 || p.LeaderEpoch < 0 {
			t.Fatalf("m1 partition: %+v", p)
		}
	}
	if r.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("missing: %v", kerr.ErrorForCode(r.Topics[1].ErrorCode))
	}
	if r.Topics[2].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("invalid: %v", kerr.ErrorForCode(r.Topics[2].ErrorCode))
	}

	// By topic ID (v12+: null name).
	req := kmsg.NewPtrMetadataRequest()
	req.Version = maxV
	for _, id := range [][16]byte{ti.ID, {7}} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
	}
	r = rc.roundTrip(req).(*kmsg.MetadataResponse)
	if r.Topics[0].ErrorCode != 0 || r.Topics[0].Topic == nil || *r.Topics[0].Topic != "m1" {
		t.Fatalf("by id: %+v", r.Topics[0])
	}
	if r.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown id: %v", kerr.ErrorForCode(r.Topics[1].ErrorCode))
	}
}

func TestMetadataAutoCreate(t *testing.T) {
	c := newCluster(t, nil)
	rc := dialRaw(t, c.addr)
	// v4+ without AllowAutoTopicCreation: not created.
	req := metadataReq(9, "auto1")
	if r := rc.roundTrip(req).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("no auto-create: %v", kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
	req.AllowAutoTopicCreation = true
	if r := rc.roundTrip(req).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != 0 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("auto-create: %+v", r.Topics[0])
	}
	// v0-v3 always auto-create.
	if r := rc.roundTrip(metadataReq(1, "auto2")).(*kmsg.MetadataResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("v1 auto-create: %v", kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
	if _, ok := c.b.Topic("auto2"); !ok {
		t.Fatal("auto2 not created")
	}
}

func TestMetadataKadm(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("k", 2)
	md, err := c.admin().Metadata(testCtx(t), "k")
	if err != nil {
		t.Fatal(err)
	}
	td := md.Topics["k"]
	if td.Err != nil || len(td.Partitions) != 2 || md.Cluster != c.b.ClusterID() || len(md.Brokers) != 1 {
		t.Fatalf("kadm metadata: %+v", md)
	}
}

// TestMetadataHidesUnelectedLeader: a partition whose first election is
// not recorded yet (leader epoch 0, the first replica as a placeholder) is
// answered as leaderless, never as led at epoch 0: a client fetching with
// epoch 0 would be fenced by the elected epoch.
func TestMetadataHidesUnelectedLeader(t *testing.T) {
	ti := replication.TopicInfo{Name: "t", Partitions: []replication.PartitionInfo{
		{Partition: 0, Leader: 2, LeaderEpoch: 0, Replicas: []int32{2, 1, 3}, ISR: []int32{2, 1, 3}},
		{Partition: 1, Leader: 3, LeaderEpoch: 2, Replicas: []int32{3, 1, 2}, ISR: []int32{3, 1}},
		{Partition: 2, Leader: -1, LeaderEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{}},
	}}
	mt := metadataTopic(ti, map[int32]bool{1: true, 2: true, 3: true})
	want := []struct {
		leader, epoch int32
		code          int16
	}{
		{-1, -1, kerr.LeaderNotAvailable.Code},
		{3, 2, 0},
		{-1, 4, kerr.LeaderNotAvailable.Code},
	}
	for i, w := range want {
		p := mt.Partitions[i]
		if p.Leader != w.leader || p.LeaderEpoch != w.epoch || p.ErrorCode != w.code {
			t.Errorf("partition %d: leader %d epoch %d error %d, want %d %d %d", i, p.Leader, p.LeaderEpoch, p.ErrorCode, w.leader, w.epoch, w.code)
		}
		if len(p.Replicas) != 3 {
			t.Errorf("partition %d: replicas %v", i, p.Replicas)
		}
	}
}
