package protocol

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/auth"
	"github.com/strata-io/strata/replication"
)

// Listener security (Kafka's security protocols): a listener is
// PLAINTEXT, SSL (TLS, with client certificates when its tls.Config asks
// for them), SASL_PLAINTEXT or SASL_SSL. On a SASL listener a connection
// must authenticate first: until SaslAuthenticate succeeds only
// ApiVersions, SaslHandshake and SaslAuthenticate are served, anything
// else closes the connection (as Kafka does). The authenticated principal
// ("User:name"; on an SSL listener with client certificates "User:" and
// the certificate's subject) is recorded on the connection.

// Security protocols.
const (
	ProtoPlaintext     = "PLAINTEXT"
	ProtoSSL           = "SSL"
	ProtoSASLPlaintext = "SASL_PLAINTEXT"
	ProtoSASLSSL       = "SASL_SSL"
)

// AnonymousPrincipal is the principal of a connection that did not
// authenticate (Kafka's User:ANONYMOUS).
const AnonymousPrincipal = "User:ANONYMOUS"

// ListenerSecurity is one listener's security.
type ListenerSecurity struct {
	Name     string // the listener's name (listeners=NAME://...)
	Protocol string // PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
	// TLS is the listener's TLS configuration (SSL, SASL_SSL).
	TLS *tls.Config
	// Mechanisms are the SASL mechanisms enabled (SASL listeners).
	Mechanisms []string
	// PlainUsers are PLAIN's users and passwords.
	PlainUsers auth.PlainUsers
	// Scram looks SCRAM credentials up (nil: the broker's replicated
	// credentials, AlterUserScramCredentials).
	Scram auth.ScramLookup
	// OAuth validates OAUTHBEARER tokens (nil: OAUTHBEARER refused).
	OAuth *auth.OAuthValidator
	// ReauthAfter is connections.max.reauth.ms (KIP-368; 0: sessions do
	// not expire, except an OAUTHBEARER token's at its exp).
	ReauthAfter time.Duration
	// AdvertisedHost and AdvertisedPort are the address clients of this
	// listener are told for this broker; empty: the broker's registered
	// address. Other brokers are named by their registered address for
	// this listener (replication.BrokerInfo.Endpoints), else their main one.
	AdvertisedHost string
	AdvertisedPort int32
}

func (l *ListenerSecurity) sasl() bool {
	return l != nil && (l.Protocol == ProtoSASLPlaintext || l.Protocol == ProtoSASLSSL)
}

// ServeListener accepts connections on ln with sec's security until Close.
func (s *Server) ServeListener(ln net.Listener, sec *ListenerSecurity) error {
	if sec != nil && (sec.Protocol == ProtoSSL || sec.Protocol == ProtoSASLSSL) && sec.TLS == nil {
		ln.Close()
		return errors.New("protocol: listener " + sec.Name + " is " + sec.Protocol + " but has no TLS configuration")
	}
	return s.serve(ln, sec)
}

// connAuth is a connection's authentication state.
type connAuth struct {
	mu        sync.Mutex
	done      bool   // authenticated (or nothing to authenticate)
	failed    bool   // the last SaslAuthenticate failed: close after its answer
	mech      string // chosen by SaslHandshake
	exchange  auth.Authenticator
	principal string
	// expiry ends the session (KIP-368; zero: never): a request other
	// than SaslHandshake/SaslAuthenticate after it closes the connection.
	expiry time.Time
	reauth bool // a re-authentication is under way
}

// sessionExpired reports whether the connection's session lifetime is
// over (it must re-authenticate before anything else).
func (c *conn) sessionExpired() bool {
	if !c.sec.sasl() {
		return false
	}
	c.auth.mu.Lock()
	defer c.auth.mu.Unlock()
	return c.auth.done && !c.auth.expiry.IsZero() && !time.Now().Before(c.auth.expiry)
}

// ErrSessionExpired closes a connection that sends a request after its
// session lifetime without re-authenticating (KIP-368).
var ErrSessionExpired = errors.New("protocol: SASL session expired")

// Principal is the connection's authenticated principal.
func (c *conn) Principal() string {
	c.auth.mu.Lock()
	defer c.auth.mu.Unlock()
	if c.auth.principal == "" {
		return AnonymousPrincipal
	}
	return c.auth.principal
}

// needsAuth reports whether the connection must still authenticate.
func (c *conn) needsAuth() bool {
	if !c.sec.sasl() {
		return false
	}
	c.auth.mu.Lock()
	defer c.auth.mu.Unlock()
	return !c.auth.done
}

// allowedBeforeAuth are the APIs served before SASL authentication.
func allowedBeforeAuth(key int16) bool { return key == 17 || key == 18 || key == 36 }

// isSASLKey: requests handled one at a time by the reader (the next
// request is read once this one is answered), so authentication state is
// settled before the next request is looked at.
func isSASLKey(key int16) bool { return key == 17 || key == 36 }

