package e2e

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/strata-io/strata/internal/testwait"
)

// Test signing keys: an RSA key (kid rsa1) and a P-256 key (kid ec1) in the
// JWKS, and an RSA key the JWKS does not hold.
type jwtKeys struct {
	rsa, stray *rsa.PrivateKey
	ec         *ecdsa.PrivateKey
}

func newJWTKeys(t *testing.T) *jwtKeys {
	t.Helper()
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &jwtKeys{rsa: r, stray: s, ec: e}
}

func (k *jwtKeys) jwks(t *testing.T) []byte {
	b64 := base64.RawURLEncoding
	pt, err := k.ec.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "RSA", "kid": "rsa1", "use": "sig", "alg": "RS256",
			"n": b64.EncodeToString(k.rsa.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(k.rsa.E)).Bytes())},
		{"kty": "EC", "kid": "ec1", "use": "sig", "crv": "P-256",
			"x": b64.EncodeToString(pt[1:33]), "y": b64.EncodeToString(pt[33:])},
	}})
	return out
}

// sign makes a compact JWS: alg RS256 with key (or ES256 with k.ec when
// key is nil).
func (k *jwtKeys) sign(t *testing.T, kid string, key *rsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	b64 := base64.RawURLEncoding
	alg := "RS256"
	if key == nil {
		alg = "ES256"
	}
	h, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT", "kid": kid})
	c, _ := json.Marshal(claims)
	in := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	d := sha256.Sum256([]byte(in))
	var sig []byte
	var err error
	if key != nil {
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, d[:])
	} else {
		var r, s *big.Int
		r, s, err = ecdsa.Sign(rand.Reader, k.ec, d[:])
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return in + "." + b64.EncodeToString(sig)
}

func claimsFor(sub string, exp time.Time) map[string]any {
	return map[string]any{"sub": sub, "aud": []string{"strata"}, "iss": "https://idp.test",
		"iat": time.Now().Unix(), "exp": exp.Unix()}
}

