package protocol

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestElectLeaders(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("el-a", 3)
	c.createTopic("el-b", 1)
	ctx := testCtx(t)
	adm := c.admin()
	for _, how := range []kadm.ElectLeadersHow{kadm.ElectPreferredReplica, kadm.ElectLiveReplica} {
		var set kadm.TopicsSet
		set.Add("el-a", 0, 1, 2, 3)
		set.Add("el-b", 0)
		set.Add("nope", 0)
		rs, err := adm.ElectLeaders(ctx, how, set)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []struct {
			topic     string
			partition int32
			err       error
		}{
			// One replica: the leader already is the preferred one.
			{"el-a", 0, kerr.ElectionNotNeeded}, {"el-a", 1, kerr.ElectionNotNeeded}, {"el-a", 2, kerr.ElectionNotNeeded},
			{"el-b", 0, kerr.ElectionNotNeeded},
			{"el-a", 3, kerr.UnknownTopicOrPartition}, {"nope", 0, kerr.UnknownTopicOrPartition},
		} {
			r, ok := rs[w.topic][w.partition]
			if !ok || !errors.Is(r.Err, w.err) || r.How != how {
				t.Errorf("election %d of %s-%d: %+v, want %v", how, w.topic, w.partition, r, w.err)
			}
		}
		if n := len(rs["el-a"]) + len(rs["el-b"]) + len(rs["nope"]); n != 6 {
			t.Errorf("election %d: %d results, want 6", how, n)
		}
		// Null topics: every partition, where those that need no
		// election are left out (each topic still listed).
		all, err := adm.ElectLeaders(ctx, how, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, topic := range []string{"el-a", "el-b"} {
			if ps, ok := all[topic]; !ok || len(ps) != 0 {
				t.Errorf("election %d of all: %s: %+v", how, topic, ps)
			}
		}
	}

	// Raw: v0 (always preferred, no top-level error); an unknown election
	// type is INVALID_REQUEST at the top and for each named partition.
	rc := dialRaw(t, c.addr)
	named := func(v int16, typ int8) *kmsg.ElectLeadersRequest {
		req := kmsg.NewPtrElectLeadersRequest()
		req.SetVersion(v)
		req.ElectionType = typ
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = "el-a", []int32{2, 0}
		req.Topics = append(req.Topics, rt)
		return req
	}
	for v := int16(0); v <= 2; v++ {
		resp := rc.roundTrip(named(v, 0)).(*kmsg.ElectLeadersResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 ||
			resp.Topics[0].Partitions[0].Partition != 2 || resp.Topics[0].Partitions[0].ErrorCode != kerr.ElectionNotNeeded.Code {
			t.Fatalf("v%d: %+v", v, resp)
		}
		if v == 0 {
			continue
		}
		resp = rc.roundTrip(named(v, 5)).(*kmsg.ElectLeadersResponse)
		if resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Topics[0].Partitions) != 2 ||
			resp.Topics[0].Partitions[1].ErrorCode != kerr.InvalidRequest.Code || resp.Topics[0].Partitions[1].ErrorMessage == nil {
			t.Fatalf("v%d election type 5: %+v", v, resp)
		}
		req := kmsg.NewPtrElectLeadersRequest()
		req.SetVersion(v)
		req.ElectionType = 5
		if resp = rc.roundTrip(req).(*kmsg.ElectLeadersResponse); resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Topics) != 0 {
			t.Fatalf("v%d election type 5 of all: %+v", v, resp)
		}
	}
}
