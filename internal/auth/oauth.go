package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// MechOAuthBearer is SASL OAUTHBEARER (RFC 7628, Kafka's KIP-255).
const MechOAuthBearer = "OAUTHBEARER"

// OAuthSettings are Kafka's sasl.oauthbearer.* settings of the JWKS
// validator.
type OAuthSettings struct {
	JWKSURL          string        // sasl.oauthbearer.jwks.endpoint.url: https://, http:// or file:
	ExpectedAudience []string      // sasl.oauthbearer.expected.audience: one of them must be in aud
	ExpectedIssuer   string        // sasl.oauthbearer.expected.issuer
	SubClaim         string        // sasl.oauthbearer.sub.claim.name (default "sub")
	ClockSkew        time.Duration // sasl.oauthbearer.clock.skew.seconds (default 30 s)
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// OAuthValidator checks OAUTHBEARER tokens: JWTs signed with RS256 or
// ES256 by a key of the JWKS (chosen by the token's kid), with exp, nbf,
// iat, aud and iss checked. The JWKS is read when the validator is made
// and again (at most every 10 s) when a token names a kid it lacks, so a
// rotated key is picked up.
type OAuthValidator struct {
	set OAuthSettings

	mu      sync.Mutex
	keys    map[string]crypto.PublicKey
	fetched time.Time
}

// jwksRefetch bounds refetches triggered by unknown kids.
const jwksRefetch = 10 * time.Second

// NewOAuthValidator reads the JWKS; an unreadable or empty one is an error.
func NewOAuthValidator(s OAuthSettings) (*OAuthValidator, error) {
	if s.SubClaim == "" {
		s.SubClaim = "sub"
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	v := &OAuthValidator{set: s}
	keys, err := loadJWKS(s.JWKSURL)
	if err != nil {
		return nil, err
	}
	v.keys, v.fetched = keys, s.Now()
	return v, nil
}

func loadJWKS(raw string) (map[string]crypto.PublicKey, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url: %v", err)
	}
	var body []byte
	switch u.Scheme {
	case "file":
		p := u.Path
		if p == "" {
			p = u.Opaque
		}
		if body, err = os.ReadFile(p); err != nil {
			return nil, fmt.Errorf("reading JWKS: %v", err)
		}
	case "https", "http":
		cl := &http.Client{Timeout: 10 * time.Second}
		resp, err := cl.Get(raw)
		if err != nil {
			return nil, fmt.Errorf("fetching JWKS: %v", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("fetching JWKS from %s: %s", raw, resp.Status)
		}
		if body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20)); err != nil {
			return nil, fmt.Errorf("fetching JWKS: %v", err)
		}
	default:
		return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url %q: the scheme must be https, http or file", raw)
	}
	return parseJWKS(body)
}

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWKS keeps the RSA and P-256 keys meant for signatures.
func parseJWKS(body []byte) (map[string]crypto.PublicKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("JWKS is not JSON: %v", err)
	}
	keys := map[string]crypto.PublicKey{}
	b64 := base64.RawURLEncoding
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Kty {
		case "RSA":
			n, err1 := b64.DecodeString(k.N)
			e, err2 := b64.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
				continue
			}
			exp := int(new(big.Int).SetBytes(e).Int64())
			if exp < 3 {
				continue
			}
			keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}
		case "EC":
			if k.Crv != "P-256" {
				continue
			}
			x, err1 := b64.DecodeString(k.X)
			y, err2 := b64.DecodeString(k.Y)
			if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
				continue
			}
			// Uncompressed point form; ParseUncompressedPublicKey checks
			// it is on the curve.
			pt := append(append([]byte{4}, x...), y...)
			pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pt)
			if err != nil {
				continue
			}
			keys[k.Kid] = pub
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("JWKS holds no RSA or P-256 signing key")
	}
	return keys, nil
}

