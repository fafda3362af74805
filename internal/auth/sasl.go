package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// Mechanism names as SaslHandshake spells them.
const (
	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
)

// ErrAuthFailed is a refused authentication (SASL_AUTHENTICATION_FAILED).
// Its message is what the client is told; it never says whether the user
// exists.
var ErrAuthFailed = errors.New("authentication failed: invalid credentials")

// ErrBadMessage is a malformed SASL message (also
// SASL_AUTHENTICATION_FAILED, with a message naming the fault).
var ErrBadMessage = errors.New("malformed SASL message")

// Authenticator is one SASL exchange on one connection. Step takes the
// client's next message and returns the server's answer; done is true
// when the exchange is complete and principal ("User:name") is
// authenticated. An error ends the exchange (the client is told
// SASL_AUTHENTICATION_FAILED and the connection closes).
type Authenticator interface {
	Step(msg []byte) (resp []byte, done bool, principal string, err error)
}

// PlainUsers checks PLAIN passwords; nil refuses everyone.
type PlainUsers map[string]string

// Plain returns the PLAIN (RFC 4616) exchange against users.
func Plain(users PlainUsers) Authenticator { return plain{users} }

type plain struct{ users PlainUsers }

func (p plain) Step(msg []byte) ([]byte, bool, string, error) {
	// authzid NUL authcid NUL passwd
	parts := strings.Split(string(msg), "\x00")
	if len(parts) != 3 || parts[1] == "" {
		return nil, false, "", fmt.Errorf("%w: PLAIN expects authzid NUL user NUL password", ErrBadMessage)
	}
	authz, user, pass := parts[0], parts[1], parts[2]
	if authz != "" && authz != user {
		return nil, false, "", errors.New("authentication failed: authorization ID must equal the user name")
	}
	want, ok := p.users[user]
	// Compare even for unknown users, so the time does not tell.
	if subtle.ConstantTimeCompare([]byte(want), []byte(pass)) != 1 || !ok {
		return nil, false, "", ErrAuthFailed
	}
	return nil, true, "User:" + user, nil
}

// ScramCredential is what the server keeps of a SCRAM password (RFC 5802):
// never the password itself.
type ScramCredential struct {
	Mechanism  string `json:"mechanism"`
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
	Iterations int32  `json:"iterations"`
}

// Scram iteration bounds (Kafka's: 4096..16384).
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
)

func scramHash(mech string) (func() hash.Hash, error) {
	switch mech {
	case MechScramSHA256:
		return sha256.New, nil
	case MechScramSHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("unknown SCRAM mechanism %q", mech)
}

// ScramMechanismFromType maps Kafka's ScramMechanism codes (1: SHA-256, 2:
// SHA-512) to names; "" if unknown.
func ScramMechanismFromType(t int8) string {
	switch t {
	case 1:
		return MechScramSHA256
	case 2:
		return MechScramSHA512
	}
	return ""
}

// ScramTypeFromMechanism is ScramMechanismFromType's inverse (0: unknown).
func ScramTypeFromMechanism(m string) int8 {
	switch m {
	case MechScramSHA256:
		return 1
	case MechScramSHA512:
		return 2
	}
	return 0
}

func hmacSum(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// NewScramCredential derives a credential from a password (the client
// side of AlterUserScramCredentials does the same from its salted
// password; strata user does this).
func NewScramCredential(mech, password string, salt []byte, iterations int32) (ScramCredential, error) {
	h, err := scramHash(mech)
	if err != nil {
		return ScramCredential{}, err
	}
	salted, err := pbkdf2.Key(h, password, salt, int(iterations), h().Size())
	if err != nil {
		return ScramCredential{}, err
	}
	return CredentialFromSaltedPassword(mech, salted, salt, iterations)
}

// CredentialFromSaltedPassword derives the stored and server keys from the
// salted password AlterUserScramCredentials carries.
func CredentialFromSaltedPassword(mech string, salted, salt []byte, iterations int32) (ScramCredential, error) {
	h, err := scramHash(mech)
	if err != nil {
		return ScramCredential{}, err
	}
	clientKey := hmacSum(h, salted, []byte("Client Key"))
	sum := h()
	sum.Write(clientKey)
	return ScramCredential{
		Mechanism:  mech,
		Salt:       append([]byte(nil), salt...),
		StoredKey:  sum.Sum(nil),
		ServerKey:  hmacSum(h, salted, []byte("Server Key")),
		Iterations: iterations,
	}, nil
}

// ScramLookup finds a user's credential for a mechanism (ok false: none).
type ScramLookup func(user, mech string) (ScramCredential, bool)

// Scram returns the server side of a SCRAM exchange (RFC 5802, RFC 7677)
// for mech, looking users up with lookup.
func Scram(mech string, lookup ScramLookup) (Authenticator, error) {
	h, err := scramHash(mech)
	if err != nil {
		return nil, err
	}
	return &scram{mech: mech, h: h, lookup: lookup}, nil
}

type scram struct {
	mech   string
	h      func() hash.Hash
	lookup ScramLookup

	step            int
	user            string
	cred            ScramCredential
	known           bool
	clientFirstBare string
	serverFirst     string
	nonce           string
}

func scramAttrs(s string) (map[byte]string, []byte, error) {
	m := map[byte]string{}
	var order []byte
	for _, a := range strings.Split(s, ",") {
		if len(a) < 2 || a[1] != '=' {
			return nil, nil, fmt.Errorf("%w: bad SCRAM attribute %q", ErrBadMessage, a)
		}
		m[a[0]] = a[2:]
		order = append(order, a[0])
	}
	return m, order, nil
}

func scramUnescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ',' {
			return "", fmt.Errorf("%w: ',' in a SCRAM name", ErrBadMessage)
		}
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("%w: bad escape in a SCRAM name", ErrBadMessage)
		}
		i += 2
	}
	return b.String(), nil
}

