package main

import (
	"crypto/tls"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/auth"
)

func TestSecurityConfig(t *testing.T) {
	dir := t.TempDir()
	ca, err := auth.NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	br, err := ca.Issue("broker", []string{"127.0.0.1"}, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ks := filepath.Join(dir, "broker.pem")
	os.WriteFile(ks, br.KeystorePEM(ca), 0o600)
	caFile := filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, ca.CertPEM(), 0o600)
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="pw" user_admin="pw" user_alice="a\"b";`

	cfg, _, err := loadConfig([]string{
		"--set", "listeners=EXTERNAL://127.0.0.1:9093,INTERNAL://127.0.0.1:9092,MTLS://127.0.0.1:9094",
		"--set", "advertised.listeners=EXTERNAL://kafka.example.com:9093,INTERNAL://10.0.0.1:9092,MTLS://kafka.example.com:9094",
		"--set", "listener.security.protocol.map=EXTERNAL:SASL_SSL,INTERNAL:PLAINTEXT,MTLS:SSL",
		"--set", "inter.broker.listener.name=INTERNAL",
		"--set", "ssl.keystore.location=" + ks,
		"--set", "listener.name.mtls.ssl.client.auth=required",
		"--set", "listener.name.mtls.ssl.truststore.location=" + caFile,
		"--set", "listener.name.external.plain.sasl.jaas.config=" + jaas,
		"--set", "ssl.keystore.password=hunter2",
	}, nil, files(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ls := cfg.Security.Listeners
	if len(ls) != 3 || ls[0].Name != "INTERNAL" || cfg.Listener.Port != 9092 || cfg.Advertised.Host != "10.0.0.1" {
		t.Fatalf("inter-broker listener first: %+v", ls)
	}
	byName := map[string]listenerConfig{}
	for _, l := range ls {
		byName[l.Name] = l
	}
	ext := byName["EXTERNAL"]
	if ext.Protocol != "SASL_SSL" || ext.TLS == nil || ext.TLS.ClientAuth != tls.NoClientCert ||
		strings.Join(ext.Mechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" || ext.PlainUsers["alice"] != `a"b` || ext.Advertised.Host != "kafka.example.com" {
		t.Fatalf("EXTERNAL: %+v", ext)
	}
	if m := byName["MTLS"]; m.Protocol != "SSL" || m.TLS == nil || m.TLS.ClientAuth != tls.RequireAndVerifyClientCert || m.TLS.ClientCAs == nil {
		t.Fatalf("MTLS: %+v", m)
	}
	if got := cfg.Security.endpointsString([]int{9092, 9093, 9094}); got != "EXTERNAL://kafka.example.com:9093,INTERNAL://10.0.0.1:9092,MTLS://kafka.example.com:9094" {
		t.Fatalf("endpoints %q", got)
	}
	for k := range cfg.BrokerProps {
		if sensitiveSetting(k) {
			t.Fatalf("secret %s kept for DescribeConfigs", k)
		}
	}
	if _, ok := cfg.BrokerProps["ssl.keystore.location"]; !ok {
		t.Fatal("a non-secret ssl setting is missing from BrokerProps")
	}

	errs := []struct {
		name string
		args []string
		want []string
	}{
		{"JKS refused", []string{"--listeners", "SSL://127.0.0.1:1", "--set", "ssl.keystore.type=JKS", "--set", "ssl.keystore.location=" + ks}, []string{"JKS", "PKCS12"}},
		{"GSSAPI refused", []string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:1", "--set", "sasl.enabled.mechanisms=GSSAPI"}, []string{"GSSAPI", "sasl.enabled.mechanisms"}},
		{"PLAIN without users", []string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:1", "--set", "sasl.enabled.mechanisms=PLAIN"}, []string{"PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config"}},
		{"unknown protocol", []string{"--listeners", "FOO://127.0.0.1:1"}, []string{"listener.security.protocol.map", "FOO"}},
		{"bad client auth", []string{"--listeners", "SSL://127.0.0.1:1", "--set", "ssl.keystore.location=" + ks, "--set", "ssl.client.auth=maybe"}, []string{"ssl.client.auth"}},
		{"mTLS without truststore", []string{"--listeners", "SSL://127.0.0.1:1", "--set", "ssl.keystore.location=" + ks, "--set", "ssl.client.auth=required"}, []string{"ssl.truststore.location"}},
		{"bad JAAS", []string{"--listeners", "SASL_SSL://127.0.0.1:1", "--set", "ssl.keystore.location=" + ks, "--set", "listener.name.sasl_ssl.plain.sasl.jaas.config=nope"}, []string{"listener.name.sasl_ssl.plain.sasl.jaas.config"}},
		{"inter-broker listener unknown", []string{"--set", "inter.broker.listener.name=NOPE"}, []string{"inter.broker.listener.name"}},
		{"advertised names an unknown listener", []string{"--set", "advertised.listeners=PLAINTEXT://h:1,SSL://h:2"}, []string{"advertised.listeners", "SSL"}},
		{"SASL inter-broker listener without the broker's credentials", []string{"--listeners", "SASL_SSL://127.0.0.1:1", "--set", "ssl.keystore.location=" + ks,
			"--set", "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_admin=\"pw\";"},
			[]string{"inter-broker listener SASL_SSL", "username and password", "listener.name.sasl_ssl.plain.sasl.jaas.config"}},
		{"broker's PLAIN user unknown to the listener", []string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:1",
			"--set", "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"broker\" password=\"pw\" user_admin=\"pw\";"},
			[]string{"broker", "user_broker"}},
		{"inter-broker mechanism not enabled", []string{"--listeners", "SASL_PLAINTEXT://127.0.0.1:1", "--set", "sasl.enabled.mechanisms=SCRAM-SHA-512",
			"--set", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256"}, []string{"SCRAM-SHA-256", "does not enable"}},
		{"both ways to name the inter-broker listener", []string{"--set", "inter.broker.listener.name=PLAINTEXT", "--set", "security.inter.broker.protocol=PLAINTEXT"},
			[]string{"security.inter.broker.protocol", "not both"}},
		{"security.inter.broker.protocol without that listener", []string{"--set", "security.inter.broker.protocol=SSL"}, []string{"security.inter.broker.protocol", "SSL"}},
		{"unknown per-listener setting", []string{"--set", "listener.name.x.nope=1"}, []string{"listener.name.x.nope"}},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := loadConfig(tt.args, nil, files(nil), io.Discard)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not mention %q", err, w)
				}
			}
		})
	}
}