func (v *OAuthValidator) key(kid string) crypto.PublicKey {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.keys[kid]; ok {
		return k
	}
	if now := v.set.Now(); now.Sub(v.fetched) >= jwksRefetch {
		v.fetched = now
		if keys, err := loadJWKS(v.set.JWKSURL); err == nil {
			v.keys = keys
		}
	}
	return v.keys[kid]
}

// Validate checks a compact JWS token and returns its principal's name
// (the sub claim) and its expiry.
func (v *OAuthValidator) Validate(token string) (sub string, exp time.Time, err error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", exp, errors.New("the token is not a JWS in compact form")
	}
	b64 := base64.RawURLEncoding
	hb, err := b64.DecodeString(parts[0])
	if err != nil {
		return "", exp, errors.New("the token's header is not base64url")
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(hb, &hdr); err != nil {
		return "", exp, errors.New("the token's header is not JSON")
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return "", exp, errors.New("the token's signature is not base64url")
	}
	key := v.key(hdr.Kid)
	if key == nil {
		return "", exp, fmt.Errorf("no key with kid %q in the JWKS", hdr.Kid)
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	switch hdr.Alg {
	case "RS256":
		pub, ok := key.(*rsa.PublicKey)
		if !ok || rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig) != nil {
			return "", exp, errors.New("bad signature")
		}
	case "ES256":
		pub, ok := key.(*ecdsa.PublicKey)
		if !ok || len(sig) != 64 ||
			!ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
			return "", exp, errors.New("bad signature")
		}
	default:
		return "", exp, fmt.Errorf("algorithm %q is not accepted (RS256, ES256 are)", hdr.Alg)
	}
	pb, err := b64.DecodeString(parts[1])
	if err != nil {
		return "", exp, errors.New("the token's payload is not base64url")
	}
	var claims map[string]any
	if err := json.Unmarshal(pb, &claims); err != nil {
		return "", exp, errors.New("the token's payload is not a JSON object")
	}
	now, skew := v.set.Now(), v.set.ClockSkew
	numeric := func(name string, required bool) (time.Time, bool, error) {
		raw, ok := claims[name]
		if !ok {
			if required {
				return time.Time{}, false, fmt.Errorf("the token has no %s claim", name)
			}
			return time.Time{}, false, nil
		}
		f, ok := raw.(float64)
		if !ok {
			return time.Time{}, false, fmt.Errorf("the %s claim is not a number", name)
		}
		return time.UnixMilli(int64(f * 1000)), true, nil
	}
	exp, _, err = numeric("exp", true)
	if err != nil {
		return "", exp, err
	}
	if !now.Before(exp.Add(skew)) {
		return "", exp, fmt.Errorf("the token expired at %s", exp.UTC().Format(time.RFC3339))
	}
	if nbf, ok, err := numeric("nbf", false); err != nil {
		return "", exp, err
	} else if ok && now.Add(skew).Before(nbf) {
		return "", exp, errors.New("the token is not valid yet (nbf)")
	}
	if iat, ok, err := numeric("iat", false); err != nil {
		return "", exp, err
	} else if ok && now.Add(skew).Before(iat) {
		return "", exp, errors.New("the token is issued in the future (iat)")
	}
	if len(v.set.ExpectedAudience) > 0 {
		var auds []string
		switch a := claims["aud"].(type) {
		case string:
			auds = []string{a}
		case []any:
			for _, x := range a {
				if s, ok := x.(string); ok {
					auds = append(auds, s)
				}
			}
		}
		found := false
		for _, a := range auds {
			for _, want := range v.set.ExpectedAudience {
				found = found || a == want
			}
		}
		if !found {
			return "", exp, fmt.Errorf("the token's audience %v is none of %v", auds, v.set.ExpectedAudience)
		}
	}
	if v.set.ExpectedIssuer != "" {
		if iss, _ := claims["iss"].(string); iss != v.set.ExpectedIssuer {
			return "", exp, fmt.Errorf("the token's issuer %q is not %q", iss, v.set.ExpectedIssuer)
		}
	}
	sub, _ = claims[v.set.SubClaim].(string)
	if sub == "" {
		return "", exp, fmt.Errorf("the token has no %s claim (sasl.oauthbearer.sub.claim.name)", v.set.SubClaim)
	}
	return sub, exp, nil
}

