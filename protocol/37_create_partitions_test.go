package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCreatePartitions(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("cp", 1)
	adm := c.admin()
	ctx := testCtx(t)
	resp, err := adm.ValidateUpdatePartitions(ctx, 3, "cp")
	if err != nil || resp["cp"].Err != nil {
		t.Fatalf("validate: %v %+v", err, resp)
	}
	if ti, _ := c.b.Topic("cp"); len(ti.Partitions) != 1 {
		t.Fatal("validate-only grew the topic")
	}
	resp, err = adm.UpdatePartitions(ctx, 3, "cp", "missing")
	if err != nil || resp["cp"].Err != nil || resp["missing"].Err != kerr.UnknownTopicOrPartition {
		t.Fatalf("grow: %v %+v", err, resp)
	}
	if ti, _ := c.b.Topic("cp"); len(ti.Partitions) != 3 {
		t.Fatalf("cp has %d partitions", len(ti.Partitions))
	}
	resp, _ = adm.UpdatePartitions(ctx, 2, "cp")
	if resp["cp"].Err != kerr.InvalidPartitions {
		t.Fatalf("shrink: %v", resp["cp"].Err)
	}

	rc := dialRaw(t, c.addr)
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Version = 0
	req.TimeoutMillis = 5000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "cp", 5
	for range 2 {
		a := kmsg.NewCreatePartitionsRequestTopicAssignment()
		a.Replicas = []int32{1}
		rt.Assignment = append(rt.Assignment, a)
	}
	bad := rt
	bad.Count = 9 // needs 4 assignments, has 2
	req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
	if r := rc.roundTrip(req).(*kmsg.CreatePartitionsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("with assignment: %v", kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
	req.Topics = []kmsg.CreatePartitionsRequestTopic{bad}
	if r := rc.roundTrip(req).(*kmsg.CreatePartitionsResponse); r.Topics[0].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("short assignment: %v", kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
	req.Topics = []kmsg.CreatePartitionsRequestTopic{bad, bad}
	if r := rc.roundTrip(req).(*kmsg.CreatePartitionsResponse); r.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("duplicate: %v", kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
}