// tlsHandshake completes a TLS connection's handshake within the request
// read timeout and records its client certificate's principal (SSL).
func (c *conn) tlsHandshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.RequestReadTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.log.Info("closing connection: TLS handshake failed", "err", err)
		return false
	}
	if c.sec.Protocol == ProtoSSL {
		st := tc.ConnectionState()
		if len(st.PeerCertificates) > 0 {
			c.auth.mu.Lock()
			c.auth.principal = auth.CertPrincipal(st.PeerCertificates[0])
			c.auth.mu.Unlock()
		}
	}
	return true
}

type connCtxKey struct{}

func connFrom(ctx context.Context) *conn {
	c, _ := ctx.Value(connCtxKey{}).(*conn)
	return c
}

// rewriteAddrs rewrites the broker addresses in a response to a client
// of a listener with addresses of its own (AdvertisedHost set): this
// broker's address on the listener; another broker's registered address
// for the listener's name (replication.BrokerInfo.Endpoints), else its
// main one. Metadata, FindCoordinator, DescribeCluster and the leader
// hints of Produce, Fetch, ShareFetch and ShareAcknowledge name brokers.
func (s *Server) rewriteAddrs(resp kmsg.Response, sec *ListenerSecurity) {
	if sec == nil || sec.AdvertisedHost == "" || resp == nil || s.broker == nil {
		return
	}
	var infos map[int32]replication.BrokerInfo
	addr := func(id int32, host *string, port *int32) {
		if id == s.broker.NodeID() {
			*host, *port = sec.AdvertisedHost, sec.AdvertisedPort
			return
		}
		if infos == nil {
			infos = map[int32]replication.BrokerInfo{}
			for _, bi := range s.broker.Brokers() {
				infos[bi.NodeID] = bi
			}
		}
		if h, p, ok := endpointFor(infos[id], sec.Name); ok {
			*host, *port = h, p
		}
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			addr(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.FindCoordinatorResponse:
		if r.Version < 4 && r.NodeID >= 0 {
			addr(r.NodeID, &r.Host, &r.Port)
		}
		for i := range r.Coordinators {
			if r.Coordinators[i].NodeID >= 0 {
				addr(r.Coordinators[i].NodeID, &r.Coordinators[i].Host, &r.Coordinators[i].Port)
			}
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			addr(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.ProduceResponse:
		for i := range r.Brokers {
			addr(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.FetchResponse:
		for i := range r.Brokers {
			addr(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *fetchResponse:
		s.rewriteAddrs(r.FetchResponse, sec)
	case *kmsg.ShareFetchResponse:
		for i := range r.NodeEndpoints {
			addr(r.NodeEndpoints[i].NodeID, &r.NodeEndpoints[i].Host, &r.NodeEndpoints[i].Port)
		}
	case *shareFetchResponse:
		s.rewriteAddrs(r.ShareFetchResponse, sec)
	case *kmsg.ShareAcknowledgeResponse:
		for i := range r.NodeEndpoints {
			addr(r.NodeEndpoints[i].NodeID, &r.NodeEndpoints[i].Host, &r.NodeEndpoints[i].Port)
		}
	}
}

// endpointFor finds bi's advertised address on listener name.
func endpointFor(bi replication.BrokerInfo, name string) (string, int32, bool) {
	for _, ep := range strings.Split(bi.Endpoints, ",") {
		n, hostport, ok := strings.Cut(strings.TrimSpace(ep), "://")
		if !ok || n != name {
			continue
		}
		if host, port, err := net.SplitHostPort(hostport); err == nil {
			if p, err := strconv.Atoi(port); err == nil {
				return host, int32(p), true
			}
		}
	}
	return "", 0, false
}

// ErrUnauthenticated closes a SASL listener's connection that sends
// another request before it has authenticated (Kafka closes it too).
var ErrUnauthenticated = errors.New("protocol: request before authentication")

// errSASLFailed closes a connection after its failed SaslAuthenticate has
// been answered.
var errSASLFailed = errors.New("protocol: SASL authentication failed")

// awaitSASL waits until p (SaslHandshake or SaslAuthenticate) is handled
// before the reader goes on, and closes the connection behind its answer
// when authentication failed. It returns false when reading must stop.
func (c *conn) awaitSASL(p *pending) bool {
	select {
	case <-p.done:
	case <-c.ctx.Done():
		return false
	}
	c.auth.mu.Lock()
	failed := c.auth.failed
	c.auth.mu.Unlock()
	if failed {
		c.enqueueErr(errSASLFailed)
		return false
	}
	return true
}

// newSecuredConn is newConn on a listener with security sec: a TLS
// listener's connection is wrapped (its handshake runs first thing in the
// reader, tlsHandshake).
func newSecuredConn(s *Server, nc net.Conn, sec *ListenerSecurity) *conn {
	if sec != nil && sec.TLS != nil {
		nc = tls.Server(nc, sec.TLS)
	}
	c := newConn(s, nc)
	c.sec = sec
	return c
}
