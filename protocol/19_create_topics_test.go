package protocol

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCreateTopicsKadm(t *testing.T) {
	c := newCluster(t, nil)
	adm := c.admin()
	ctx := testCtx(t)
	v := "86400000"
	resp, err := adm.CreateTopic(ctx, 4, 1, map[string]*string{"retention.ms": &v}, "ct")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	if resp.ID == [16]byte{} || resp.NumPartitions != 4 || resp.ReplicationFactor != 1 {
		t.Fatalf("create response: %+v", resp)
	}
	found := false
	for _, cfg := range resp.Configs {
		if cfg.Key == "retention.ms" && cfg.Value != nil && *cfg.Value == v {
			found = true
		}
	}
	if !found {
		t.Fatalf("retention.ms not in returned configs: %+v", resp.Configs)
	}
	resp, _ = adm.CreateTopic(ctx, 1, 1, nil, "ct")
	if resp.Err != kerr.TopicAlreadyExists {
		t.Fatalf("create twice: %v", resp.Err)
	}
	// Defaults (-1/-1).
	if resp, _ = adm.CreateTopic(ctx, -1, -1, nil, "ct-default"); resp.Err != nil || resp.NumPartitions != 1 {
		t.Fatalf("defaults: %+v", resp)
	}
	// Validate only creates nothing.
	if resp, _ := adm.ValidateCreateTopics(ctx, 2, 1, nil, "ct-validate"); resp.Error() != nil {
		t.Fatalf("validate only: %v", resp.Error())
	}
	if _, ok := c.b.Topic("ct-validate"); ok {
		t.Fatal("validate-only created the topic")
	}
}

func TestCreateTopicsRaw(t *testing.T) {
	c := newCluster(t, nil)
	rc := dialRaw(t, c.addr)
	topic := func(name string, parts int32, rf int16) kmsg.CreateTopicsRequestTopic {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, rf
		return rt
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	req.TimeoutMillis = 5000
	dup := topic("dup", 1, 1)
	manual := topic("manual", -1, -1)
	for p := range int32(3) {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = p, []int32{1}
		manual.ReplicaAssignment = append(manual.ReplicaAssignment, a)
	}
	both := topic("both", 2, 1)
	both.ReplicaAssignment = manual.ReplicaAssignment
	badCfg := topic("badcfg", 1, 1)
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name = "cleanup.policy"
	val := "nonsense"
	cfg.Value = &val
	badCfg.Configs = append(badCfg.Configs, cfg)
	req.Topics = []kmsg.CreateTopicsRequestTopic{dup, dup, manual, both, topic("bad/name", 1, 1), topic("zero", 0, 1), topic("rf", 1, 3), badCfg}
	r := rc.roundTrip(req).(*kmsg.CreateTopicsResponse)
	want := []int16{kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, 0, kerr.InvalidRequest.Code,
		kerr.InvalidTopicException.Code, kerr.InvalidPartitions.Code, kerr.InvalidReplicationFactor.Code, kerr.InvalidConfig.Code}
	for i, st := range r.Topics {
		if st.ErrorCode != want[i] {
			t.Errorf("%s: %v, want %v", st.Topic, kerr.ErrorForCode(st.ErrorCode), kerr.ErrorForCode(want[i]))
		}
		if st.ErrorCode != 0 && (st.ErrorMessage == nil || st.NumPartitions != -1) {
			t.Errorf("%s: error without message or with partitions: %+v", st.Topic, st)
		}
	}
	if ti, ok := c.b.Topic("manual"); !ok || len(ti.Partitions) != 3 {
		t.Fatalf("manual assignment: %+v", ti)
	}
	// v0 works too.
	req.Version = 0
	req.Topics = []kmsg.CreateTopicsRequestTopic{topic("v0", 1, 1)}
	if r := rc.roundTrip(req).(*kmsg.CreateTopicsResponse); r.Topics[0].ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
}

// A validate-only creation answers (v5+) with the configs the topic would
// have, overrides and defaults, never a null list: the Java admin client
// reads the list and failed with a NullPointerException on null.
func TestCreateTopicsValidateOnlyConfigs(t *testing.T) {
	c := newCluster(t, nil)
	rc := dialRaw(t, c.addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis, req.ValidateOnly = 7, 5000, true
	for _, name := range []string{"vo-plain", "vo-override"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
		if name == "vo-override" {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			v := "3600000"
			cfg.Name, cfg.Value = "retention.ms", &v
			rt.Configs = append(rt.Configs, cfg)
		}
		req.Topics = append(req.Topics, rt)
	}
	r := rc.roundTrip(req).(*kmsg.CreateTopicsResponse)
	for _, st := range r.Topics {
		if st.ErrorCode != 0 {
			t.Fatalf("%s: %v", st.Topic, kerr.ErrorForCode(st.ErrorCode))
		}
		if st.Configs == nil {
			t.Fatalf("%s: null configs", st.Topic)
		}
		got := map[string]string{}
		for _, c := range st.Configs {
			if c.Value != nil {
				got[c.Name] = fmt.Sprintf("%s/%d", *c.Value, c.Source)
			}
		}
		want := map[string]string{"vo-plain": "604800000/5", "vo-override": "3600000/1"}[st.Topic]
		if got["retention.ms"] != want || got["cleanup.policy"] != "delete/5" {
			t.Fatalf("%s: retention.ms %q cleanup.policy %q, want %q and delete/5 (of %d configs)", st.Topic, got["retention.ms"], got["cleanup.policy"], want, len(st.Configs))
		}
		if _, ok := c.b.Topic(st.Topic); ok {
			t.Fatalf("validate-only created %s", st.Topic)
		}
	}
}
