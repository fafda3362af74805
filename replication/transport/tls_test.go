package transport

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/internal/auth"
	"github.com/strata-io/strata/internal/testwait"
)

// testCA is a cluster CA for transport tests.
type testCA struct{ ca *auth.CA }

func newTestCA(t *testing.T) testCA {
	t.Helper()
	ca, err := auth.NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return testCA{ca}
}

// cert issues a certificate with the given URI SANs (a node certificate
// with auth.NodeURI(id); none makes a Kafka client's certificate).
func (c testCA) cert(t *testing.T, uris ...string) tls.Certificate {
	t.Helper()
	is, err := c.ca.Issue("peer", []string{"127.0.0.1"}, uris, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(is.ChainPEM(c.ca), is.KeyPEM())
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func (c testCA) node(t *testing.T, id int32) *TLS {
	t.Helper()
	pool := newPool(c)
	return &TLS{Certificate: c.cert(t, auth.NodeURI(id)), CAs: pool}
}

func newPool(c testCA) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.ca.Cert)
	return p
}

// logLines collects a Mux's log lines.
type logLines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newTLSMux starts a Mux with mutual TLS; admit is Config.Admit.
func newTLSMux(t *testing.T, id string, tt *TLS, admit func(string) error, logs *logLines) *Mux {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	m, err := NewMux(Config{Listener: ln, Logger: logger, RPCTimeout: 5 * time.Second, LocalID: id, TLS: tt, Admit: admit})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func refuseAll(id string) error { return refused("node %s is not registered", id) }

// TestMuxMutualTLS: two Muxes with node certificates of one CA carry
// every kind of traffic (RPCs, a snapshot, a forwarded request) over
// TLS, and a node the broker's Admit does not know (not yet registered)
// is admitted by its certificate.
func TestMuxMutualTLS(t *testing.T) {
	ca := newTestCA(t)
	a := newTLSMux(t, "1", ca.node(t, 1), refuseAll, nil)
	b := newTLSMux(t, "2", ca.node(t, 2), refuseAll, nil)
	ga, gb := newTestGroup(t, a, "g"), newTestGroup(t, b, "g")
	stop := make(chan struct{})
	defer close(stop)
	snaps := make(chan []byte, 1)
	go serveEcho(gb, stop, snaps)

	h := testHeader("1")
	var rv raft.RequestVoteResponse
	if err := ga.RequestVote("2", b.Addr(), &raft.RequestVoteRequest{RPCHeader: h, Term: 3}, &rv); err != nil || !rv.Granted {
		t.Fatalf("vote over TLS: %+v %v", rv, err)
	}
	var ae raft.AppendEntriesResponse
	req := &raft.AppendEntriesRequest{RPCHeader: h, Term: 3, Leader: h.Addr, PrevLogEntry: 4, PrevLogTerm: 2,
		Entries: []*raft.Log{{Index: 5, Term: 3, Type: raft.LogCommand, Data: []byte("x")}}}
	if err := ga.AppendEntries("2", b.Addr(), req, &ae); err != nil || ae.LastLog != 5 {
		t.Fatalf("append over TLS: %+v %v", ae, err)
	}
	data := bytes.Repeat([]byte("snap"), 50000)
	snapReq := &raft.InstallSnapshotRequest{RPCHeader: h, Term: 3, SnapshotVersion: 1, LastLogIndex: 10, LastLogTerm: 3, ConfigurationIndex: 1,
		Configuration: validConfig(), Size: int64(len(data))}
	var is raft.InstallSnapshotResponse
	if err := ga.InstallSnapshot("2", b.Addr(), snapReq, &is, bytes.NewReader(data)); err != nil || !is.Success {
		t.Fatalf("snapshot over TLS: %+v %v", is, err)
	}
	if got := <-snaps; !bytes.Equal(got, data) {
		t.Fatal("snapshot not delivered intact")
	}
	b.SetForwardHandler(func(req []byte) ([]byte, error) { return append([]byte("re:"), req...), nil })
	if resp, err := a.Forward(b.Addr(), []byte("hello"), 5*time.Second); err != nil || string(resp) != "re:hello" {
		t.Fatalf("forward over TLS: %q %v", resp, err)
	}
	if n := b.peersRefused.Load(); n != 0 {
		t.Fatalf("%d peers refused", n)
	}
}

// TestMuxTLSRefusesForgedPeers: issue 19's forged peers, against a Mux
// with mutual TLS: a plaintext client, a client with a certificate of
// another CA, one with a certificate of the cluster's CA that names no
// node (a Kafka client's), a node whose certificate names another ID
// than its preface, and a node speaking for another node in a request.
// Each is refused with a log line, raft sees nothing, and a real peer
// still gets through.
func TestMuxTLSRefusesForgedPeers(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	logs := &logLines{}
	m := newTLSMux(t, "2", ca.node(t, 2), nil, logs)
	g := newTestGroup(t, m, MetadataGroup)
	vote := func(id string) []byte {
		return rawFrame(t, kindRequestVote, 1, MetadataGroup, &raft.RequestVoteRequest{RPCHeader: testHeader(id), Term: 2})
	}
	dialTLS := func(cert tls.Certificate) net.Conn {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", string(m.Addr()),
			&tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true})
		if err != nil {
			return nil // refused during the handshake
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	cases := []struct {
		name    string
		conn    func() net.Conn
		preface []byte
		frame   []byte
		log     string
	}{
		{"plaintext", func() net.Conn { return dialRaw(t, m, nil) }, rawPreface(muxProtocolVersion, muxModeRPC, "1"), vote("1"), "TLS handshake failed"},
		{"another CA's node certificate", func() net.Conn { return dialTLS(other.cert(t, auth.NodeURI(1))) },
			rawPreface(muxProtocolVersion, muxModeRPC, "1"), vote("1"), "TLS handshake failed"},
		{"the CA's certificate without a node ID", func() net.Conn { return dialTLS(ca.cert(t)) },
			rawPreface(muxProtocolVersion, muxModeRPC, "1"), vote("1"), "not a Strata node certificate"},
		{"node 3 claiming node 1", func() net.Conn { return dialTLS(ca.cert(t, auth.NodeURI(3))) },
			rawPreface(muxProtocolVersion, muxModeRPC, "1"), vote("1"), "but its certificate names node 3"},
		{"node 3 speaking for node 1", func() net.Conn { return dialTLS(ca.cert(t, auth.NodeURI(3))) },
			rawPreface(muxProtocolVersion, muxModeRPC, "3"), vote("1"), "on a connection of node"},
		{"node 3 sending a snapshot for node 1", func() net.Conn { return dialTLS(ca.cert(t, auth.NodeURI(3))) },
			rawPreface(muxProtocolVersion, muxModeSnapshot, "3"),
			rawFrame(t, kindInstallSnapshot, 1, MetadataGroup, &raft.InstallSnapshotRequest{RPCHeader: testHeader("1"), SnapshotVersion: 1, Term: 2,
				LastLogIndex: 20, LastLogTerm: 2, Configuration: validConfig(), ConfigurationIndex: 1, Size: 25}), "bad InstallSnapshot"},
	}
	for _, tc := range cases {
		before := len(logs.String())
		if c := tc.conn(); c != nil {
			c.Write(tc.preface)
			c.Write(tc.frame)
			c.Write(make([]byte, 25))
			if !closedByPeer(c) {
				t.Errorf("%s: connection not closed", tc.name)
			}
		}
		testwait.For(t, 10*time.Second, func() bool { return strings.Contains(logs.String()[before:], tc.log) }, "%s: log line", tc.name)
		select {
		case rpc := <-g.Consumer():
			t.Fatalf("%s: raft was handed %T", tc.name, rpc.Command)
		default:
		}
	}
	if n := m.peersRefused.Load(); n != 4 {
		t.Errorf("peers refused: %d, want 4", n)
	}
	if n := m.framesRefused.Load(); n != 2 {
		t.Errorf("frames refused: %d, want 2", n)
	}

	// A node of the cluster's CA, speaking for itself, reaches raft.
	c := dialTLS(ca.cert(t, auth.NodeURI(3)))
	if c == nil {
		t.Fatal("node 3's handshake failed")
	}
	c.Write(rawPreface(muxProtocolVersion, muxModeRPC, "3"))
	c.Write(vote("3"))
	select {
	case rpc := <-g.Consumer():
		if _, ok := rpc.Command.(*raft.RequestVoteRequest); !ok {
			t.Fatalf("raft was handed %T", rpc.Command)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("node 3's vote did not reach raft")
	}
}

// TestMuxTLSDialerVerifiesTheServer: a Mux does not talk to a server
// whose certificate is of another CA, or of the CA but names no node, or
// to a plaintext server, or to one whose certificate names another node
// than the one expected at its address; and NewMux refuses a certificate
// that names another node than the Mux's own.
func TestMuxTLSDialerVerifiesTheServer(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	a := newTLSMux(t, "1", ca.node(t, 1), nil, nil)
	ga := newTestGroup(t, a, "g")
	// A TLS server of the cluster's CA whose certificate names no node.
	noID, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{ca.cert(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer noID.Close()
	go func() {
		for {
			c, err := noID.Accept()
			if err != nil {
				return
			}
			go func() { c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	plain := newTestMux(t)
	newTestGroup(t, plain, "g")
	otherCA := newTLSMux(t, "2", other.node(t, 2), nil, nil)
	newTestGroup(t, otherCA, "g")
	for name, addr := range map[string]raft.ServerAddress{
		"another CA":       otherCA.Addr(),
		"no node ID":       raft.ServerAddress(noID.Addr().String()),
		"plaintext server": plain.Addr(),
	} {
		var rv raft.RequestVoteResponse
		err := ga.RequestVote("2", addr, &raft.RequestVoteRequest{RPCHeader: testHeader("1"), Term: 3}, &rv)
		if err == nil || !errors.Is(err, errDial) {
			t.Errorf("%s: got %v, want a dial error", name, err)
		}
	}
	// A node whose certificate names another node than the one the
	// dialer expects at that address (controller.quorum.voters).
	b := newTLSMux(t, "2", ca.node(t, 2), nil, nil)
	gb := newTestGroup(t, b, "g")
	stop := make(chan struct{})
	defer close(stop)
	go serveEcho(gb, stop, nil)
	for want, ok := range map[string]bool{"3": false, "2": true} {
		lnA, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a, err := NewMux(Config{Listener: lnA, Logger: slog.New(slog.DiscardHandler), LocalID: "1", TLS: ca.node(t, 1),
			ExpectPeer: func(addr string) (string, bool) { return want, addr == string(b.Addr()) }})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		var rv raft.RequestVoteResponse
		err = newTestGroup(t, a, "g").RequestVote("2", b.Addr(), &raft.RequestVoteRequest{RPCHeader: testHeader("1"), Term: 3}, &rv)
		if ok && (err != nil || !rv.Granted) {
			t.Errorf("node 2 where node 2 is expected: %+v %v", rv, err)
		}
		if !ok && (err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "presents node 2's certificate, not node 3's")) {
			t.Errorf("node 2 where node 3 is expected: %v", err)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = NewMux(Config{Listener: ln, LocalID: "1", TLS: ca.node(t, 2)})
	if err == nil || !strings.Contains(err.Error(), "names node 2, but this is node 1") {
		t.Fatalf("NewMux with another node's certificate: %v", err)
	}
}

// TestMuxTLSCARotation: with both CAs in the truststore, a node whose
// certificate is of the new CA and one whose certificate is of the old
// talk to each other (a rolling change of the cluster's CA), and once the
// old CA leaves a node's truststore, its certificates are refused there.
func TestMuxTLSCARotation(t *testing.T) {
	oldCA, newCA := newTestCA(t), newTestCA(t)
	both := x509.NewCertPool()
	both.AddCert(oldCA.ca.Cert)
	both.AddCert(newCA.ca.Cert)
	a := newTLSMux(t, "1", &TLS{Certificate: oldCA.cert(t, auth.NodeURI(1)), CAs: both}, nil, nil)
	b := newTLSMux(t, "2", &TLS{Certificate: newCA.cert(t, auth.NodeURI(2)), CAs: both}, nil, nil)
	c := newTLSMux(t, "3", &TLS{Certificate: newCA.cert(t, auth.NodeURI(3)), CAs: newPool(newCA)}, nil, nil)
	ga, gb := newTestGroup(t, a, "g"), newTestGroup(t, b, "g")
	newTestGroup(t, c, "g")
	stop := make(chan struct{})
	defer close(stop)
	go serveEcho(gb, stop, nil)
	var rv raft.RequestVoteResponse
	if err := ga.RequestVote("2", b.Addr(), &raft.RequestVoteRequest{RPCHeader: testHeader("1"), Term: 3}, &rv); err != nil || !rv.Granted {
		t.Fatalf("old CA's node to new CA's node, both trusted: %+v %v", rv, err)
	}
	if err := ga.RequestVote("3", c.Addr(), &raft.RequestVoteRequest{RPCHeader: testHeader("1"), Term: 3}, &rv); err == nil {
		t.Fatal("a node that no longer trusts the old CA talked to one of its nodes")
	}
}
