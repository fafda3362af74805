package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDescribeConfigs(t *testing.T) {
	c := newCluster(t, nil)
	adm := c.admin()
	ctx := testCtx(t)
	v := "12345"
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": &v}, "dc"); err != nil || resp.Err != nil {
		t.Fatal(err, resp.Err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, "dc")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("dc", nil)
	if err != nil || rc.Err != nil {
		t.Fatal(err, rc.Err)
	}
	found := false
	for _, cfg := range rc.Configs {
		if cfg.Key == "retention.ms" {
			found = cfg.Value != nil && *cfg.Value == v && cfg.Source == kmsg.ConfigSourceDynamicTopicConfig
		}
	}
	if !found || len(rc.Configs) < 2 {
		t.Fatalf("retention.ms override not described: %+v", rc.Configs)
	}
	bcs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil || len(bcs) != 1 || bcs[0].Err != nil || len(bcs[0].Configs) == 0 {
		t.Fatalf("broker configs: %v %+v", err, bcs)
	}

	raw := dialRaw(t, c.addr)
	for _, ver := range []int16{0, 1, 4} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = ver
		req.IncludeSynonyms, req.IncludeDocumentation = true, true
		res := func(typ kmsg.ConfigResourceType, name string, names ...string) kmsg.DescribeConfigsRequestResource {
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName, r.ConfigNames = typ, name, names
			return r
		}
		req.Resources = []kmsg.DescribeConfigsRequestResource{
			res(kmsg.ConfigResourceTypeTopic, "dc", "retention.ms"),
			res(kmsg.ConfigResourceTypeTopic, "missing"),
			res(kmsg.ConfigResourceTypeBroker, "7"),
			res(kmsg.ConfigResourceTypeBroker, ""),
			res(kmsg.ConfigResourceType(99), "x"),
		}
		r := raw.roundTrip(req).(*kmsg.DescribeConfigsResponse)
		want := []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidRequest.Code, 0, kerr.InvalidRequest.Code}
		for i, rr := range r.Resources {
			if rr.ErrorCode != want[i] {
				t.Errorf("v%d resource %d: %v, want %v", ver, i, kerr.ErrorForCode(rr.ErrorCode), kerr.ErrorForCode(want[i]))
			}
		}
		if n := len(r.Resources[0].Configs); n != 1 {
			t.Errorf("v%d: ConfigNames filter returned %d configs", ver, n)
		}
	}
}
