// Package sim runs a whole Strata cluster -- its controllers' metadata
// quorum, dozens of broker-only nodes, every partition's Raft group -- in
// one process, over an in-memory network, to measure what a large cluster
// costs and how fast it reacts (docs/SCALING.md, "A large cluster in
// simulation").
//
// Nothing is modelled: every node is a real replication.Broker with its
// own data directory, log.Manager, metadata raft and partition groups, and
// its real transport (replication's Mux, with coalesced heartbeats, lanes
// and catch-up). Only the sockets are replaced: Network hands each broker
// a net.Listener and a dial function (BrokerConfig.ReplicationListener and
// ReplicationDial) whose connections are in-process pipes. Time is real:
// hashicorp/raft reads the wall clock and has no clock interface, so the
// simulation runs in real time with the production timeouts (Options).
//
// Faults: Isolate cuts every connection of a node and refuses new ones
// both ways (from its peers' side, a SIGKILL or a pulled cable); Cut does
// the same for one link; SetLatency delays every write on the network.
package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// ErrUnreachable is a dial to an address nobody listens on, or across a
// cut (ECONNREFUSED for TCP).
var ErrUnreachable = errors.New("sim: connection refused")

// Network is an in-memory network of named endpoints ("host:port"
// strings, never resolved). Safe for concurrent use.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*listener
	isolated  map[string]bool
	cut       map[[2]string]bool // both orders of a pair
	conns     map[*conn]struct{}
	latency   time.Duration
}

// NewNetwork returns an empty network.
func NewNetwork() *Network {
	return &Network{
		listeners: map[string]*listener{},
		isolated:  map[string]bool{},
		cut:       map[[2]string]bool{},
		conns:     map[*conn]struct{}{},
	}
}

// SetLatency delays every write on the network by d (one way, so a round
// trip costs 2d). The writer waits: a connection's writes leave one after
// another, as through a link of that latency and no bandwidth limit. 0 =
// none.
func (n *Network) SetLatency(d time.Duration) {
	n.mu.Lock()
	n.latency = d
	n.mu.Unlock()
}

// Listen opens a listener at addr.
func (n *Network) Listen(addr string) (net.Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.listeners[addr]; ok {
		return nil, fmt.Errorf("sim: listen %s: address already in use", addr)
	}
	l := &listener{n: n, addr: simAddr(addr), accept: make(chan net.Conn), done: make(chan struct{})}
	n.listeners[addr] = l
	return l, nil
}

// Dialer returns the dial function of the node whose address is from
// (BrokerConfig.ReplicationDial): its connections carry from as their
// local address, so that Isolate and Cut apply to them.
func (n *Network) Dialer(from string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) { return n.dial(ctx, from, addr) }
}

func (n *Network) dial(ctx context.Context, from, to string) (net.Conn, error) {
	n.mu.Lock()
	l := n.listeners[to]
	blocked := n.isolated[from] || n.isolated[to] || n.cut[[2]string{from, to}]
	n.mu.Unlock()
	if l == nil || blocked {
		return nil, &net.OpError{Op: "dial", Net: "sim", Addr: simAddr(to), Err: ErrUnreachable}
	}
	a, b := net.Pipe()
	client := &conn{Conn: a, n: n, local: simAddr(from), remote: simAddr(to)}
	server := &conn{Conn: b, n: n, local: simAddr(to), remote: simAddr(from)}
	if !n.track(client, server) {
		a.Close()
		b.Close()
		return nil, &net.OpError{Op: "dial", Net: "sim", Addr: simAddr(to), Err: ErrUnreachable}
	}
	select {
	case l.accept <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
	}
	client.Close()
	server.Close()
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: "sim", Addr: simAddr(to), Err: err}
	}
	return nil, &net.OpError{Op: "dial", Net: "sim", Addr: simAddr(to), Err: ErrUnreachable}
}

// track records both ends of a new connection, unless a cut between them
// was made meanwhile.
func (n *Network) track(cs ...*conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range cs {
		if n.blockedLocked(c) {
			return false
		}
	}
	for _, c := range cs {
		n.conns[c] = struct{}{}
	}
	return true
}

func (n *Network) blockedLocked(c *conn) bool {
	l, r := string(c.local), string(c.remote)
	return n.isolated[l] || n.isolated[r] || n.cut[[2]string{l, r}]
}

// Isolate cuts every connection from or to addr and refuses new ones,
// until Heal.
func (n *Network) Isolate(addr string) {
	n.mu.Lock()
	n.isolated[addr] = true
	doomed := n.doomedLocked()
	n.mu.Unlock()
	closeAll(doomed)
}

// Heal ends Isolate(addr).
func (n *Network) Heal(addr string) {
	n.mu.Lock()
	delete(n.isolated, addr)
	n.mu.Unlock()
}

// Cut cuts the link between a and b (both ways), until HealLink.
func (n *Network) Cut(a, b string) {
	n.mu.Lock()
	n.cut[[2]string{a, b}] = true
	n.cut[[2]string{b, a}] = true
	doomed := n.doomedLocked()
	n.mu.Unlock()
	closeAll(doomed)
}

// HealLink ends Cut(a, b).
func (n *Network) HealLink(a, b string) {
	n.mu.Lock()
	delete(n.cut, [2]string{a, b})
	delete(n.cut, [2]string{b, a})
	n.mu.Unlock()
}

// Conns is the number of open connection ends (two per connection).
func (n *Network) Conns() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.conns)
}

func (n *Network) doomedLocked() []*conn {
	var out []*conn
	for c := range n.conns {
		if n.blockedLocked(c) {
			out = append(out, c)
			delete(n.conns, c)
		}
	}
	return out
}

func closeAll(cs []*conn) {
	for _, c := range cs {
		c.Conn.Close()
	}
}

func (n *Network) untrack(c *conn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
}

func (n *Network) writeDelay() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.latency
}

// conn is one end of an in-memory connection (a net.Pipe: synchronous,
// with deadlines) with the addresses of its two nodes.
type conn struct {
	net.Conn
	n             *Network
	local, remote simAddr
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) Write(p []byte) (int, error) {
	if d := c.n.writeDelay(); d > 0 {
		time.Sleep(d)
	}
	return c.Conn.Write(p)
}

func (c *conn) Close() error {
	c.n.untrack(c)
	return c.Conn.Close()
}

// listener accepts the connections dialed to its address.
type listener struct {
	n      *Network
	addr   simAddr
	accept chan net.Conn
	done   chan struct{}
	once   sync.Once
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "sim", Addr: l.addr, Err: net.ErrClosed}
	}
}

func (l *listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.n.mu.Lock()
		if l.n.listeners[string(l.addr)] == l {
			delete(l.n.listeners, string(l.addr))
		}
		l.n.mu.Unlock()
	})
	return nil
}

func (l *listener) Addr() net.Addr { return l.addr }

// simAddr is an endpoint's name.
type simAddr string

func (a simAddr) Network() string { return "sim" }
func (a simAddr) String() string  { return string(a) }
