package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-io/strata/internal/testwait"
)

// TestSecuringReadme follows README's "Securing a cluster" with the
// strata binary: strata certs, the server.properties shown (on free
// ports), strata user set/list, kcat over SASL_SSL SCRAM-SHA-512 and mTLS;
// and step 5's replication settings on this broker as a one-voter quorum
// (TestReplicationMTLS runs them on three brokers); step 6's ACLs
// (strata acl add/list/remove, alice allowed greetings and refused
// another topic, app1 reading with its certificate's principal); step 8's
// quotas (strata quota set/list/remove as written, then alice's SASL
// principal throttled under a user quota).
func TestSecuringReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	kcat := needTool(t, "kcat")
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	strata := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(strataBin, args...)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("strata %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	strata("", "certs", "ca", "--dir", "certs")
	strata("", "certs", "issue", "--dir", "certs", "--name", "broker1", "--host", "localhost,127.0.0.1")
	strata("", "certs", "issue", "--dir", "certs", "--name", "app1")
	if out := strata("", "certs", "issue", "--dir", "certs", "--node-id", "1"); !strings.Contains(out, "node-1.pem") {
		t.Fatalf("strata certs issue --node-id 1:\n%s", out)
	}
	internal, clients, mtls, rep := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	props := "node.id=1\nlog.dirs=" + filepath.Join(dir, "data") + "\n" +
		"listeners=INTERNAL://" + internal + ",CLIENTS://" + clients + ",MTLS://" + mtls + "\n" +
		"listener.security.protocol.map=INTERNAL:PLAINTEXT,CLIENTS:SASL_SSL,MTLS:SSL\n" +
		"inter.broker.listener.name=INTERNAL\n" +
		"ssl.keystore.location=" + filepath.Join(certs, "broker1.pem") + "\n" +
		"listener.name.clients.sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256\n" +
		"listener.name.mtls.ssl.client.auth=required\n" +
		"listener.name.mtls.ssl.truststore.location=" + filepath.Join(certs, "ca.pem") + "\n" +
		"controller.quorum.voters=1@" + rep + "\n" +
		"replication.security.protocol=SSL\n" +
		"replication.ssl.keystore.location=" + filepath.Join(certs, "node-1.pem") + "\n" +
		"replication.ssl.truststore.location=" + filepath.Join(certs, "ca.pem") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "server.properties"), []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	// The harness passes listeners and log.dirs as flags: the same values.
	b := &broker{t: t, dataDir: filepath.Join(dir, "data"), addr: internal, logs: new(bytes.Buffer),
		args: []string{"--config", filepath.Join(dir, "server.properties"),
			"--set", "listeners=INTERNAL://" + internal + ",CLIENTS://" + clients + ",MTLS://" + mtls}}
	b.start()
	t.Cleanup(func() {
		b.kill()
		if t.Failed() {
			t.Logf("broker log:\n%s", b.logText())
		}
	})
	strata("alice-secret\n", "user", "set", "alice", "--bootstrap-server", internal)
	if out := strata("", "user", "list", "--bootstrap-server", internal); !strings.Contains(out, "alice SCRAM-SHA-256(iterations=8192) SCRAM-SHA-512(iterations=8192)") {
		t.Fatalf("strata user list:\n%s", out)
	}
	ca := filepath.Join(certs, "ca.pem")
	run(t, time.Minute, "hello\n", kcat, "-b", clients, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-X", "ssl.ca.location="+ca, "-P", "-t", "greetings")
	out := run(t, time.Minute, "", kcat, "-b", mtls, "-X", "security.protocol=SSL", "-X", "ssl.ca.location="+ca,
		"-X", "ssl.certificate.location="+filepath.Join(certs, "app1.crt"), "-X", "ssl.key.location="+filepath.Join(certs, "app1.key"),
		"-C", "-t", "greetings", "-o", "beginning", "-e", "-q")
	if strings.TrimSpace(out) != "hello" {
		t.Fatalf("consumed %q", out)
	}
	// The replication listener speaks TLS only: a plaintext peer is
	// refused and logged.
	if !sendReplication(t, rep, replPreface(2, 0, "1"), nil) {
		t.Fatal("a plaintext replication connection was kept open")
	}
	testwait.For(t, 10*time.Second, func() bool { return strings.Contains(b.logText(), "raft transport: TLS handshake failed") },
		"no log line for the plaintext replication connection")
	// Step 6: ACLs on, the INTERNAL listener's User:ANONYMOUS a super user.
	f, err := os.OpenFile(filepath.Join(dir, "server.properties"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\nsuper.users=User:ANONYMOUS\n")
	f.Close()
	b.restart()
	strata("", "acl", "add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "greetings", "--bootstrap-server", internal)
	strata("", "acl", "add", "--allow-principal", "User:CN=app1", "--operation", "Read", "--topic", "greetings", "--bootstrap-server", internal)
	strata("", "acl", "add", "--allow-principal", "User:CN=app1", "--operation", "Read", "--group", "greeters", "--bootstrap-server", internal)
	if out := strata("", "acl", "list", "--bootstrap-server", internal); !strings.Contains(out, "TOPIC:LITERAL:greetings\tUser:alice\t*\tALLOW\tWRITE") ||
		!strings.Contains(out, "GROUP:LITERAL:greeters\tUser:CN=app1\t*\tALLOW\tREAD") {
		t.Fatalf("strata acl list:\n%s", out)
	}
	if out := strata("", "acl", "remove", "--allow-principal", "User:CN=app1", "--operation", "Read", "--group", "greeters", "--bootstrap-server", internal); !strings.Contains(out, "removed GROUP:LITERAL:greeters") {
		t.Fatalf("strata acl remove:\n%s", out)
	}
	aliceKcat := []string{"-b", clients, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-X", "ssl.ca.location=" + ca, "-P"}
	run(t, time.Minute, "again\n", kcat, append(aliceKcat, "-t", "greetings")...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	deny := exec.CommandContext(ctx, kcat, append(aliceKcat, "-t", "secrets")...)
	deny.Stdin = strings.NewReader("psst\n")
	denied, err := deny.CombinedOutput()
	if err == nil || !strings.Contains(strings.ToLower(string(denied)), "topic authorization failed") {
		t.Fatalf("alice's produce to secrets: %v\n%s", err, denied)
	}
	out = run(t, time.Minute, "", kcat, "-b", mtls, "-X", "security.protocol=SSL", "-X", "ssl.ca.location="+ca,
		"-X", "ssl.certificate.location="+filepath.Join(certs, "app1.crt"), "-X", "ssl.key.location="+filepath.Join(certs, "app1.key"),
		"-C", "-t", "greetings", "-o", "beginning", "-e", "-q")
	if strings.Fields(out) == nil || strings.Join(strings.Fields(out), " ") != "hello again" {
		t.Fatalf("app1 consumed %q with ACLs on", out)
	}
	// Step 8: quotas, the README's commands as written.
	strata("", "quota", "set", "--user", "alice", "producer_byte_rate=1048576", "consumer_byte_rate=2097152", "--bootstrap-server", internal)
	strata("", "quota", "set", "--client-id-default", "request_percentage=50", "--bootstrap-server", internal)
	if out := strata("", "quota", "list", "--bootstrap-server", internal); !strings.Contains(out, "user=alice\tconsumer_byte_rate=2097152 producer_byte_rate=1048576") ||
		!strings.Contains(out, "client-id=<default>\trequest_percentage=50") {
		t.Fatalf("strata quota list:\n%s", out)
	}
	strata("", "quota", "remove", "--client-id-default", "request_percentage", "--bootstrap-server", internal)
	if out := strata("", "quota", "list", "--bootstrap-server", internal); strings.Contains(out, "request_percentage") {
		t.Fatalf("strata quota list after remove:\n%s", out)
	}
	// alice's quota applies to her SASL principal: at 10 KiB/s, a
	// 200 KiB record is answered with a throttle time.
	strata("", "quota", "set", "--user", "alice", "producer_byte_rate=10240", "--bootstrap-server", internal)
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(ca)
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("CA: %v", err)
	}
	var throttled atomic.Int64
	alice, err := kgo.NewClient(kgo.SeedBrokers(clients), kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.WithHooks(throttleSeen{&throttled}))
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 200<<10)
	rand.Read(big)
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "greetings", Value: big}).FirstErr(); err != nil {
		t.Fatalf("alice's 200 KiB record: %v", err)
	}
	alice.Close()
	if throttled.Load() <= 0 {
		t.Fatal("alice's 200 KiB record at producer_byte_rate=10240 was not throttled")
	}
	strata("", "user", "delete", "alice", "--bootstrap-server", internal)
	if out := strata("", "user", "list", "--bootstrap-server", internal); strings.Contains(out, "alice") {
		t.Fatalf("alice still listed:\n%s", out)
	}
}

// throttleSeen records the largest throttle time a client is given.
type throttleSeen struct{ ms *atomic.Int64 }

func (h throttleSeen) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d.Milliseconds() > h.ms.Load() {
		h.ms.Store(d.Milliseconds())
	}
}