// TestOAuthBearer: OAUTHBEARER (KIP-255) with a JWKS file and KIP-368
// re-authentication, with franz-go's sasl/oauth against strata serve.
// Takes about 12 s.
func TestOAuthBearer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	keys := newJWTKeys(t)
	dir := t.TempDir()
	jwksPath := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwksPath, keys.jwks(t), 0o600); err != nil {
		t.Fatal(err)
	}
	saslAddr := freeAddr(t)
	plainAddr := freeAddr(t)
	b := &broker{t: t, dataDir: t.TempDir(), addr: plainAddr, logs: new(bytes.Buffer), args: []string{
		"--set", "listeners=PLAINTEXT://" + plainAddr + ",SASL_PLAINTEXT://" + saslAddr,
		"--set", "listener.name.sasl_plaintext.sasl.enabled.mechanisms=OAUTHBEARER",
		"--set", "sasl.oauthbearer.jwks.endpoint.url=file:" + jwksPath,
		"--set", "sasl.oauthbearer.expected.audience=strata",
		"--set", "sasl.oauthbearer.expected.issuer=https://idp.test",
		"--set", "listener.name.sasl_plaintext.connections.max.reauth.ms=3000",
	}}
	b.start()
	t.Cleanup(func() {
		b.kill()
		if t.Failed() {
			t.Logf("broker log:\n%s", b.logText())
		}
	})
	client := func(token func() string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(saslAddr),
			kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) { return oauth.Auth{Token: token()}, nil })),
			kgo.RetryTimeout(10 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	fixed := func(s string) func() string { return func() string { return s } }
	hour := time.Now().Add(time.Hour)

	t.Run("valid RS256 and ES256 tokens", func(t *testing.T) {
		if err := roundTrip(t, client(fixed(keys.sign(t, "rsa1", keys.rsa, claimsFor("alice", hour)))), "oauth-rs256"); err != nil {
			t.Fatal(err)
		}
		if err := roundTrip(t, client(fixed(keys.sign(t, "ec1", nil, claimsFor("alice", hour)))), "oauth-es256"); err != nil {
			t.Fatal(err)
		}
	})
	wrongAud := claimsFor("alice", hour)
	wrongAud["aud"] = "someone-else"
	wrongIss := claimsFor("alice", hour)
	wrongIss["iss"] = "https://evil.test"
	badSig := keys.sign(t, "rsa1", keys.rsa, claimsFor("alice", hour))
	badSig = badSig[:len(badSig)-4] + strings.Repeat("A", 4)
	for _, w := range []struct{ name, token string }{
		{"expired", keys.sign(t, "rsa1", keys.rsa, claimsFor("alice", time.Now().Add(-time.Hour)))},
		{"wrong audience", keys.sign(t, "rsa1", keys.rsa, wrongAud)},
		{"wrong issuer", keys.sign(t, "rsa1", keys.rsa, wrongIss)},
		{"unknown kid", keys.sign(t, "nope", keys.stray, claimsFor("alice", hour))},
		{"bad signature", badSig},
		{"signed by another key", keys.sign(t, "rsa1", keys.stray, claimsFor("alice", hour))},
	} {
		t.Run("refused: "+w.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			err := client(fixed(w.token)).Ping(ctx)
			if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid_token") {
				t.Fatalf("got %v, want SASL_AUTHENTICATION_FAILED with RFC 7628's invalid_token", err)
			}
		})
	}

	t.Run("re-authentication keeps a producer going", func(t *testing.T) {
		var auths, connects atomic.Int64
		cl := client(func() string {
			auths.Add(1)
			return keys.sign(t, "rsa1", keys.rsa, claimsFor("alice", hour))
		}, kgo.WithHooks(connectHook{&connects}), kgo.DefaultProduceTopic("oauth-reauth"), kgo.AllowAutoTopicCreation())
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		n := 0
		// A session lives 3 s (franz-go re-authenticates 1 s before its end): produce until the client re-authenticated
		// at least four times on connections it kept.
		testwait.For(t, 45*time.Second, func() bool {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", n, err)
			}
			n++
			return auths.Load()-connects.Load() >= 4
		}, "too few re-authentications: %d authentications, %d connections", auths.Load(), connects.Load())
		if strings.Contains(b.logText(), "SASL session expired") {
			t.Fatal("the broker closed a connection of the re-authenticating client")
		}
		t.Logf("%d records produced over %d authentications on %d connections", n, auths.Load(), connects.Load())
	})

	t.Run("raw connection", func(t *testing.T) {
		token := keys.sign(t, "rsa1", keys.rsa, claimsFor("alice", hour))
		bob := keys.sign(t, "rsa1", keys.rsa, claimsFor("bob", hour))
		authenticate := func(conn net.Conn, tok string, corr int32) *kmsg.SASLAuthenticateResponse {
			t.Helper()
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Version, hs.Mechanism = 1, "OAUTHBEARER"
			hr := kmsg.NewPtrSASLHandshakeResponse()
			hr.Version = 1
			if body := rawRequest(t, conn, hs, corr); len(body) < 4 || hr.ReadFrom(body[4:]) != nil || hr.ErrorCode != 0 {
				t.Fatalf("SaslHandshake failed (error %d)", hr.ErrorCode)
			}
			ar := kmsg.NewPtrSASLAuthenticateRequest()
			ar.Version, ar.SASLAuthBytes = 1, []byte("n,,\x01auth=Bearer "+tok+"\x01\x01")
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			resp.Version = 1
			body := rawRequest(t, conn, ar, corr+1)
			if len(body) < 4 || resp.ReadFrom(body[4:]) != nil { // after the correlation ID
				t.Fatal("no SaslAuthenticate answer")
			}
			return resp
		}
		dial := func() net.Conn {
			conn, err := net.Dial("tcp", saslAddr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			return conn
		}

		// Not re-authenticating: closed once the lifetime is over.
		conn := dial()
		resp := authenticate(conn, token, 1)
		if resp.ErrorCode != 0 || resp.SessionLifetimeMillis <= 0 || resp.SessionLifetimeMillis > 3000 {
			t.Fatalf("SaslAuthenticate: error %d, session lifetime %d ms, want 0 < lifetime <= 3000", resp.ErrorCode, resp.SessionLifetimeMillis)
		}
		start := time.Now()
		corr := int32(10)
		testwait.For(t, 30*time.Second, func() bool {
			corr++
			md := kmsg.NewPtrMetadataRequest()
			md.Version = 4
			return rawRequest(t, conn, md, corr) == nil
		}, "the connection stayed open after its session expired")
		if el := time.Since(start); el < 2*time.Second {
			t.Fatalf("closed after %v, before the 3 s session lifetime", el)
		}

		// Re-authenticating as another principal is refused.
		conn = dial()
		if resp := authenticate(conn, token, 1); resp.ErrorCode != 0 {
			t.Fatalf("SaslAuthenticate: error %d", resp.ErrorCode)
		}
		if resp := authenticate(conn, bob, 3); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
			t.Fatalf("re-authentication as User:bob: error %d, want SASL_AUTHENTICATION_FAILED", resp.ErrorCode)
		}
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 4
		if rawRequest(t, conn, md, 5) != nil {
			t.Fatal("the connection stayed open after a refused re-authentication")
		}
	})
	if !bytes.Contains([]byte(b.logText()), []byte("SASL authentication failed")) {
		t.Error("refused tokens were not logged")
	}
}

type connectHook struct{ n *atomic.Int64 }

func (h connectHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		h.n.Add(1)
	}
}
