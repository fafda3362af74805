package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-io/strata/internal/auth"
)

// secureCluster is one broker with PLAINTEXT, SASL_SSL, SSL (mTLS) and
// SASL_PLAINTEXT listeners, certificates from a CA made for the test.
type secureBroker struct {
	*broker
	saslSSL, ssl, saslPlain string // listener addresses
	dir                     string // certificates
	ca                      *auth.CA
	pool                    *x509.CertPool
}

const (
	plainUser, plainPass = "alice", "alice-secret"
	scramUser, scramPass = "bob", "bob-secret"
)

// writeCerts makes a CA, a broker certificate for 127.0.0.1/localhost and
// a client certificate, as PEM files in dir: ca.pem, broker.pem (a PEM
// keystore: key and chain), client.pem, client.key.
func writeCerts(t testing.TB, dir string) *auth.CA {
	t.Helper()
	ca, err := auth.NewCA("strata-test-ca", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	br, err := ca.Issue("broker", []string{"127.0.0.1", "localhost"}, nil, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := ca.Issue("client-app", nil, nil, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"ca.pem": ca.CertPEM(), "broker.pem": br.KeystorePEM(ca), "broker-chain.pem": br.ChainPEM(ca), "broker.key": br.KeyPEM(),
		"client.pem": cl.ChainPEM(ca), "client.key": cl.KeyPEM(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca
}

func startSecureBroker(t testing.TB, extra ...string) *secureBroker {
	t.Helper()
	dir := t.TempDir()
	ca := writeCerts(t, dir)
	sb := &secureBroker{dir: dir, ca: ca, pool: x509.NewCertPool(),
		saslSSL: freeAddr(t), ssl: freeAddr(t), saslPlain: freeAddr(t)}
	sb.pool.AddCert(ca.Cert)
	plainAddr := freeAddr(t)
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_` + plainUser + `="` + plainPass + `";`
	args := append([]string{
		"--set", "listeners=PLAINTEXT://" + plainAddr + ",SASL_SSL://" + sb.saslSSL + ",SSL://" + sb.ssl + ",SASL_PLAINTEXT://" + sb.saslPlain,
		"--set", "ssl.keystore.location=" + filepath.Join(dir, "broker.pem"),
		"--set", "listener.name.ssl.ssl.client.auth=required",
		"--set", "listener.name.ssl.ssl.truststore.location=" + filepath.Join(dir, "ca.pem"),
		"--set", "listener.name.sasl_ssl.plain.sasl.jaas.config=" + jaas,
		"--set", "listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"--set", "listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-512",
	}, extra...)
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
	sb.broker = b
	return sb
}

func (sb *secureBroker) tlsConfig(clientCert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: sb.pool, MinVersion: tls.VersionTLS12}
	if clientCert {
		c, err := tls.LoadX509KeyPair(filepath.Join(sb.dir, "client.pem"), filepath.Join(sb.dir, "client.key"))
		if err != nil {
			sb.t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

// addScramUser creates user with both SCRAM mechanisms through the
// PLAINTEXT listener.
func (sb *secureBroker) addScramUser(t testing.TB, user, pass string) {
	t.Helper()
	adm := kadm.NewClient(sb.client())
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: pass},
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: pass},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
}

// roundTrip produces and consumes one record through cl on a new topic.
func roundTrip(t *testing.T, cl *kgo.Client, topic string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("secret-" + topic)}).FirstErr(); err != nil {
		return err
	}
	cl.AddConsumeTopics(topic)
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, e := range fs.Errors() {
			return e.Err
		}
		for _, r := range fs.Records() {
			if string(r.Value) != "secret-"+topic {
				t.Fatalf("read %q", r.Value)
			}
			return nil
		}
	}
}

func TestSecurityListeners(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	sb := startSecureBroker(t)
	sb.addScramUser(t, scramUser, scramPass)

	client := func(addr string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.RetryTimeout(5 * time.Second), kgo.RequestRetries(2)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	tlsOpt := func(clientCert bool) kgo.Opt {
		return kgo.Dialer((&tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: sb.tlsConfig(clientCert)}).DialContext)
	}

	t.Run("SASL_SSL PLAIN", func(t *testing.T) {
		cl := client(sb.saslSSL, tlsOpt(false), kgo.SASL(plain.Auth{User: plainUser, Pass: plainPass}.AsMechanism()))
		if err := roundTrip(t, cl, "sasl-ssl-plain"); err != nil {
			t.Fatal(err)
		}
		// Metadata on this listener names this listener's address.
		adm := kadm.NewClient(cl)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := md.Brokers[0].Host + ":" + strconv.Itoa(int(md.Brokers[0].Port)); got != sb.saslSSL {
			t.Fatalf("metadata on the SASL_SSL listener names %s, want %s", got, sb.saslSSL)
		}
	})
	t.Run("SASL_SSL SCRAM-SHA-256", func(t *testing.T) {
		cl := client(sb.saslSSL, tlsOpt(false), kgo.SASL(scram.Auth{User: scramUser, Pass: scramPass}.AsSha256Mechanism()))
		if err := roundTrip(t, cl, "sasl-ssl-scram256"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("SASL_SSL SCRAM-SHA-512", func(t *testing.T) {
		cl := client(sb.saslSSL, tlsOpt(false), kgo.SASL(scram.Auth{User: scramUser, Pass: scramPass}.AsSha512Mechanism()))
		if err := roundTrip(t, cl, "sasl-ssl-scram512"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("SASL_PLAINTEXT SCRAM-SHA-512", func(t *testing.T) {
		cl := client(sb.saslPlain, kgo.SASL(scram.Auth{User: scramUser, Pass: scramPass}.AsSha512Mechanism()))
		if err := roundTrip(t, cl, "sasl-plaintext-scram512"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("SSL mTLS", func(t *testing.T) {
		cl := client(sb.ssl, tlsOpt(true))
		if err := roundTrip(t, cl, "ssl-mtls"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("SSL without a client certificate refused", func(t *testing.T) {
		cl := client(sb.ssl, tlsOpt(false))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.Ping(ctx); err == nil {
			t.Fatal("a client without a certificate was served on the mTLS listener")
		}
	})
	wrong := []struct {
		name string
		mech kgo.Opt
	}{
		{"PLAIN wrong password", kgo.SASL(plain.Auth{User: plainUser, Pass: "nope"}.AsMechanism())},
		{"PLAIN unknown user", kgo.SASL(plain.Auth{User: "mallory", Pass: "nope"}.AsMechanism())},
		{"SCRAM-SHA-256 wrong password", kgo.SASL(scram.Auth{User: scramUser, Pass: "nope"}.AsSha256Mechanism())},
		{"SCRAM-SHA-512 unknown user", kgo.SASL(scram.Auth{User: "mallory", Pass: "nope"}.AsSha512Mechanism())},
	}
	for _, w := range wrong {
		t.Run(w.name, func(t *testing.T) {
			cl := client(sb.saslSSL, tlsOpt(false), w.mech)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := cl.Ping(ctx)
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("got %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
	t.Run("PLAIN not enabled on SASL_PLAINTEXT", func(t *testing.T) {
		cl := client(sb.saslPlain, kgo.SASL(plain.Auth{User: plainUser, Pass: plainPass}.AsMechanism()))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.Ping(ctx); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
			t.Fatalf("got %v, want UNSUPPORTED_SASL_MECHANISM", err)
		}
	})
	t.Run("unauthenticated requests close the connection", func(t *testing.T) {
		// ApiVersions is answered; Metadata before SaslAuthenticate closes.
		conn, err := tls.Dial("tcp", sb.saslSSL, sb.tlsConfig(false))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version = 3
		av.ClientSoftwareName, av.ClientSoftwareVersion = "probe", "1"
		if resp := rawRequest(t, conn, av, 1); resp == nil {
			t.Fatal("ApiVersions before authentication was not answered")
		}
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 12
		if resp := rawRequest(t, conn, md, 2); resp != nil {
			t.Fatalf("Metadata before authentication was answered (%d bytes)", len(resp))
		}
		// And a client without SASL on the SASL listener gets nothing.
		cl := client(sb.saslSSL, tlsOpt(false))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := kadm.NewClient(cl).ListTopics(ctx); err == nil {
			t.Fatal("a client without SASL listed topics on the SASL_SSL listener")
		}
	})
	t.Run("DescribeUserScramCredentials", func(t *testing.T) {
		adm := kadm.NewClient(sb.client())
		defer adm.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := adm.DescribeUserSCRAMs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		u, ok := d[scramUser]
		if !ok || len(u.CredInfos) != 2 || u.CredInfos[0].Iterations != 4096 || u.CredInfos[1].Iterations != 8192 {
			t.Fatalf("described %+v", d)
		}
		// Deleted users can no longer log in.
		res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: scramUser, Mechanism: kadm.ScramSha256}}, nil)
		if err != nil || res.Error() != nil {
			t.Fatalf("delete: %v %v", err, res.Error())
		}
		cl := client(sb.saslSSL, tlsOpt(false), kgo.SASL(scram.Auth{User: scramUser, Pass: scramPass}.AsSha256Mechanism()))
		if err := cl.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("deleted credential: got %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})
	// The SCRAM credential survives a restart (replicated metadata).
	t.Run("credentials survive a restart", func(t *testing.T) {
		sb.restart()
		cl := client(sb.saslSSL, tlsOpt(false), kgo.SASL(scram.Auth{User: scramUser, Pass: scramPass}.AsSha512Mechanism()))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := cl.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if logs := sb.logText(); strings.Contains(logs, scramPass) || strings.Contains(logs, plainPass) {
		t.Fatal("a password appears in the broker's log")
	}
}

// rawRequest sends req on conn and returns the response body, or nil if
// the connection closed instead.
func rawRequest(t *testing.T, conn net.Conn, req kmsg.Request, corr int32) []byte {
	t.Helper()
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 5)
	b = append(b, "probe"...)
	if req.IsFlexible() && req.Key() != 18 {
		b = append(b, 0)
	} else if req.Key() == 18 && req.GetVersion() >= 3 {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
	if _, err := conn.Write(append(frame, b...)); err != nil {
		return nil
	}
	var sz [4]byte
	if _, err := io.ReadFull(conn, sz[:]); err != nil {
		return nil
	}
	resp := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(conn, resp); err != nil {
		return nil
	}
	return resp
}
