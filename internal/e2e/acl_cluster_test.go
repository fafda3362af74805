package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// TestACLsCluster: ACLs are replicated metadata, so every broker enforces
// them alike. Three brokers with ACLs on and
// allow.everyone.if.no.acl.found=true (User:ANONYMOUS on PLAINTEXT may
// do what no ACL names): an ALLOW for User:* and a DENY of WRITE for
// User:ANONYMOUS created through broker 1 are listed by every broker and
// the DENY refuses produce to partitions led by each of them; deleted
// through broker 2, produce works again everywhere. Not in -short.
func TestACLsCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three brokers: not in -short")
	}
	c := startChaosCluster(t, 3, 500*time.Millisecond,
		"--set", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"--set", "allow.everyone.if.no.acl.found=true")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.client())
	for _, topic := range []string{"locked", "open"} {
		if _, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
			t.Fatal(err)
		}
		c.waitLeaders(ctx, adm, topic, 3, time.Minute)
	}
	// Once an ACL names a resource, allow.everyone.if.no.acl.found no
	// longer applies to it (Kafka's rule): everyone is allowed all on
	// locked, and the DENY takes WRITE back from User:ANONYMOUS.
	everyone := kadm.NewACLs().Allow("User:*").AllowHosts("*").Topics("locked").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral)
	deny := kadm.NewACLs().Deny("User:ANONYMOUS").DenyHosts("*").Topics("locked").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	for _, b := range []*kadm.ACLBuilder{everyone, deny} {
		res, err := kadm.NewClient(c.direct(c.node(1))).CreateACLs(ctx, b)
		if err != nil || len(res) != 1 || res[0].Err != nil {
			t.Fatalf("CreateAcls through broker 1: %v %+v", err, res)
		}
	}
	listed := func(id int32) int {
		d, err := kadm.NewClient(c.direct(c.node(id))).DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().
			Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
		if err != nil || len(d) == 0 || d[0].Err != nil {
			return -1
		}
		n := 0
		for _, r := range d {
			n += len(r.Described)
		}
		return n
	}
	for id := int32(1); id <= 3; id++ {
		testwait.For(t, 30*time.Second, func() bool { return listed(id) == 2 }, "broker %d does not list the ACLs", id)
	}
	prod := c.client(kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(3))
	produce := func(topic string, p int32) error {
		return prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}).FirstErr()
	}
	leaders := c.waitLeaders(ctx, adm, "locked", 3, time.Minute)
	for p := int32(0); p < 3; p++ {
		if err := produce("locked", p); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("produce to locked/%d (leader %d): %v, want TOPIC_AUTHORIZATION_FAILED", p, leaders[p][0], err)
		}
		if err := produce("open", p); err != nil {
			t.Fatalf("produce to open/%d: %v", p, err)
		}
	}
	dres, err := kadm.NewClient(c.direct(c.node(2))).DeleteACLs(ctx, deny)
	if err != nil || len(dres) != 1 || dres[0].Err != nil || len(dres[0].Deleted) != 1 {
		t.Fatalf("DeleteAcls through broker 2: %v %+v", err, dres)
	}
	for id := int32(1); id <= 3; id++ {
		testwait.For(t, 30*time.Second, func() bool { return listed(id) == 1 }, "broker %d still lists the DENY", id)
	}
	for p := int32(0); p < 3; p++ {
		if err := produce("locked", p); err != nil {
			t.Fatalf("produce to locked/%d after DeleteAcls: %v", p, err)
		}
	}
}
