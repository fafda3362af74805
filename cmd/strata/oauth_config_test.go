package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOAuthConfig: the sasl.oauthbearer.* and connections.max.reauth.ms
// settings, broker-wide and per listener, and what is refused.
func TestOAuthConfig(t *testing.T) {
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	// A P-256 key (the point is the curve's generator).
	os.WriteFile(jwks, []byte(`{"keys":[{"kty":"EC","kid":"k","crv":"P-256",`+
		`"x":"axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY","y":"T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU"}]}`), 0o600)
	base := []string{"--listeners", "PLAINTEXT://127.0.0.1:1,SASL_PLAINTEXT://127.0.0.1:2"}
	cfg, _, err := loadConfig(append(base,
		"--set", "listener.name.sasl_plaintext.sasl.enabled.mechanisms=OAUTHBEARER,SCRAM-SHA-512",
		"--set", "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=file:"+jwks,
		"--set", "sasl.oauthbearer.expected.audience=a, b",
		"--set", "connections.max.reauth.ms=60000",
		"--set", "listener.name.sasl_plaintext.connections.max.reauth.ms=5000",
	), nil, files(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, l := range cfg.Security.Listeners {
		if l.Name != "SASL_PLAINTEXT" {
			continue
		}
		found = true
		if l.OAuth == nil || l.Reauth != 5*time.Second || strings.Join(l.Mechanisms, ",") != "OAUTHBEARER,SCRAM-SHA-512" {
			t.Fatalf("listener: oauth %v, reauth %v, mechanisms %v", l.OAuth != nil, l.Reauth, l.Mechanisms)
		}
		if sec := l.protocolListener(false, 2); sec.OAuth == nil || sec.ReauthAfter != 5*time.Second {
			t.Fatal("the protocol listener lost the OAUTHBEARER validator or the reauth lifetime")
		}
	}
	if !found {
		t.Fatal("no SASL_PLAINTEXT listener")
	}
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"no JWKS", []string{"--set", "sasl.enabled.mechanisms=OAUTHBEARER"}, []string{"sasl.oauthbearer.jwks.endpoint.url", "SASL_PLAINTEXT"}},
		{"missing JWKS file", []string{"--set", "sasl.enabled.mechanisms=OAUTHBEARER", "--set", "sasl.oauthbearer.jwks.endpoint.url=file:/nonexistent/jwks.json"}, []string{"sasl.oauthbearer.jwks.endpoint.url", "jwks.json"}},
		{"bad skew", []string{"--set", "sasl.enabled.mechanisms=OAUTHBEARER", "--set", "sasl.oauthbearer.jwks.endpoint.url=file:" + jwks, "--set", "sasl.oauthbearer.clock.skew.seconds=-1"}, []string{"sasl.oauthbearer.clock.skew.seconds"}},
		{"bad reauth", []string{"--set", "listener.name.sasl_plaintext.connections.max.reauth.ms=soon"}, []string{"listener.name.sasl_plaintext.connections.max.reauth.ms"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := loadConfig(append(base, tt.args...), nil, files(nil), io.Discard)
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
