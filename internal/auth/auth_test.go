package auth

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	kplain "github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// exchange runs franz-go's client side of mech against server.
func exchange(t *testing.T, mech sasl.Mechanism, server Authenticator) (string, error) {
	t.Helper()
	sess, msg, err := mech.Authenticate(context.Background(), "broker:9092")
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		resp, done, principal, err := server.Step(msg)
		if err != nil {
			return "", err
		}
		cdone, next, cerr := sess.Challenge(resp)
		if cerr != nil {
			t.Fatalf("client refused the server's answer: %v", cerr)
		}
		if done {
			if !cdone {
				t.Fatal("server done, client not")
			}
			return principal, nil
		}
		msg = next
	}
	t.Fatal("exchange did not finish")
	return "", nil
}

func TestScram(t *testing.T) {
	for _, mech := range []string{MechScramSHA256, MechScramSHA512} {
		salt := make([]byte, 16)
		rand.Read(salt)
		cred, err := NewScramCredential(mech, "pa,ss=word", salt, 4096)
		if err != nil {
			t.Fatal(err)
		}
		lookup := func(user, m string) (ScramCredential, bool) {
			if user == "al,ice=" && m == mech {
				return cred, true
			}
			return ScramCredential{}, false
		}
		client := func(user, pass string) sasl.Mechanism {
			a := kscram.Auth{User: user, Pass: pass}
			if mech == MechScramSHA256 {
				return a.AsSha256Mechanism()
			}
			return a.AsSha512Mechanism()
		}
		srv, _ := Scram(mech, lookup)
		p, err := exchange(t, client("al,ice=", "pa,ss=word"), srv)
		if err != nil || p != "User:al,ice=" {
			t.Fatalf("%s: %q %v", mech, p, err)
		}
		for _, bad := range [][2]string{{"al,ice=", "wrong"}, {"nobody", "pa,ss=word"}} {
			srv, _ := Scram(mech, lookup)
			if _, err := exchange(t, client(bad[0], bad[1]), srv); !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("%s %v: %v", mech, bad, err)
			}
		}
	}
	// Garbage never panics and is refused.
	srv, _ := Scram(MechScramSHA256, func(string, string) (ScramCredential, bool) { return ScramCredential{}, false })
	for _, m := range []string{"", "p=tls,,n=a,r=b", "n,,", "n,,n=a", "n,,r=x,n=a", "n,,n=a=ZZ,r=x"} {
		if _, _, _, err := srv.Step([]byte(m)); err == nil {
			t.Fatalf("accepted %q", m)
		}
		srv, _ = Scram(MechScramSHA256, func(string, string) (ScramCredential, bool) { return ScramCredential{}, false })
	}
}

func TestPlain(t *testing.T) {
	users := PlainUsers{"alice": "secret"}
	if p, err := exchange(t, kplain.Auth{User: "alice", Pass: "secret"}.AsMechanism(), Plain(users)); err != nil || p != "User:alice" {
		t.Fatal(p, err)
	}
	for _, a := range []kplain.Auth{{User: "alice", Pass: "nope"}, {User: "bob", Pass: "secret"}, {Zid: "bob", User: "alice", Pass: "secret"}} {
		if _, err := exchange(t, a.AsMechanism(), Plain(users)); err == nil {
			t.Fatalf("accepted %+v", a)
		}
	}
	if _, _, _, err := Plain(users).Step([]byte("no-nuls")); !errors.Is(err, ErrBadMessage) {
		t.Fatal(err)
	}
}

func TestJAAS(t *testing.T) {
	users, err := PlainUsersFromJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="admin-secret"
		user_admin="admin-secret" user_bob=bare user_q="a\\b\"c";`)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 3 || users["admin"] != "admin-secret" || users["bob"] != "bare" || users["q"] != `a\b"c` {
		t.Fatalf("%q", users)
	}
	for _, bad := range []string{"", "Module", `x.Y required a="b";`, `org.apache.kafka.common.security.plain.PlainLoginModule required a="b"`,
		`org.apache.kafka.common.security.plain.PlainLoginModule required a="b;`, `org.apache.kafka.common.security.plain.PlainLoginModule maybe;`} {
		if _, err := PlainUsersFromJAAS(bad); err == nil {
			t.Fatalf("accepted %q", bad)
		}
	}
}

func TestServerConfig(t *testing.T) {
	ca, _ := NewCA("ca", time.Hour)
	is, _ := ca.Issue("b", []string{"127.0.0.1"}, nil, time.Hour)
	cfg, err := ServerConfig(TLSSettings{KeystoreCertChain: string(is.ChainPEM(ca)), KeystoreKey: string(is.KeyPEM()),
		ClientAuth: "requested", TruststoreCertificates: string(ca.CertPEM())})
	if err != nil || len(cfg.Certificates) != 1 || cfg.ClientCAs == nil {
		t.Fatal(cfg, err)
	}
	if _, err := ServerConfig(TLSSettings{KeystoreLocation: "x.jks", KeystoreType: "JKS"}); err == nil || !strings.Contains(err.Error(), "JKS") {
		t.Fatal(err)
	}
	enc := "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"
	if _, err := ServerConfig(TLSSettings{KeystoreCertChain: string(is.ChainPEM(ca)), KeystoreKey: enc}); err == nil || !strings.Contains(err.Error(), "encrypted") {
		t.Fatal(err)
	}
	if p := CertPrincipal(is.Cert); p != "User:CN=b" {
		t.Fatal(p)
	}
}