// The inter-broker listener may be secured, as in Kafka: Strata's own
// clients then speak its protocol, with the listener's keystore as their
// certificate (SSL: the principal is its subject) or with
// sasl.mechanism.inter.broker.protocol and the username and password of
// the listener's JAAS setting (SASL: User:<username>).
func TestInterBrokerClientIdentity(t *testing.T) {
	dir := t.TempDir()
	ca, err := auth.NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	br, err := ca.Issue("broker", []string{"127.0.0.1"}, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ks := filepath.Join(dir, "broker.pem")
	os.WriteFile(ks, br.KeystorePEM(ca), 0o600)
	caFile := filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, ca.CertPEM(), 0o600)

	cfg, _, err := loadConfig([]string{"--listeners", "SSL://127.0.0.1:1", "--set", "ssl.keystore.location=" + ks,
		"--set", "ssl.truststore.location=" + caFile, "--set", "ssl.client.auth=required"}, nil, files(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ib := cfg.Security.InterBroker
	if ib.Protocol != "SSL" || ib.TLS == nil || ib.TLS.RootCAs == nil || len(ib.TLS.Certificates) != 1 || ib.Mechanism != "" ||
		ib.Principal != "User:CN=broker" || len(ib.opts()) != 1 {
		t.Fatalf("SSL: %+v", ib)
	}

	cfg, _, err = loadConfig([]string{"--listeners", "INTERNAL://127.0.0.1:1,PLAINTEXT://127.0.0.1:2",
		"--set", "listener.security.protocol.map=INTERNAL:SASL_SSL,PLAINTEXT:PLAINTEXT",
		"--set", "security.inter.broker.protocol=PLAINTEXT"}, nil, files(nil), io.Discard)
	if err == nil {
		t.Fatal("SASL_SSL without a keystore accepted")
	}
	cfg, _, err = loadConfig([]string{"--listeners", "INTERNAL://127.0.0.1:1,PLAINTEXT://127.0.0.1:2",
		"--set", "listener.security.protocol.map=INTERNAL:SASL_SSL,PLAINTEXT:PLAINTEXT",
		"--set", "inter.broker.listener.name=INTERNAL", "--set", "ssl.keystore.location=" + ks,
		"--set", "listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN",
		"--set", "listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"a\";",
		"--set", "listener.name.internal.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\" password=\"broker-secret\";",
	}, nil, files(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ib = cfg.Security.InterBroker
	if cfg.Security.Listeners[0].Name != "INTERNAL" || ib.Protocol != "SASL_SSL" || ib.TLS == nil || ib.Mechanism != "SCRAM-SHA-512" ||
		ib.User != "broker" || ib.Principal != "User:broker" || len(ib.opts()) != 2 {
		t.Fatalf("SASL_SSL: %+v", ib)
	}
	for k := range cfg.BrokerProps {
		if strings.Contains(k, "jaas") {
			t.Fatalf("the broker's password kept for DescribeConfigs in %s", k)
		}
	}

	cfg, _, err = loadConfig(nil, nil, files(nil), io.Discard)
	if err != nil || cfg.Security.InterBroker.Protocol != "PLAINTEXT" || cfg.Security.InterBroker.Principal != "User:ANONYMOUS" || cfg.Security.InterBroker.opts() != nil {
		t.Fatalf("default: %v %+v", err, cfg.Security.InterBroker)
	}
}
