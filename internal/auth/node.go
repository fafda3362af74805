package auth

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Node certificates: brokers authenticate each other on the replication
// listener with certificates from the cluster's CA whose subject
// alternative names include exactly one URI of the form
//
//	strata://node/<id>
//
// where <id> is the node.id in decimal, without sign or leading zeros
// (strata://node/0, strata://node/17). A certificate without such a URI is
// not a node certificate (a Kafka client's certificate from the same CA is
// refused on the replication listener); one with two is refused too.

// nodeURIPrefix is the node-ID SAN's form before the ID.
const nodeURIPrefix = "strata://node/"

// NodeURI is the SAN URI that names node id.
func NodeURI(id int32) string { return nodeURIPrefix + strconv.Itoa(int(id)) }

// ErrNotNodeCert is a certificate that names no node, or names one badly.
var ErrNotNodeCert = errors.New("not a Strata node certificate")

// NodeIDFromCert returns the node ID a certificate's URI SAN names.
func NodeIDFromCert(c *x509.Certificate) (int32, error) {
	id, found := int32(-1), false
	for _, u := range c.URIs {
		if u == nil || !strings.EqualFold(u.Scheme, "strata") {
			continue
		}
		n, err := ParseNodeURI(u.String())
		if err != nil {
			return -1, err
		}
		if found {
			return -1, fmt.Errorf("%w: two node URIs (%s and %s)", ErrNotNodeCert, NodeURI(id), NodeURI(n))
		}
		id, found = n, true
	}
	if !found {
		return -1, fmt.Errorf("%w: no %s<id> subject alternative name (subject %q)", ErrNotNodeCert, nodeURIPrefix, c.Subject.String())
	}
	return id, nil
}

// ParseNodeURI parses strata://node/<id>: the ID is a non-negative int32
// in canonical decimal (what NodeURI writes), nothing after it.
func ParseNodeURI(s string) (int32, error) {
	rest, ok := strings.CutPrefix(s, nodeURIPrefix)
	if !ok {
		return -1, fmt.Errorf("%w: URI %q is not %s<id>", ErrNotNodeCert, s, nodeURIPrefix)
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != rest {
		return -1, fmt.Errorf("%w: URI %q: node ID %q is not a non-negative decimal int32", ErrNotNodeCert, s, rest)
	}
	return int32(n), nil
}
