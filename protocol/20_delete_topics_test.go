package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/replication"
)

func TestDeleteTopics(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("d1", 1)
	c.createTopic("d2", 1)
	adm := c.admin()
	ctx := testCtx(t)
	resp, err := adm.DeleteTopics(ctx, "d1", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if r := resp["d1"]; r.Err != nil {
		t.Fatalf("d1: %v", r.Err)
	}
	if r := resp["missing"]; r.Err != kerr.UnknownTopicOrPartition {
		t.Fatalf("missing: %v", r.Err)
	}
	if _, ok := c.b.Topic("d1"); ok {
		t.Fatal("d1 still exists")
	}

	// v6 by topic ID.
	ti, _ := c.b.Topic("d2")
	rc := dialRaw(t, c.addr)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	req.TimeoutMillis = 5000
	for _, id := range [][16]byte{ti.ID, {5}} {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
	}
	r := rc.roundTrip(req).(*kmsg.DeleteTopicsResponse)
	if r.Topics[0].ErrorCode != 0 || r.Topics[0].Topic == nil || *r.Topics[0].Topic != "d2" {
		t.Fatalf("by id: %+v", r.Topics[0])
	}
	if r.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown id: %v", kerr.ErrorForCode(r.Topics[1].ErrorCode))
	}

	// v0 by name.
	c.createTopic("d3", 1)
	req = kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 0
	req.TimeoutMillis = 5000
	req.TopicNames = []string{"d3"}
	if r := rc.roundTrip(req).(*kmsg.DeleteTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
}

func TestDeleteTopicsDisabled(t *testing.T) {
	c := newCluster(t, func(cfg *replication.BrokerConfig) { cfg.DeleteTopicEnable = false })
	c.createTopic("keep", 1)
	resp, err := c.admin().DeleteTopics(testCtx(t), "keep")
	if err != nil {
		t.Fatal(err)
	}
	if r := resp["keep"]; r.Err != kerr.TopicDeletionDisabled {
		t.Fatalf("disabled: %v", r.Err)
	}
}