func (s *scram) Step(msg []byte) ([]byte, bool, string, error) {
	s.step++
	switch s.step {
	case 1:
		return s.first(string(msg))
	case 2:
		return s.final(string(msg))
	}
	return nil, false, "", fmt.Errorf("%w: SCRAM exchange already complete", ErrBadMessage)
}

func (s *scram) first(msg string) ([]byte, bool, string, error) {
	// gs2-header: "n,," or "y,," (no channel binding), optional a=authzid.
	gs2, rest, ok := strings.Cut(msg, ",")
	if !ok || (gs2 != "n" && gs2 != "y") {
		return nil, false, "", fmt.Errorf("%w: SCRAM channel binding is not supported", ErrBadMessage)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, false, "", fmt.Errorf("%w: SCRAM client-first message", ErrBadMessage)
	}
	attrs, order, err := scramAttrs(bare)
	if err != nil {
		return nil, false, "", err
	}
	if len(order) < 2 || order[0] != 'n' || order[1] != 'r' || attrs['r'] == "" {
		return nil, false, "", fmt.Errorf("%w: SCRAM client-first message needs n= and r=", ErrBadMessage)
	}
	user, err := scramUnescape(attrs['n'])
	if err != nil {
		return nil, false, "", err
	}
	if authz != "" {
		az, err := scramUnescape(strings.TrimPrefix(authz, "a="))
		if err != nil || az != user {
			return nil, false, "", errors.New("authentication failed: authorization ID must equal the user name")
		}
	}
	if v, ok := attrs['e']; ok && v != "" {
		return nil, false, "", fmt.Errorf("%w: SCRAM extensions are not supported", ErrBadMessage)
	}
	s.user = user
	s.clientFirstBare = bare
	s.cred, s.known = s.lookup(user, s.mech)
	if !s.known {
		// Go on with a made-up salt, so an unknown user fails at the same
		// step as a wrong password.
		salt := make([]byte, 16)
		rand.Read(salt)
		s.cred = ScramCredential{Mechanism: s.mech, Salt: salt, Iterations: MinScramIterations}
	}
	nb := make([]byte, 24)
	rand.Read(nb)
	s.nonce = attrs['r'] + base64.RawURLEncoding.EncodeToString(nb)
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(int(s.cred.Iterations))
	return []byte(s.serverFirst), false, "", nil
}

func (s *scram) final(msg string) ([]byte, bool, string, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, false, "", fmt.Errorf("%w: SCRAM client-final message has no proof", ErrBadMessage)
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	attrs, order, err := scramAttrs(withoutProof)
	if err != nil {
		return nil, false, "", err
	}
	if len(order) < 2 || order[0] != 'c' || order[1] != 'r' {
		return nil, false, "", fmt.Errorf("%w: SCRAM client-final message needs c= and r=", ErrBadMessage)
	}
	// The nonce must end with the server's (as Kafka checks it): librdkafka
	// sends its own nonce again before the server's. The proof covers the
	// message as sent, so the fresh server nonce still prevents replays.
	if !strings.HasSuffix(attrs['r'], s.nonce) {
		return nil, false, "", fmt.Errorf("%w: SCRAM nonce mismatch", ErrBadMessage)
	}
	cb, err := base64.StdEncoding.DecodeString(attrs['c'])
	if err != nil || (string(cb) != "n,," && string(cb) != "y,,") {
		return nil, false, "", fmt.Errorf("%w: SCRAM channel binding is not supported", ErrBadMessage)
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != s.h().Size() {
		return nil, false, "", fmt.Errorf("%w: SCRAM proof", ErrBadMessage)
	}
	authMsg := []byte(s.clientFirstBare + "," + s.serverFirst + "," + withoutProof)
	sig := hmacSum(s.h, s.cred.StoredKey, authMsg)
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ sig[j%len(sig)]
	}
	sum := s.h()
	sum.Write(clientKey)
	if !s.known || len(s.cred.StoredKey) != len(proof) || subtle.ConstantTimeCompare(sum.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, false, "", ErrAuthFailed
	}
	serverSig := hmacSum(s.h, s.cred.ServerKey, authMsg)
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), true, "User:" + s.user, nil
}
