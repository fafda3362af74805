package protocol

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/replication"
)

// Partition limits (KIP-578) through kadm on a real broker: a static
// max.broker.partitions refuses CreateTopics, validate-only CreateTopics,
// CreatePartitions and auto-creation that would exceed it with
// POLICY_VIOLATION and a message naming the limit; the limits are shown
// by DescribeConfigs and changed at run time (IncrementalAlterConfigs on
// BROKER ""), and bad values are INVALID_CONFIG.
func TestPartitionLimitsKadm(t *testing.T) {
	c := newCluster(t, func(bc *replication.BrokerConfig) {
		bc.BrokerProps = map[string]string{"max.broker.partitions": "5"}
	})
	adm := c.admin()
	ctx := testCtx(t)
	policy := func(what string, err error, msg, limit string) {
		t.Helper()
		if !errors.Is(err, kerr.PolicyViolation) {
			t.Fatalf("%s: %v, want POLICY_VIOLATION", what, err)
		}
		if !strings.Contains(msg, limit) {
			t.Fatalf("%s: message %q does not name %s", what, msg, limit)
		}
	}
	v, err := adm.ValidateCreateTopics(ctx, 6, 1, nil, "big")
	if err != nil {
		t.Fatal(err)
	}
	policy("validate-only create", v["big"].Err, v["big"].ErrMessage, "max.broker.partitions=5")
	r, err := adm.CreateTopics(ctx, 6, 1, nil, "big")
	if err != nil {
		t.Fatal(err)
	}
	policy("create", r["big"].Err, r["big"].ErrMessage, "max.broker.partitions=5")
	if _, ok := c.b.Topic("big"); ok {
		t.Fatal("a refused topic was created")
	}
	c.createTopic("fits", 5)

	up, err := adm.ValidateUpdatePartitions(ctx, 6, "fits")
	if err != nil {
		t.Fatal(err)
	}
	policy("validate-only create partitions", up["fits"].Err, up["fits"].ErrMessage, "max.broker.partitions=5")
	up, err = adm.UpdatePartitions(ctx, 6, "fits")
	if err != nil {
		t.Fatal(err)
	}
	policy("create partitions", up["fits"].Err, up["fits"].ErrMessage, "max.broker.partitions=5")

	// Auto-creation is no back door (KIP-578): Metadata answers the
	// topic with POLICY_VIOLATION.
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("auto")
	mreq.Topics = append(mreq.Topics, mt)
	mreq.AllowAutoTopicCreation = true
	mresp, err := mreq.RequestWith(ctx, c.client())
	if err != nil {
		t.Fatal(err)
	}
	if code := mresp.Topics[0].ErrorCode; code != kerr.PolicyViolation.Code {
		t.Fatalf("auto-create over the limit: %v", kerr.ErrorForCode(code))
	}

	cfg, ok := describeBrokerConfig(t, adm, 1, "max.broker.partitions")
	if !ok || cfg.Value == nil || *cfg.Value != "5" || cfg.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("describe max.broker.partitions: %+v %s", cfg, synonymsString(cfg))
	}
	cfg, ok = describeBrokerConfig(t, adm, 1, "max.partitions")
	if !ok || cfg.Value == nil || *cfg.Value != "200000" || cfg.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("describe max.partitions: %+v", cfg)
	}

	// Raised for the cluster at run time: the topic may grow to 7.
	if resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "max.broker.partitions", Value: str("7")}}); err != nil || resps[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, resps)
	}
	cfg, _ = describeBrokerConfig(t, adm, 1, "max.broker.partitions")
	if cfg.Value == nil || *cfg.Value != "7" || cfg.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("after alter: %+v %s", cfg, synonymsString(cfg))
	}
	if up, err = adm.UpdatePartitions(ctx, 7, "fits"); err != nil || up["fits"].Err != nil {
		t.Fatalf("grow to the raised limit: %v %+v", err, up)
	}
	// max.partitions counts partitions of the whole cluster.
	if resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Name: "max.broker.partitions", Value: str("100")}, {Name: "max.partitions", Value: str("8")},
	}); err != nil || resps[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, resps)
	}
	r, err = adm.CreateTopics(ctx, 2, 1, nil, "two")
	if err != nil {
		t.Fatal(err)
	}
	policy("create over max.partitions", r["two"].Err, r["two"].ErrMessage, "max.partitions=8")
	c.createTopic("one", 1)

	for _, bad := range []kadm.AlterConfig{
		{Name: "max.partitions", Value: str("0")},
		{Name: "max.partitions", Value: str("200001")},
		{Name: "max.broker.partitions", Value: str("many")},
	} {
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{bad})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(resps[0].Err, kerr.InvalidConfig) || !strings.Contains(resps[0].ErrMessage, bad.Name) {
			t.Fatalf("%s=%s: %v %q", bad.Name, *bad.Value, resps[0].Err, resps[0].ErrMessage)
		}
	}
}
