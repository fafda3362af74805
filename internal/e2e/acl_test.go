package e2e

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// aclBroker is one broker with ACLs on: a PLAINTEXT listener (the
// harness's, User:ANONYMOUS) and a SASL_PLAINTEXT one with PLAIN users
// admin (a super user), alice, bob and carol.
type aclBroker struct {
	*broker
	sasl string
}

func startACLBroker(t *testing.T) *aclBroker {
	t.Helper()
	plainAddr, saslAddr := freeAddr(t), freeAddr(t)
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-pw" user_alice="alice-pw" user_bob="bob-pw" user_carol="carol-pw";`
	args := []string{
		"--set", "listeners=PLAINTEXT://" + plainAddr + ",SASL_PLAINTEXT://" + saslAddr,
		"--set", "listener.name.sasl_plaintext.plain.sasl.jaas.config=" + jaas,
		"--set", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"--set", "super.users=User:admin",
	}
	b := &broker{t: t, dataDir: t.TempDir(), addr: plainAddr, logs: new(bytes.Buffer), args: args}
	b.start()
	t.Cleanup(func() {
		b.kill()
		if t.Failed() {
			b.mu.Lock()
			out := b.logs.String()
			b.mu.Unlock()
			if len(out) > 20000 {
				out = "..." + out[len(out)-20000:]
			}
			t.Logf("broker log:\n%s", out)
		}
	})
	return &aclBroker{broker: b, sasl: saslAddr}
}

