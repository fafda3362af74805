package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-io/strata/internal/testwait"
)

// TestInterBrokerIdentity: a broker whose only listener is secured --
// SASL_SSL (its own clients authenticate with SCRAM-SHA-512, the user
// seeded from the listener's JAAS setting) or SSL with client
// certificates required -- with ACLs on and only the broker's principal
// in super.users (no User:ANONYMOUS). Strata's own client, the share
// group's dead-letter writer, writes a rejected record's dead letter:
// its Produce authenticates as the broker and passes the ACLs. The
// application, alice, may only produce to and consume from what her ACLs
// grant.
func TestInterBrokerIdentity(t *testing.T) {
	for _, mode := range []string{"SASL_SSL", "SSL"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			ca := writeCerts(t, dir)
			pool := x509.NewCertPool()
			pool.AddCert(ca.Cert)
			tlsCfg := func(cert, key string) *tls.Config {
				c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
				if cert != "" {
					kp, err := tls.LoadX509KeyPair(filepath.Join(dir, cert), filepath.Join(dir, key))
					if err != nil {
						t.Fatal(err)
					}
					c.Certificates = []tls.Certificate{kp}
				}
				return c
			}
			addr := freeAddr(t)
			args := append([]string{
				"--set", "listeners=INTERNAL://" + addr,
				"--set", "listener.security.protocol.map=INTERNAL:" + mode,
				"--set", "inter.broker.listener.name=INTERNAL",
				"--set", "ssl.keystore.location=" + filepath.Join(dir, "broker.pem"),
				"--set", "ssl.truststore.location=" + filepath.Join(dir, "ca.pem"),
				"--set", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			}, shareSettings...)
			var admin, alice []kgo.Opt
			var alicePrincipal string
			switch mode {
			case "SASL_SSL":
				args = append(args,
					"--set", "listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
					"--set", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
					"--set", `listener.name.internal.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
					"--set", `listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`,
					"--set", "super.users=User:broker")
				admin = []kgo.Opt{kgo.DialTLSConfig(tlsCfg("", "")), kgo.SASL(scram.Auth{User: "broker", Pass: "broker-secret"}.AsSha512Mechanism())}
				alice = []kgo.Opt{kgo.DialTLSConfig(tlsCfg("", "")), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())}
				alicePrincipal = "User:alice"
			case "SSL":
				args = append(args, "--set", "ssl.client.auth=required", "--set", "super.users=User:CN=broker")
				admin = []kgo.Opt{kgo.DialTLSConfig(tlsCfg("broker-chain.pem", "broker.key"))}
				alice = []kgo.Opt{kgo.DialTLSConfig(tlsCfg("client.pem", "client.key"))}
				alicePrincipal = "User:CN=client-app"
			}
			b := &broker{t: t, dataDir: t.TempDir(), addr: addr, logs: new(bytes.Buffer), args: args, opts: admin}
			b.start()
			t.Cleanup(func() {
				b.kill()
				if t.Failed() {
					out := b.logText()
					if len(out) > 20000 {
						out = "..." + out[len(out)-20000:]
					}
					t.Logf("broker log:\n%s", out)
				}
			})
			superUser := strings.Split(strings.Join(args, " "), "super.users=")[1]
			if log := b.logText(); !strings.Contains(log, "inter_broker_principal="+superUser) && !strings.Contains(log, `inter_broker_principal="`+superUser+`"`) {
				t.Fatalf("the ready line does not name the inter-broker principal %s", superUser)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()

			// The broker's principal (a super user) sets up; alice gets
			// only what she needs.
			adm := kadm.NewClient(b.client())
			if _, err := adm.CreateTopic(ctx, 1, 1, nil, "images"); err != nil {
				t.Fatal(err)
			}
			if r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"errors.deadletterqueue.group.enable": kadm.StringPtr("true")}, "dlq.images"); err != nil || r.Err != nil {
				t.Fatalf("create dlq.images: %v %v", err, r.Err)
			}
			setGroupConfigs(t, b.client(), "thumbnails", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.images")
			acls := kadm.NewACLs().Allow(alicePrincipal).AllowHosts("*").
				Topics("images", "dlq.images").Groups("thumbnails").Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe)
			if res, err := adm.CreateACLs(ctx, acls); err != nil {
				t.Fatal(err)
			} else {
				for _, r := range res {
					if r.Err != nil {
						t.Fatalf("create ACL: %v", r.Err)
					}
				}
			}

			prod := b.client(append([]kgo.Opt{kgo.DefaultProduceTopic("images")}, alice...)...)
			for _, v := range []string{"ok-1", "bad", "ok-2"} {
				if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
					t.Fatalf("alice produces %s: %v", v, err)
				}
			}
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "elsewhere", Value: []byte("x")}).FirstErr(); err == nil {
				t.Fatal("alice produced to a topic her ACLs do not name")
			}

			worker := b.client(append([]kgo.Opt{kgo.ShareGroup("thumbnails"), kgo.ConsumeTopics("images")}, alice...)...)
			handled := map[string]bool{}
			var letters []*kgo.Record
			reader := b.client(append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"dlq.images": {0: kgo.NewOffset().AtStart()}}),
				kgo.FetchMaxWait(200 * time.Millisecond)}, alice...)...)
			testwait.For(t, 60*time.Second, func() bool {
				pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
				worker.PollRecords(pctx, 10).EachRecord(func(r *kgo.Record) {
					handled[string(r.Value)] = true
					if string(r.Value) == "bad" {
						r.Ack(kgo.AckReject)
					} else {
						r.Ack(kgo.AckAccept)
					}
				})
				pcancel()
				rctx, rcancel := context.WithTimeout(ctx, 300*time.Millisecond)
				letters = append(letters, reader.PollFetches(rctx).Records()...)
				rcancel()
				return len(letters) > 0
			}, "no dead letter written (handled %v)", handled)
			if len(letters) != 1 || string(letters[0].Value) != "" && string(letters[0].Value) != "bad" {
				t.Fatalf("dead letters: %d, first %q", len(letters), letters[0].Value)
			}
			found := false
			for _, h := range letters[0].Headers {
				found = found || h.Key == "__dlq.errors.offset" && string(h.Value) == "1"
			}
			if !found {
				t.Fatalf("the dead letter is not record 1's: %+v", letters[0].Headers)
			}
			if strings.Contains(b.logText(), "dead letters wait") {
				t.Fatal("the dead-letter writer was refused at least once")
			}

			// Nobody else gets in: an unauthenticated describe is refused
			// by ACLs only if it connects at all -- on this listener it
			// cannot even connect without credentials.
			req := kmsg.NewPtrMetadataRequest()
			anonCtx, anonCancel := context.WithTimeout(ctx, 3*time.Second)
			defer anonCancel()
			anon, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsCfg("", "")))
			if err != nil {
				t.Fatal(err)
			}
			defer anon.Close()
			if _, err := req.RequestWith(anonCtx, anon); err == nil {
				t.Fatal("a client without credentials was served")
			}
		})
	}
}

// TestInterBrokerIdentityCluster: three brokers whose Kafka listener is
// SASL_SSL only, ACLs on, only User:broker a super user. A transaction
// over three partitions led by different brokers commits: its
// coordinator writes the markers of the partitions other brokers lead
// through its own client, authenticated as the broker (SCRAM-SHA-512, the
// user created by the brokers at start), and a read_committed consumer
// sees every record. Not in -short.
func TestInterBrokerIdentityCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three brokers: not in -short")
	}
	dir := t.TempDir()
	ca := writeCerts(t, dir)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	tlsCfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	// The listener keeps the harness's name, PLAINTEXT, with the
	// SASL_SSL protocol.
	c := startChaosClusterTLS(t, 3, 500*time.Millisecond, tlsCfg,
		"--set", "listener.security.protocol.map=PLAINTEXT:SASL_SSL",
		"--set", "ssl.keystore.location="+filepath.Join(dir, "broker.pem"),
		"--set", "ssl.truststore.location="+filepath.Join(dir, "ca.pem"),
		"--set", "listener.name.plaintext.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
		"--set", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
		"--set", `listener.name.plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
		"--set", `listener.name.plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`,
		"--set", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"--set", "super.users=User:broker")
	admin := []kgo.Opt{kgo.DialTLSConfig(tlsCfg.Clone()), kgo.SASL(scram.Auth{User: "broker", Pass: "broker-secret"}.AsSha512Mechanism())}
	alice := []kgo.Opt{kgo.DialTLSConfig(tlsCfg.Clone()), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The brokers create their SCRAM user at start; until one has, the
	// admin client cannot authenticate.
	var adm *kadm.Client
	testwait.For(t, 60*time.Second, func() bool {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.bootstrap()...), kgo.RequestRetries(0)}, admin...)...)
		if err != nil {
			return false
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		if cl.Ping(pctx) != nil {
			cl.Close()
			return false
		}
		cl.Close()
		return true
	}, "the broker's own SCRAM user never worked")
	adm = kadm.NewClient(c.client(admin...))
	if r, err := adm.CreateTopic(ctx, 3, 3, nil, "events"); err != nil || r.Err != nil {
		t.Fatalf("create events: %v %v", err, r.Err)
	}
	// Every partition led (the harness's waitLeaders asks each broker
	// over PLAINTEXT; here the admin client asks).
	var leaders []int32
	testwait.For(t, 60*time.Second, func() bool {
		mctx, mcancel := context.WithTimeout(ctx, 2*time.Second)
		defer mcancel()
		md, err := adm.Metadata(mctx, "events")
		if err != nil {
			return false
		}
		td, ok := md.Topics["events"]
		if !ok || td.Err != nil || len(td.Partitions) != 3 {
			return false
		}
		leaders = leaders[:0]
		for p := int32(0); p < 3; p++ {
			pd, ok := td.Partitions[p]
			if !ok || pd.Leader < 0 || pd.Err != nil {
				return false
			}
			leaders = append(leaders, pd.Leader)
		}
		return true
	}, "events has partitions without a leader")
	t.Logf("leaders of events: %v", leaders)
	acls := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("events").TransactionalIDs("tx").
		Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe)
	if res, err := adm.CreateACLs(ctx, acls); err != nil {
		t.Fatal(err)
	} else {
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("create ACL: %v", r.Err)
			}
		}
	}
	// ACLs reach every broker through the metadata: wait until each
	// lists them.
	for id := int32(1); id <= 3; id++ {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.node(id).kafka), kgo.RequestRetries(0)}, admin...)...)
		if err != nil {
			t.Fatal(err)
		}
		nodeAdm := kadm.NewClient(cl)
		testwait.For(t, 30*time.Second, func() bool {
			dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
			defer dcancel()
			d, err := nodeAdm.DescribeACLs(dctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
			if err != nil || len(d) == 0 || d[0].Err != nil {
				return false
			}
			n := 0
			for _, r := range d {
				n += len(r.Described)
			}
			return n >= 6
		}, "broker %d does not list alice's ACLs", id)
		cl.Close()
	}
	prod := c.client(append([]kgo.Opt{kgo.TransactionalID("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner())}, alice...)...)
	var committed error
	if !testwait.Until(60*time.Second, func() bool {
		if err := prod.BeginTransaction(); err != nil {
			committed = err
			return false
		}
		for p := int32(0); p < 3; p++ {
			prod.Produce(ctx, &kgo.Record{Topic: "events", Partition: p, Value: []byte{byte('a' + p)}}, nil)
		}
		if committed = prod.Flush(ctx); committed == nil {
			committed = prod.EndTransaction(ctx, kgo.TryCommit)
		}
		if committed != nil {
			prod.AbortBufferedRecords(ctx)
			prod.EndTransaction(ctx, kgo.TryAbort)
		}
		return committed == nil
	}) {
		t.Fatalf("the transaction never committed: %v", committed)
	}
	reader := c.client(append([]kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"events": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}})}, alice...)...)
	got := map[int32]string{}
	var fetchErr error
	if !testwait.Until(60*time.Second, func() bool {
		rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := reader.PollFetches(rctx)
		rcancel()
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = string(r.Value) })
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				fetchErr = e.Err
			}
		}
		return len(got) == 3
	}) {
		t.Fatalf("read_committed saw %v of the 3 partitions (their markers not written; leaders %v; last fetch error %v)", got, leaders, fetchErr)
	}
	for id := int32(1); id <= 3; id++ {
		if strings.Contains(fileTail(c.node(id).log, 1<<20), "transaction marker") && strings.Contains(fileTail(c.node(id).log, 1<<20), "SASL_AUTHENTICATION_FAILED") {
			t.Errorf("broker %d logged a refused marker write", id)
		}
	}
}
