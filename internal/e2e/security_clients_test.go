package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSecurityKcat produces and consumes with kcat (librdkafka) over
// SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and SSL with a client
// certificate, and sees a wrong password refused.
func TestSecurityKcat(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	kcat := needTool(t, "kcat")
	sb := startSecureBroker(t)
	sb.addScramUser(t, scramUser, scramPass)
	ca := filepath.Join(sb.dir, "ca.pem")
	cases := []struct {
		name string
		addr string
		x    []string
	}{
		{"SASL_SSL PLAIN", sb.saslSSL, []string{"security.protocol=SASL_SSL", "sasl.mechanisms=PLAIN", "sasl.username=" + plainUser, "sasl.password=" + plainPass, "ssl.ca.location=" + ca}},
		{"SASL_SSL SCRAM-SHA-256", sb.saslSSL, []string{"security.protocol=SASL_SSL", "sasl.mechanisms=SCRAM-SHA-256", "sasl.username=" + scramUser, "sasl.password=" + scramPass, "ssl.ca.location=" + ca}},
		{"SASL_SSL SCRAM-SHA-512", sb.saslSSL, []string{"security.protocol=SASL_SSL", "sasl.mechanisms=SCRAM-SHA-512", "sasl.username=" + scramUser, "sasl.password=" + scramPass, "ssl.ca.location=" + ca}},
		{"SSL mTLS", sb.ssl, []string{"security.protocol=SSL", "ssl.ca.location=" + ca,
			"ssl.certificate.location=" + filepath.Join(sb.dir, "client.pem"), "ssl.key.location=" + filepath.Join(sb.dir, "client.key")}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := "kcat-sec-" + strconv.Itoa(i)
			args := func(mode ...string) []string {
				a := []string{"-b", c.addr}
				for _, x := range c.x {
					a = append(a, "-X", x)
				}
				return append(a, mode...)
			}
			var in strings.Builder
			for j := range 100 {
				in.WriteString("k" + strconv.Itoa(j) + ":v" + strconv.Itoa(j) + "\n")
			}
			run(t, time.Minute, in.String(), kcat, args("-P", "-t", topic, "-K", ":", "-X", "enable.idempotence=true")...)
			out := run(t, time.Minute, "", kcat, args("-C", "-q", "-t", topic, "-o", "beginning", "-e", "-f", "%k %s\n")...)
			if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != 100 || !strings.Contains(out, "k99 v99") {
				t.Fatalf("consumed %d lines:\n%s", n, out)
			}
		})
	}
	t.Run("wrong password", func(t *testing.T) {
		out, err := runErr(t, 30*time.Second, kcat, "-b", sb.saslSSL, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-256",
			"-X", "sasl.username="+scramUser, "-X", "sasl.password=wrong", "-X", "ssl.ca.location="+ca, "-L", "-m", "10")
		if err == nil || !strings.Contains(out, "Authentication failed") {
			t.Fatalf("kcat with a wrong password: err=%v\n%s", err, out)
		}
	})
}

// TestSecurityPythonConfluent does the same with confluent-kafka-python
// (testdata/security_confluent.py).
func TestSecurityPythonConfluent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	forEachPython(t, "confluent_kafka", func(t *testing.T, py string) {
		sb := startSecureBroker(t)
		sb.addScramUser(t, scramUser, scramPass)
		ca := filepath.Join(sb.dir, "ca.pem")
		for _, c := range []struct {
			name string
			args []string
			want string
		}{
			{"SASL_SSL PLAIN", []string{sb.saslSSL, "py-plain", "SASL_SSL", ca, "PLAIN", plainUser, plainPass}, "ok 500"},
			{"SASL_SSL SCRAM-SHA-256", []string{sb.saslSSL, "py-scram256", "SASL_SSL", ca, "SCRAM-SHA-256", scramUser, scramPass}, "ok 500"},
			{"SASL_SSL SCRAM-SHA-512", []string{sb.saslSSL, "py-scram512", "SASL_SSL", ca, "SCRAM-SHA-512", scramUser, scramPass}, "ok 500"},
			{"SASL_PLAINTEXT SCRAM-SHA-512", []string{sb.saslPlain, "py-scram512-plain", "SASL_PLAINTEXT", ca, "SCRAM-SHA-512", scramUser, scramPass}, "ok 500"},
			{"SSL mTLS", []string{sb.ssl, "py-mtls", "SSL", ca, filepath.Join(sb.dir, "client.pem"), filepath.Join(sb.dir, "client.key")}, "ok 500"},
			{"wrong password", []string{sb.saslSSL, "py-wrong", "SASL_SSL", ca, "SCRAM-SHA-256", scramUser, "wrong"}, "refused"},
		} {
			t.Run(c.name, func(t *testing.T) {
				out := run(t, 2*time.Minute, "", py, append([]string{"testdata/security_confluent.py"}, c.args...)...)
				if !strings.Contains(out, c.want) {
					t.Fatalf("want %q:\n%s", c.want, out)
				}
			})
		}
	})
}

// runErr runs a command that may fail, returning its output and error.
func runErr(t *testing.T, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
