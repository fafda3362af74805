package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/strata-io/strata/internal/auth"
)

// Mutual TLS between brokers (issue 19, item 1; docs/ARCHITECTURE.md,
// "Broker-to-broker security"). With Config.TLS set, every connection
// of the replication listener, and every connection a Mux dials (raft
// RPCs of every group, heartbeat rounds, snapshots, forwarded metadata
// requests, catch-up), is TLS 1.3 with a certificate on both sides:
//
//   - each side verifies the other's chain against the cluster's CA
//     (TLS.CAs) and takes the node ID from the certificate's URI
//     SAN strata://node/<id> (auth.NodeIDFromCert); a certificate from
//     another CA, or one of the cluster's CA without a node URI (a Kafka
//     client's), fails the handshake;
//   - the accepting side then requires the node ID of the preface to be
//     the certificate's: the connection's peer is authenticated, and
//     every request on it must name that node (checkHeader), so a node can
//     speak only for itself;
//   - the certificate admits the node: Config.Admit (voters and
//     registered brokers) is for plaintext transports only, so a node
//     with a valid certificate is admitted before it registers (a
//     broker-only node joining as a non-voter, issue 23).
//
// The dialing side checks that the server holds a node certificate of
// the CA, and, when it knows which node the address belongs to
// (Config.ExpectPeer: the broker's controller.quorum.voters), that the
// certificate names that node: a node certificate names a node, not a
// host (no DNS or IP SAN is needed, so proxies and NAT work). At an
// address it does not know, any node of the CA is believed.

// TLS is the replication transport's mutual TLS.
type TLS struct {
	// Certificate is this node's: its chain from the cluster's CA and
	// its key; the leaf's URI SAN names the node (auth.NodeURI).
	Certificate tls.Certificate
	// CAs are the CAs that sign node certificates (the truststore).
	CAs *x509.CertPool
}

// tlsHandshakeTimeout bounds a TLS handshake on a replication connection
// (on top of the dial): an accepted connection that never finishes one is
// closed.
const tlsHandshakeTimeout = 10 * time.Second

// leafNodeID returns the node ID of a TLS certificate's leaf.
func leafNodeID(c tls.Certificate) (int32, error) {
	leaf := c.Leaf
	if leaf == nil {
		if len(c.Certificate) == 0 {
			return -1, errors.New("no certificate")
		}
		var err error
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return -1, err
		}
	}
	return auth.NodeIDFromCert(leaf)
}

// setupTLS checks cfg.TLS and builds the Mux's server and client TLS
// configurations (both nil without TLS).
func (m *Mux) setupTLS() error {
	t := m.cfg.TLS
	if t == nil {
		return nil
	}
	if t.CAs == nil {
		return errors.New("replication: TLS without the CAs that sign node certificates")
	}
	id, err := leafNodeID(t.Certificate)
	if err != nil {
		return fmt.Errorf("replication: this node's certificate: %w", err)
	}
	if m.cfg.LocalID != "" && strconv.Itoa(int(id)) != m.cfg.LocalID {
		return fmt.Errorf("replication: this node's certificate names node %d, but this is node %s (issue a certificate with `strata certs issue --node-id %s`)",
			id, m.cfg.LocalID, m.cfg.LocalID)
	}
	m.tlsServer = &tls.Config{
		Certificates: []tls.Certificate{t.Certificate},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    t.CAs,
		MinVersion:   tls.VersionTLS13,
		// A client certificate of the CA that names no node fails the
		// handshake here, before the preface.
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := peerNodeID(cs)
			return err
		},
	}
	m.tlsClient = &tls.Config{
		Certificates: []tls.Certificate{t.Certificate},
		MinVersion:   tls.VersionTLS13,
		// The chain is verified below against the CA, without a host
		// name: a node certificate names a node, not an address.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("replication: the peer sent no certificate")
			}
			opts := x509.VerifyOptions{Roots: t.CAs, Intermediates: x509.NewCertPool(),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
				return fmt.Errorf("replication: the peer's certificate: %w", err)
			}
			_, err := auth.NodeIDFromCert(cs.PeerCertificates[0])
			return err
		},
	}
	return nil
}

// peerNodeID is the node ID of a verified TLS peer.
func peerNodeID(cs tls.ConnectionState) (int32, error) {
	if len(cs.PeerCertificates) == 0 {
		return -1, errors.New("replication: the peer sent no certificate")
	}
	return auth.NodeIDFromCert(cs.PeerCertificates[0])
}

// acceptTLS runs the server side of the handshake on an accepted
// connection and returns it with its peer's node ID ("" without TLS).
func (m *Mux) acceptTLS(c net.Conn) (net.Conn, string, error) {
	if m.tlsServer == nil {
		return c, "", nil
	}
	tc := tls.Server(c, m.tlsServer)
	tc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	if err := tc.Handshake(); err != nil {
		return nil, "", err
	}
	tc.SetDeadline(time.Time{})
	id, err := peerNodeID(tc.ConnectionState())
	if err != nil {
		return nil, "", err
	}
	return rawClose{tc, c}, strconv.Itoa(int(id)), nil
}

// dialTLS runs the client side of the handshake on a connection dialed
// to target, and checks the server is the node expected there.
func (m *Mux) dialTLS(ctx context.Context, c net.Conn, target string) (net.Conn, error) {
	if m.tlsClient == nil {
		return c, nil
	}
	tc := tls.Client(c, m.tlsClient)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	if m.cfg.ExpectPeer != nil {
		if want, ok := m.cfg.ExpectPeer(target); ok {
			id, err := peerNodeID(tc.ConnectionState())
			if err == nil && strconv.Itoa(int(id)) != want {
				err = fmt.Errorf("%w: the server at %s presents node %d's certificate, not node %s's", ErrRefused, target, id, want)
			}
			if err != nil {
				m.logger.Warn("raft transport: server refused; closing", "remote", target, "err", err)
				return nil, err
			}
		}
	}
	return rawClose{tc, c}, nil
}

// rawClose is a TLS connection whose Close closes the TCP connection at
// once. tls.Conn.Close first sends a close_notify alert,
// waiting up to 5 s for a peer that does not read and behind a write in
// progress; a connection is failed (clientConn.fail) from raft's own
// goroutines, and a frameWriter's under its lock, precisely when the
// peer stopped answering; the far side takes the EOF as the end anyway.
type rawClose struct {
	*tls.Conn
	raw net.Conn
}

func (c rawClose) Close() error { return c.raw.Close() }

// admitAuthenticated decides on a peer that named itself claimed in its
// preface over a connection whose certificate names certID.
func admitAuthenticated(claimed, certID string) error {
	if claimed != certID {
		return fmt.Errorf("%w: the peer claims node %q but its certificate names node %s", ErrRefused, claimed, certID)
	}
	return nil
}
