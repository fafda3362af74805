package auth

import (
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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	koauth "github.com/twmb/franz-go/pkg/sasl/oauth"
)

type oauthFixture struct {
	rsa  *rsa.PrivateKey
	ec   *ecdsa.PrivateKey
	path string
	now  time.Time
	v    *OAuthValidator
}

func writeJWKS(t *testing.T, path string, keys map[string]crypto.PublicKey) {
	t.Helper()
	b64 := base64.RawURLEncoding
	var list []map[string]string
	for kid, k := range keys {
		switch k := k.(type) {
		case *rsa.PublicKey:
			list = append(list, map[string]string{"kty": "RSA", "kid": kid, "n": b64.EncodeToString(k.N.Bytes()),
				"e": b64.EncodeToString(big.NewInt(int64(k.E)).Bytes())})
		case *ecdsa.PublicKey:
			pt, _ := k.Bytes()
			list = append(list, map[string]string{"kty": "EC", "kid": kid, "crv": "P-256",
				"x": b64.EncodeToString(pt[1:33]), "y": b64.EncodeToString(pt[33:])})
		}
	}
	out, _ := json.Marshal(map[string]any{"keys": list})
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newOAuthFixture(t *testing.T) *oauthFixture {
	t.Helper()
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	f := &oauthFixture{rsa: r, ec: e, path: filepath.Join(t.TempDir(), "jwks.json"), now: time.Unix(1_800_000_000, 0)}
	writeJWKS(t, f.path, map[string]crypto.PublicKey{"r": &r.PublicKey, "e": &e.PublicKey})
	f.v, err = NewOAuthValidator(OAuthSettings{JWKSURL: "file:" + f.path, ExpectedAudience: []string{"a1", "a2"},
		ExpectedIssuer: "iss", ClockSkew: 30 * time.Second, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func signJWT(t *testing.T, alg, kid string, key crypto.Signer, claims map[string]any) string {
	t.Helper()
	b64 := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": alg, "kid": kid})
	c, _ := json.Marshal(claims)
	in := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	d := sha256.Sum256([]byte(in))
	var sig []byte
	switch k := key.(type) {
	case *rsa.PrivateKey:
		sig, _ = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
	case *ecdsa.PrivateKey:
		r, s, _ := ecdsa.Sign(rand.Reader, k, d[:])
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	}
	return in + "." + b64.EncodeToString(sig)
}

func (f *oauthFixture) claims(mod func(map[string]any)) map[string]any {
	c := map[string]any{"sub": "alice", "aud": "a2", "iss": "iss", "iat": f.now.Unix(), "exp": f.now.Add(time.Hour).Unix()}
	if mod != nil {
		mod(c)
	}
	return c
}

func TestOAuthValidate(t *testing.T) {
	f := newOAuthFixture(t)
	ok := []struct {
		name  string
		token string
	}{
		{"RS256", signJWT(t, "RS256", "r", f.rsa, f.claims(nil))},
		{"ES256", signJWT(t, "ES256", "e", f.ec, f.claims(nil))},
		{"aud list", signJWT(t, "RS256", "r", f.rsa, f.claims(func(c map[string]any) { c["aud"] = []string{"x", "a1"} }))},
		{"expired within the skew", signJWT(t, "RS256", "r", f.rsa, f.claims(func(c map[string]any) { c["exp"] = f.now.Add(-10 * time.Second).Unix() }))},
		{"nbf within the skew", signJWT(t, "RS256", "r", f.rsa, f.claims(func(c map[string]any) { c["nbf"] = f.now.Add(10 * time.Second).Unix() }))},
	}
	for _, c := range ok {
		if sub, _, err := f.v.Validate(c.token); err != nil || sub != "alice" {
			t.Errorf("%s: sub %q, err %v", c.name, sub, err)
		}
	}
	bad := []struct {
		name, token, want string
	}{
		{"expired", signJWT(t, "RS256", "r", f.rsa, f.claims(func(c map[string]any) { c["exp"] = f.now.Add(-time.Minute).Unix() })), "expired"},
		{"no exp", signJWT(t, "RS256", "r", f.rsa, f.claims(func(c map[string]any) { delete(c, "exp") })), "no exp"},
		{"nbf later", signJWT(t, "RS256", "r", f.rsa, f.claims(func(c map[string]any) { c["nbf"] = f.now.Add(time.Minute).Unix() })), "nbf"},
		{"iat later", signJWT(t, "RS256", "r", f.rsa, f.claims(func(c map[string]any) { c["iat"] = f.now.Add(time.Minute).Unix() })), "iat"},
		{"audience", signJWT(t, "RS256", "r", f.rsa, f.claims(func(c map[string]any) { c["aud"] = "b" })), "audience"},
		{"no audience", signJWT(t, "RS256", "r", f.rsa, f.claims(func(c map[string]any) { delete(c, "aud") })), "audience"},
		{"issuer", signJWT(t, "RS256", "r", f.rsa, f.claims(func(c map[string]any) { c["iss"] = "x" })), "issuer"},
		{"no sub", signJWT(t, "RS256", "r", f.rsa, f.claims(func(c map[string]any) { delete(c, "sub") })), "sub"},
		{"unknown kid", signJWT(t, "RS256", "zz", f.rsa, f.claims(nil)), "kid"},
		{"RS256 header with the EC key", signJWT(t, "RS256", "e", f.rsa, f.claims(nil)), "signature"},
		{"alg none", strings.Join(strings.Split(signJWT(t, "none", "r", f.rsa, f.claims(nil)), ".")[:2], ".") + ".", "algorithm"},
		{"HS256", signJWT(t, "HS256", "r", f.rsa, f.claims(nil)), "algorithm"},
		{"not a JWS", "abc", "compact"},
		{"garbage parts", "!!.!!.!!", "base64"},
	}
	for _, c := range bad {
		if _, _, err := f.v.Validate(c.token); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one mentioning %q", c.name, err, c.want)
		}
	}

	// A rotated key is found by reading the JWKS again, at most every 10 s.
	r2, _ := rsa.GenerateKey(rand.Reader, 2048)
	writeJWKS(t, f.path, map[string]crypto.PublicKey{"r2": &r2.PublicKey})
	tok := signJWT(t, "RS256", "r2", r2, f.claims(nil))
	if _, _, err := f.v.Validate(tok); err == nil {
		t.Fatal("the JWKS was read again within 10 s of the last read")
	}
	f.now = f.now.Add(11 * time.Second)
	if _, _, err := f.v.Validate(signJWT(t, "RS256", "r2", r2, f.claims(nil))); err != nil {
		t.Fatalf("rotated key: %v", err)
	}
}

func TestOAuthBearerExchange(t *testing.T) {
	f := newOAuthFixture(t)
	good := signJWT(t, "RS256", "r", f.rsa, f.claims(nil))
	if p, err := exchange(t, koauth.Auth{Token: good}.AsMechanism(), OAuthBearer(f.v)); err != nil || p != "User:alice" {
		t.Fatalf("principal %q, err %v", p, err)
	}
	ex := OAuthBearer(f.v)
	if _, err := exchange(t, koauth.Auth{Token: good}.AsMechanism(), ex); err != nil {
		t.Fatal(err)
	}
	if got := ex.(Expiring).Expiry(); !got.Equal(f.now.Add(time.Hour)) {
		t.Fatalf("expiry %v, want the token's exp", got)
	}
	// A refused token: the JSON error as the challenge, then the failure.
	_, err := exchange(t, koauth.Auth{Token: good + "x"}.AsMechanism(), OAuthBearer(f.v))
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Message != `{"status":"invalid_token"}` {
		t.Fatalf("got %v, want RefusedError with invalid_token", err)
	}
	// authzid must be the subject.
	if _, err := exchange(t, koauth.Auth{Zid: "bob", Token: good}.AsMechanism(), OAuthBearer(f.v)); !errors.As(err, &refused) {
		t.Fatalf("authzid bob for alice's token: %v", err)
	}
	for _, msg := range []string{"", "n,,", "n,,\x01auth=Bearer\x01\x01", "p=x,,\x01auth=Bearer t\x01\x01", "n,,\x01auth=Basic t\x01\x01", "n,,\x01\x01"} {
		if _, _, _, err := OAuthBearer(f.v).Step([]byte(msg)); !errors.Is(err, ErrBadMessage) {
			t.Errorf("%q: %v, want ErrBadMessage", msg, err)
		}
	}
	if _, err := NewOAuthValidator(OAuthSettings{JWKSURL: "ftp://x"}); err == nil {
		t.Error("an ftp JWKS URL was accepted")
	}
	if _, err := NewOAuthValidator(OAuthSettings{JWKSURL: "file:" + filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Error("a missing JWKS file was accepted")
	}
}
