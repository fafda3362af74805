package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/auth"
)

// issueCerts makes a CA in dir and, with `strata certs issue`, the
// certificates args name (each a list of flags after issue).
func issueCerts(t *testing.T, dir string, issues ...[]string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := certsCommand([]string{"ca", "--dir", dir}, &out, &errOut); code != exitOK {
		t.Fatalf("certs ca: %d %s", code, errOut.String())
	}
	for _, args := range issues {
		if code := certsCommand(append([]string{"issue", "--dir", dir}, args...), &out, &errOut); code != exitOK {
			t.Fatalf("certs issue %v: %d %s", args, code, errOut.String())
		}
	}
}

func TestCertsIssueNodeCertificate(t *testing.T) {
	dir := t.TempDir()
	issueCerts(t, dir, []string{"--node-id", "3", "--host", "10.0.0.3"}, []string{"--name", "client"})
	read := func(name string) *x509.Certificate {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(data)
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	node := read("node-3.crt")
	if id, err := auth.NodeIDFromCert(node); err != nil || id != 3 || node.Subject.CommonName != "node-3" || len(node.IPAddresses) != 1 {
		t.Fatalf("node-3.crt: id %d, %v, CN %q, IPs %v", id, err, node.Subject.CommonName, node.IPAddresses)
	}
	if _, err := auth.NodeIDFromCert(read("client.crt")); !errors.Is(err, auth.ErrNotNodeCert) {
		t.Fatalf("a client certificate names a node: %v", err)
	}
	var out, errOut bytes.Buffer
	if code := certsCommand([]string{"issue", "--dir", dir, "--node-id", "2147483648"}, &out, &errOut); code != exitConfig {
		t.Fatalf("--node-id above int32: exit %d", code)
	}
}

func TestReplicationSecuritySettings(t *testing.T) {
	dir := t.TempDir()
	issueCerts(t, dir, []string{"--node-id", "1"}, []string{"--node-id", "2"}, []string{"--name", "client"})
	other := t.TempDir()
	issueCerts(t, other, []string{"--node-id", "1"})
	voters := "controller.quorum.voters=1@10.0.0.1:9093,2@10.0.0.2:9093"
	load := func(sets ...string) (*Config, error) {
		var args []string
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		cfg, _, err := loadConfig(args, nil, nil, nil)
		return cfg, err
	}
	ssl := func(keystore, truststore string) []string {
		return []string{"node.id=1", voters, "replication.security.protocol=SSL",
			"replication.ssl.keystore.location=" + keystore, "replication.ssl.truststore.location=" + truststore}
	}

	// Plaintext: loopback by default, anything else only when allowed.
	for _, sets := range [][]string{
		nil,
		{"node.id=1", "controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094"},
		{"node.id=1", "controller.quorum.voters=1@localhost:9093,2@localhost:9094"},
		{"node.id=1", voters, "replication.plaintext.allow.nonloopback=true"},
	} {
		if cfg, err := load(sets...); err != nil || cfg.Cluster.TLS != nil {
			t.Errorf("%v: %v", sets, err)
		}
	}
	for _, sets := range [][]string{
		{"node.id=1", voters},
		{"node.id=1", "controller.quorum.voters=1@127.0.0.1:9093", "replication.listener=0.0.0.0:9093"},
	} {
		_, err := load(sets...)
		if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "replication.plaintext.allow.nonloopback=true") ||
			!strings.Contains(err.Error(), "not a loopback address") {
			t.Errorf("%v: %v", sets, err)
		}
	}

	// SSL with a node certificate of the CA.
	cfg, err := load(ssl(filepath.Join(dir, "node-1.pem"), filepath.Join(dir, "ca.pem"))...)
	if err != nil || cfg.Cluster.TLS == nil || cfg.Cluster.TLS.CAs == nil {
		t.Fatalf("SSL: %+v %v", cfg, err)
	}
	for name, tc := range map[string]struct {
		sets []string
		want string
	}{
		"another node's certificate": {ssl(filepath.Join(dir, "node-2.pem"), filepath.Join(dir, "ca.pem")), "names node 2"},
		"a client certificate":       {ssl(filepath.Join(dir, "client.pem"), filepath.Join(dir, "ca.pem")), "--node-id 1"},
		"another CA's certificate":   {ssl(filepath.Join(other, "node-1.pem"), filepath.Join(dir, "ca.pem")), "does not verify"},
		"no truststore":              {ssl(filepath.Join(dir, "node-1.pem"), ""), "replication.ssl.truststore.location"},
		"no keystore":                {ssl("", filepath.Join(dir, "ca.pem")), "replication.ssl.keystore.location"},
		"a JKS keystore":             {append(ssl(filepath.Join(dir, "node-1.pem"), filepath.Join(dir, "ca.pem")), "replication.ssl.keystore.type=JKS"), "JKS"},
		"SASL":                       {[]string{"node.id=1", voters, "replication.security.protocol=SASL_SSL"}, "expected PLAINTEXT or SSL"},
		"a bad allow value":          {[]string{"replication.plaintext.allow.nonloopback=yes"}, "expected true or false"},
	} {
		_, err := load(tc.sets...)
		if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
}
