package auth

import (
	"crypto/x509"
	"errors"
	"testing"
	"time"
)

func TestNodeURIRoundTrips(t *testing.T) {
	for _, id := range []int32{0, 1, 17, 2147483647} {
		got, err := ParseNodeURI(NodeURI(id))
		if err != nil || got != id {
			t.Fatalf("%s: got %d, %v", NodeURI(id), got, err)
		}
	}
	for _, bad := range []string{"strata://node/", "strata://node/-1", "strata://node/+1", "strata://node/01",
		"strata://node/2147483648", "strata://node/1/2", "strata://node/1?x", "strata://node/ 1", "strata://nodes/1",
		"spiffe://node/1", "strata://node/0x1"} {
		if id, err := ParseNodeURI(bad); err == nil || !errors.Is(err, ErrNotNodeCert) {
			t.Errorf("%q: got %d, %v; want ErrNotNodeCert", bad, id, err)
		}
	}
}

func TestNodeIDFromCert(t *testing.T) {
	ca, err := NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(uris ...string) *x509.Certificate {
		is, err := ca.Issue("n", []string{"localhost"}, uris, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return is.Cert
	}
	if id, err := NodeIDFromCert(issue(NodeURI(3))); err != nil || id != 3 {
		t.Fatalf("node 3: got %d, %v", id, err)
	}
	// Other schemes are ignored; another strata URI is not.
	if id, err := NodeIDFromCert(issue("https://example.com/x", NodeURI(5))); err != nil || id != 5 {
		t.Fatalf("node 5 beside another URI: got %d, %v", id, err)
	}
	for name, c := range map[string]*x509.Certificate{
		"no URI":            issue(),
		"two node URIs":     issue(NodeURI(1), NodeURI(2)),
		"a bad strata URI":  issue("strata://node/x"),
		"strata, not node":  issue("strata://user/1"),
		"only another URI":  issue("spiffe://cluster/node/1"),
		"the same ID twice": issue(NodeURI(1), NodeURI(1)),
	} {
		if id, err := NodeIDFromCert(c); !errors.Is(err, ErrNotNodeCert) {
			t.Errorf("%s: got %d, %v; want ErrNotNodeCert", name, id, err)
		}
	}
}