// as is a client authenticated as user (password user-pw).
func (ab *aclBroker) as(t *testing.T, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(ab.sasl),
		kgo.SASL(plain.Auth{User: user, Pass: user + "-pw"}.AsMechanism()),
		kgo.RetryTimeout(5 * time.Second), kgo.RecordRetries(2)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func aclCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// produceErr produces one record to topic without idempotence (the
// topic's own answer, not InitProducerId's).
func (ab *aclBroker) produceErr(t *testing.T, user, topic string) error {
	t.Helper()
	cl := ab.as(t, user, kgo.DisableIdempotentWrite())
	return cl.ProduceSync(aclCtx(t), &kgo.Record{Topic: topic, Value: []byte(user)}).FirstErr()
}

// fetchErr fetches topic's partition 0 from offset 0 with a raw Fetch and
// returns its error code as an error.
func (ab *aclBroker) fetchErr(t *testing.T, user, topic string) error {
	t.Helper()
	td, err := kadm.NewClient(ab.as(t, "admin")).ListTopics(aclCtx(t), topic)
	if err != nil || td[topic].Err != nil {
		t.Fatal(err, td[topic].Err)
	}
	cl := ab.as(t, user)
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes = 10, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, td[topic].ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(aclCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range resp.Topics {
		if (tt.Topic == topic || tt.TopicID == td[topic].ID) && len(tt.Partitions) == 1 {
			return kerr.ErrorForCode(tt.Partitions[0].ErrorCode)
		}
	}
	t.Fatalf("fetch of %s: no answer for it: %+v", topic, resp.Topics)
	return nil
}

func binding(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pt
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, host, op, perm
	return c
}

const (
	lit  = kmsg.ACLResourcePatternTypeLiteral
	pref = kmsg.ACLResourcePatternTypePrefixed
)

// TestACLs: ACLs created, listed and deleted with kadm over SASL allow
// and deny exactly what they say (produce, consume, groups, create,
// delete, super user, deny beats allow, prefixed patterns, hosts, Metadata
// filtering, authorized operations), and survive a restart.
func TestACLs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	ab := startACLBroker(t)
	ctx := aclCtx(t)
	admin := kadm.NewClient(ab.as(t, "admin"))
	for _, topic := range []string{"orders", "logs-app", "secret"} {
		if _, err := admin.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}

	// No ACL: only super users.
	if err := ab.produceErr(t, "alice", "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's produce before any ACL: %v", err)
	}

	// ACLs through kadm (CreateAcls v3).
	b := kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead, kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := admin.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	b = kadm.NewACLs().Allow("User:alice").Groups("g-alice").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if _, err := admin.CreateACLs(ctx, b); err != nil {
		t.Fatal(err)
	}
	// The rest with one raw CreateAcls.
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{
		binding(kmsg.ACLResourceTypeTopic, "orders", lit, "User:bob", "*", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow),
		binding(kmsg.ACLResourceTypeTopic, "orders", lit, "User:bob", "*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeDeny),
		binding(kmsg.ACLResourceTypeTopic, "logs-", pref, "User:carol", "127.0.0.1", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow),
		binding(kmsg.ACLResourceTypeTopic, "secret", lit, "User:carol", "10.9.9.9", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),
		binding(kmsg.ACLResourceTypeTopic, "alice-", pref, "User:alice", "*", kmsg.ACLOperationCreate, kmsg.ACLPermissionTypeAllow),
		binding(kmsg.ACLResourceTypeTopic, "alice-", pref, "User:alice", "*", kmsg.ACLOperationDelete, kmsg.ACLPermissionTypeAllow),
		binding(kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeMatch, "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow), // invalid: MATCH
		binding(kmsg.ACLResourceTypeTopic, "x", lit, "alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow),                                   // invalid principal
	}
	cresp, err := req.RequestWith(ctx, ab.as(t, "admin"))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range cresp.Results {
		want := int16(0)
		if i >= 6 {
			want = kerr.InvalidRequest.Code
		}
		if r.ErrorCode != want {
			t.Fatalf("creation %d: error %d, want %d", i, r.ErrorCode, want)
		}
	}

	// DescribeAcls: all, and by MATCH on a topic.
	described, err := admin.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	if n := countDescribed(t, described); n != 9 {
		t.Fatalf("DescribeAcls lists %d ACLs, want 9", n)
	}
	described, err = admin.DescribeACLs(ctx, kadm.NewACLs().Topics("logs-app").Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternMatch))
	if err != nil {
		t.Fatal(err)
	}
	if n := countDescribed(t, described); n != 1 {
		t.Fatalf("DescribeAcls MATCH logs-app lists %d ACLs, want 1 (the prefixed one)", n)
	}

	check := func(what string, err, want error) {
		t.Helper()
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
	}
	// Produce and fetch.
	check("alice produces to orders", ab.produceErr(t, "alice", "orders"), nil)
	check("alice produces to secret", ab.produceErr(t, "alice", "secret"), kerr.TopicAuthorizationFailed)
	check("alice fetches orders", ab.fetchErr(t, "alice", "orders"), nil)
	check("alice fetches logs-app", ab.fetchErr(t, "alice", "logs-app"), kerr.TopicAuthorizationFailed)
	check("bob produces to orders (DENY WRITE beats ALLOW ALL)", ab.produceErr(t, "bob", "orders"), kerr.TopicAuthorizationFailed)
	check("bob fetches orders (ALL)", ab.fetchErr(t, "bob", "orders"), nil)
	check("carol produces to logs-app (prefixed, her host)", ab.produceErr(t, "carol", "logs-app"), nil)
	check("carol fetches secret (another host's ACL)", ab.fetchErr(t, "carol", "secret"), kerr.TopicAuthorizationFailed)
	check("admin (super user) produces to secret", ab.produceErr(t, "admin", "secret"), nil)
	// Idempotent producers: InitProducerId needs IDEMPOTENT_WRITE or WRITE on some topic.
	check("alice's idempotent produce", ab.as(t, "alice").ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("i")}).FirstErr(), nil)
	check("bob's idempotent produce (his only WRITE is denied)",
		ab.as(t, "bob").ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("i")}).FirstErr(), kerr.ClusterAuthorizationFailed)
	// The PLAINTEXT listener is User:ANONYMOUS, with no ACL.
	anon := ab.client(kgo.DisableIdempotentWrite(), kgo.RecordRetries(2))
	check("ANONYMOUS produces", anon.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("a")}).FirstErr(), kerr.TopicAuthorizationFailed)

	// Groups: alice consumes orders in g-alice; g-other is denied.
	cons := ab.as(t, "alice", kgo.ConsumerGroup("g-alice"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	got := 0
	for got < 2 && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("alice consuming %s/%d: %v", topic, p, err) })
		got += fs.NumRecords()
	}
	if got < 2 {
		t.Fatalf("alice consumed %d records of orders", got)
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice commits in g-alice: %v", err)
	}
	aliceAdm := kadm.NewClient(ab.as(t, "alice"))
	_, err = aliceAdm.FetchOffsets(ctx, "g-other")
	check("alice fetches g-other's offsets", err, kerr.GroupAuthorizationFailed)
	other := ab.as(t, "alice", kgo.ConsumerGroup("g-other"), kgo.ConsumeTopics("orders"))
	gerr := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			fs := other.PollFetches(ctx)
			var found error
			fs.EachError(func(_ string, _ int32, err error) { found = err })
			if found != nil {
				gerr <- found
				return
			}
		}
	}()
	select {
	case err := <-gerr:
		check("alice joins g-other", err, kerr.GroupAuthorizationFailed)
	case <-ctx.Done():
		t.Fatal("joining g-other: no error")
	}
	other.Close()

	// Metadata: all topics lists only what alice may describe; a named
	// topic she may not is TOPIC_AUTHORIZATION_FAILED.
	td, err := aliceAdm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := td.Names(); strings.Join(names, ",") != "orders" {
		t.Fatalf("alice's Metadata lists %v, want [orders]", names)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.IncludeTopicAuthorizedOperations = true
	for _, n := range []string{"orders", "secret"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(n)
		mreq.Topics = append(mreq.Topics, mt)
	}
	mresp, err := mreq.RequestWith(ctx, ab.as(t, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, mt := range mresp.Topics {
		codes[*mt.Topic] = mt.ErrorCode
		if *mt.Topic == "orders" {
			want := int32(1<<3 | 1<<4 | 1<<8) // READ, WRITE, DESCRIBE
			if mt.AuthorizedOperations != want {
				t.Fatalf("orders' authorized operations for alice: %b, want %b", mt.AuthorizedOperations, want)
			}
		}
	}
	if codes["orders"] != 0 || codes["secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("named Metadata codes: %v", codes)
	}

	// Authorized operations of a group and of the cluster.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"g-alice"}, true
	dgr, err := dg.RequestWith(ctx, ab.as(t, "alice"))
	if err != nil || len(dgr.Groups) != 1 || dgr.Groups[0].ErrorCode != 0 || dgr.Groups[0].AuthorizedOperations != 1<<3|1<<8 {
		t.Fatalf("DescribeGroups g-alice as alice (want READ|DESCRIBE): %v %+v", err, dgr)
	}
	// g-other: refused already at FindCoordinator (DESCRIBE on the group),
	// which franz-go sends first, as Kafka's clients do.
	dg.Groups = []string{"g-other"}
	if dgr, err = dg.RequestWith(ctx, ab.as(t, "alice")); !errors.Is(err, kerr.GroupAuthorizationFailed) &&
		(err != nil || len(dgr.Groups) != 1 || dgr.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code) {
		t.Fatalf("DescribeGroups g-other as alice: %v %+v", err, dgr)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	for user, want := range map[string]int32{"alice": 0, "admin": 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12 | 1<<13 | 1<<14} {
		dcr, err := dc.RequestWith(ctx, ab.as(t, user))
		if err != nil || dcr.ErrorCode != 0 || dcr.ClusterAuthorizedOperations != want {
			t.Fatalf("DescribeCluster as %s: %v %+v, want operations %b", user, err, dcr, want)
		}
	}

	// Create and delete topics.
	cr, err := aliceAdm.CreateTopics(ctx, 1, 1, nil, "alice-new", "other-new")
	if err != nil {
		t.Fatal(err)
	}
	check("alice creates alice-new", cr["alice-new"].Err, nil)
	check("alice creates other-new", cr["other-new"].Err, kerr.TopicAuthorizationFailed)
	dr, err := aliceAdm.DeleteTopics(ctx, "alice-new", "orders")
	if err != nil {
		t.Fatal(err)
	}
	check("alice deletes alice-new", dr["alice-new"].Err, nil)
	check("alice deletes orders", dr["orders"].Err, kerr.TopicAuthorizationFailed)

	// ACL APIs need ALTER/DESCRIBE on the cluster.
	if ds, err := aliceAdm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)); err != nil || len(ds) == 0 || !errors.Is(ds[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice's DescribeAcls: %v %+v", err, ds)
	}
	ares, err := aliceAdm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("secret").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral))
	if err == nil && (len(ares) != 1 || !errors.Is(ares[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Fatalf("alice's CreateAcls: %+v", ares)
	}
	check("alice still cannot fetch secret", ab.fetchErr(t, "alice", "secret"), kerr.TopicAuthorizationFailed)

	// Transactions: WRITE on the transactional ID too.
	noTxn := ab.as(t, "alice", kgo.TransactionalID("tx-alice"))
	txnErr := noTxn.BeginTransaction() // kgo asks for the producer ID here
	if txnErr == nil {
		txnErr = noTxn.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("t")}).FirstErr()
	}
	check("alice's transactional produce without the ID's ACL", txnErr, kerr.TransactionalIDAuthorizationFailed)
	if _, err := admin.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").TransactionalIDs("tx-alice").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)); err != nil {
		t.Fatal(err)
	}
	txn := ab.as(t, "alice", kgo.TransactionalID("tx-alice"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	check("alice's transactional produce", txn.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("t")}).FirstErr(), nil)
	check("alice commits", txn.EndTransaction(ctx, kgo.TryCommit), nil)

	// DeleteAcls: alice's WRITE on orders goes.
	dres, err := admin.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("orders").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	if len(dres) != 1 || dres[0].Err != nil || len(dres[0].Deleted) != 1 {
		t.Fatalf("DeleteAcls: %+v", dres)
	}
	check("alice produces after her WRITE was deleted", ab.produceErr(t, "alice", "orders"), kerr.TopicAuthorizationFailed)

	// A restart: the ACLs are in the replicated metadata.
	ab.restart()
	admin = kadm.NewClient(ab.as(t, "admin"))
	described, err = admin.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	if n := countDescribed(t, described); n != 9 {
		t.Fatalf("after the restart DescribeAcls lists %d ACLs, want 9", n)
	}
	check("after the restart carol produces to logs-app", ab.produceErr(t, "carol", "logs-app"), nil)
	check("after the restart alice produces to orders", ab.produceErr(t, "alice", "orders"), kerr.TopicAuthorizationFailed)
	check("after the restart bob fetches orders", ab.fetchErr(t, "bob", "orders"), nil)

	// A fetch session keeps no right: bob consumes orders, loses his ALL,
	// and his session's next fetches are refused, not served.
	bobCons := ab.as(t, "bob", kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	for n := 0; n == 0 && ctx.Err() == nil; {
		fs := bobCons.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("bob consuming %s/%d: %v", topic, p, err) })
		n = fs.NumRecords()
	}
	if _, err := admin.DeleteACLs(ctx, kadm.NewACLs().Allow("User:bob").AllowHosts("*").Topics("orders").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral)); err != nil {
		t.Fatal(err)
	}
	check("admin produces after bob's ACL went", ab.produceErr(t, "admin", "orders"), nil)
	for ctx.Err() == nil {
		fs := bobCons.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "admin" {
				t.Fatalf("bob's fetch session served a record produced after his READ was removed")
			}
		})
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			check("bob's session after his ACL went", ferr, kerr.TopicAuthorizationFailed)
			break
		}
	}
}

func countDescribed(t *testing.T, rs kadm.DescribeACLsResults) int {
	t.Helper()
	n := 0
	var all []string
	for _, r := range rs {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		for _, d := range r.Described {
			n++
			all = append(all, d.Type.String()+":"+d.Name+":"+d.Principal+":"+d.Operation.String()+":"+d.Permission.String())
		}
	}
	sort.Strings(all)
	t.Logf("described: %v", all)
	return n
}