// RefusedError is a refusal whose message the client is told as is (the
// RFC 7628 JSON error of OAUTHBEARER).
type RefusedError struct{ Message string }

func (e *RefusedError) Error() string { return e.Message }

// Expiring is an exchange whose credential expires (OAUTHBEARER: the
// token's exp): KIP-368's session lifetime is at most what is left.
type Expiring interface {
	Expiry() time.Time
}

// OAuthBearer returns the OAUTHBEARER exchange against v. A refused token
// is answered as RFC 7628 says and Kafka does: a JSON error as the
// server's challenge, then, on the client's dummy response (0x01), the
// failure itself (RefusedError with that JSON).
func OAuthBearer(v *OAuthValidator) Authenticator { return &oauthBearer{v: v} }

type oauthBearer struct {
	v       *OAuthValidator
	refused string
	exp     time.Time
}

func (o *oauthBearer) Expiry() time.Time { return o.exp }

// oauthInvalidToken is the RFC 7628 error Kafka answers.
const oauthInvalidToken = `{"status":"invalid_token"}`

// ErrOAuthToken wraps why a token was refused (logged, not told).
var ErrOAuthToken = errors.New("OAUTHBEARER token refused")

func (o *oauthBearer) Step(msg []byte) ([]byte, bool, string, error) {
	if o.refused != "" {
		if len(msg) == 1 && msg[0] == 0x01 {
			return nil, false, "", &RefusedError{Message: oauthInvalidToken}
		}
		return nil, false, "", fmt.Errorf("%w: expected the client's 0x01 after an error", ErrBadMessage)
	}
	// gs2-header "n,[a=authzid]," then kvpairs separated by 0x01, ending
	// in 0x01 0x01.
	s := string(msg)
	gs2, rest, ok := strings.Cut(s, "\x01")
	if !ok || !strings.HasSuffix(rest, "\x01") {
		return nil, false, "", fmt.Errorf("%w: OAUTHBEARER expects n,,\\x01auth=Bearer <token>\\x01\\x01", ErrBadMessage)
	}
	g := strings.Split(gs2, ",")
	if len(g) != 3 || (g[0] != "n" && g[0] != "y") || g[2] != "" {
		return nil, false, "", fmt.Errorf("%w: bad OAUTHBEARER GS2 header", ErrBadMessage)
	}
	authzid, _ := strings.CutPrefix(g[1], "a=")
	var token string
	for kv := range strings.SplitSeq(strings.TrimSuffix(rest, "\x01"), "\x01") {
		if k, val, ok := strings.Cut(kv, "="); ok && k == "auth" {
			scheme, t, ok := strings.Cut(val, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				return nil, false, "", fmt.Errorf("%w: OAUTHBEARER auth must be \"Bearer <token>\"", ErrBadMessage)
			}
			token = strings.TrimSpace(t)
		}
	}
	if token == "" {
		return nil, false, "", fmt.Errorf("%w: OAUTHBEARER message without a token", ErrBadMessage)
	}
	sub, exp, err := o.v.Validate(token)
	if err == nil && authzid != "" && authzid != sub {
		err = fmt.Errorf("authorization ID %q is not the token's subject %q", authzid, sub)
	}
	if err != nil {
		o.refused = err.Error()
		return []byte(oauthInvalidToken), false, "", nil
	}
	o.exp = exp
	return nil, true, "User:" + sub, nil
}

// Refusal is why the exchange's token was refused ("" if it was not), for
// the broker's log.
func (o *oauthBearer) Refusal() string { return o.refused }
