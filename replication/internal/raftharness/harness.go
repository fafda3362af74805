// Package raftharness is an in-process cluster of raft nodes for tests, in
// the manner of hashicorp's testing.go, but over the real transport (a Mux
// per node on 127.0.0.1) so that tests exercise the wire code. Faults are
// injected at the dialer (faultNet): a cut link refuses new connections
// and closes the ones it carries, in both directions. Each node may run
// several groups over its one Mux (group ids "g0", "g1", ...), which is
// how the multiplexing and the idle cost of many groups are tested.
//
// Only tests import it (replication's and replication/transport's), so it
// is not compiled into the binary.
package raftharness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/replication/raftconf"
	"github.com/strata-io/strata/replication/transport"
)

// faultNet decides which links are up. Safe for concurrent use.
type faultNet struct {
	mu    sync.Mutex
	cut   map[[2]string]bool       // protected by mu; key: dialer addr, target addr
	conns map[[2]string][]net.Conn // protected by mu; live connections per link
}

func newFaultNet() *faultNet {
	return &faultNet{cut: map[[2]string]bool{}, conns: map[[2]string][]net.Conn{}}
}

func linkKey(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// dialer returns the Dial function of the node at from.
func (n *faultNet) dialer(from string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		k := linkKey(from, addr)
		n.mu.Lock()
		cut := n.cut[k]
		n.mu.Unlock()
		if cut {
			return nil, fmt.Errorf("harness: link %s-%s is cut", from, addr)
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.cut[k] { // cut while dialing
			c.Close()
			return nil, fmt.Errorf("harness: link %s-%s is cut", from, addr)
		}
		n.conns[k] = append(n.conns[k], c)
		return c, nil
	}
}

// setCut cuts or restores the link between a and b.
func (n *faultNet) setCut(a, b string, cut bool) {
	k := linkKey(a, b)
	n.mu.Lock()
	defer n.mu.Unlock()
	if !cut {
		delete(n.cut, k)
		return
	}
	n.cut[k] = true
	for _, c := range n.conns[k] {
		c.Close()
	}
	delete(n.conns, k)
}

// member is one node: a Mux and, per group, a raft instance.
type member struct {
	id    raft.ServerID
	mux   *transport.Mux
	rafts []*raft.Raft
	fsms  []raft.FSM
}

// Config configures New.
type Config struct {
	Nodes  int // 1..9
	Groups int // groups per node, default 1
	Timing raftconf.Timing
	// FSM returns node i's state machine for group g; nil = a counting FSM.
	FSM func(node, group int) raft.FSM
	// Stores returns node i's raft stores for group g; nil = in memory
	// (lost on Restart). Called again at each Restart.
	Stores func(node, group int) (raft.LogStore, raft.StableStore, raft.SnapshotStore, error)
	Logger *slog.Logger
}

// Harness is a running in-process cluster.
type Harness struct {
	cfg     Config
	net     *faultNet
	nodes   []*member
	addrs   []string
	servers []raft.Server
}

// CountFSM counts applied entries and keeps the first maxCountData of
// them; a minimal FSM for transport tests (the FSM of every group unless
// Config.FSM says otherwise).
type CountFSM struct {
	mu      sync.Mutex
	applied int
	data    []string
}

const maxCountData = 1000

func (f *CountFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied++
	if len(f.data) < maxCountData {
		f.data = append(f.data, string(l.Data))
	}
	return f.applied
}

// Has reports whether data is among the first maxCountData entries.
func (f *CountFSM) Has(data string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.data {
		if d == data {
			return true
		}
	}
	return false
}

// Count is the number of entries applied.
func (f *CountFSM) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

func (f *CountFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return countSnapshot(f.applied), nil
}

func (f *CountFSM) Restore(rc io.ReadCloser) error { return rc.Close() }

type countSnapshot int

func (s countSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write([]byte(strconv.Itoa(int(s)))); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}
func (countSnapshot) Release() {}

// New starts cfg.Nodes nodes, each with cfg.Groups groups, every
// group bootstrapped with all nodes as voters, on in-memory raft stores.
func New(cfg Config) (*Harness, error) {
	if cfg.Nodes < 1 || cfg.Nodes > 9 {
		return nil, fmt.Errorf("harness: %d nodes (1..9)", cfg.Nodes)
	}
	if cfg.Groups <= 0 {
		cfg.Groups = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Harness{cfg: cfg, net: newFaultNet()}
	lns := make([]net.Listener, cfg.Nodes)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			h.closeListeners(lns)
			return nil, err
		}
		lns[i] = ln
		h.addrs = append(h.addrs, ln.Addr().String())
	}
	servers := make([]raft.Server, cfg.Nodes)
	for i := range servers {
		servers[i] = raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(i)), Address: raft.ServerAddress(h.addrs[i])}
	}
	h.servers = servers
	for i := 0; i < cfg.Nodes; i++ {
		h.nodes = append(h.nodes, &member{id: servers[i].ID})
		if err := h.startNode(i, lns[i]); err != nil {
			h.closeListeners(lns[i+1:])
			h.Close()
			return nil, err
		}
	}
	return h, nil
}

// startNode starts node i's Mux on ln and every group on it.
func (h *Harness) startNode(i int, ln net.Listener) error {
	mux, err := transport.NewMux(transport.Config{Listener: ln, Dial: h.net.dialer(h.addrs[i]), Logger: h.cfg.Logger, RPCTimeout: 2 * time.Second, DialTimeout: time.Second,
		LocalID: string(h.nodes[i].id)})
	if err != nil {
		ln.Close()
		return err
	}
	n := h.nodes[i]
	n.mux, n.rafts, n.fsms = mux, nil, nil
	for g := 0; g < h.cfg.Groups; g++ {
		var fsm raft.FSM = &CountFSM{}
		if h.cfg.FSM != nil {
			fsm = h.cfg.FSM(i, g)
		}
		if err := h.startGroup(i, g, fsm); err != nil {
			return err
		}
	}
	return nil
}

// Restart stops node i (every group, then its Mux) and starts it again on
// the same address, with fresh FSMs and the stores cfg.Stores reopens.
func (h *Harness) Restart(i int) error {
	n := h.nodes[i]
	for _, r := range n.rafts {
		if err := r.Shutdown().Error(); err != nil {
			return err
		}
	}
	n.mux.Close()
	var ln net.Listener
	var err error
	for try := 0; try < 50; try++ { // the port may linger for a moment
		if ln, err = net.Listen("tcp", h.addrs[i]); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	return h.startNode(i, ln)
}

func (h *Harness) startGroup(i, g int, fsm raft.FSM) error {
	n := h.nodes[i]
	trans, err := n.mux.Group("g" + strconv.Itoa(g))
	if err != nil {
		return err
	}
	conf := raftconf.New(n.id, h.cfg.Timing, h.cfg.Logger)
	var logs raft.LogStore
	var stable raft.StableStore
	var snaps raft.SnapshotStore
	if h.cfg.Stores != nil {
		if logs, stable, snaps, err = h.cfg.Stores(i, g); err != nil {
			return err
		}
	} else {
		mem := raft.NewInmemStore()
		logs, stable, snaps = mem, mem, raft.NewInmemSnapshotStore()
	}
	err = raft.BootstrapCluster(conf, logs, stable, snaps, trans, raft.Configuration{Servers: h.servers})
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return err
	}
	r, err := raft.NewRaft(conf, fsm, logs, stable, snaps, trans)
	if err != nil {
		return err
	}
	trans.SetCatchUp(r)
	n.rafts = append(n.rafts, r)
	n.fsms = append(n.fsms, fsm)
	return nil
}

func (h *Harness) closeListeners(lns []net.Listener) {
	for _, ln := range lns {
		if ln != nil {
			ln.Close()
		}
	}
}

// Nodes is the number of nodes.
func (h *Harness) Nodes() int { return len(h.nodes) }

// FSM returns node i's state machine of group g.
func (h *Harness) FSM(i, g int) raft.FSM { return h.nodes[i].fsms[g] }

// Mux returns node i's transport.
func (h *Harness) Mux(i int) *transport.Mux { return h.nodes[i].mux }

// Server returns node i as a voter of every group.
func (h *Harness) Server(i int) raft.Server { return h.servers[i] }

// Raft returns node i's raft instance of group g.
func (h *Harness) Raft(i, g int) *raft.Raft { return h.nodes[i].rafts[g] }

// Leader waits up to timeout for group g to have exactly one leader among
// the nodes in among (all when nil) and returns its node index.
func (h *Harness) Leader(g int, timeout time.Duration, among ...int) (int, error) {
	if among == nil {
		for i := range h.nodes {
			among = append(among, i)
		}
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		leader, count := -1, 0
		for _, i := range among {
			if h.nodes[i].rafts[g].State() == raft.Leader {
				leader, count = i, count+1
			}
		}
		if count == 1 {
			return leader, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return -1, fmt.Errorf("harness: group %d has no single leader among %v after %v", g, among, timeout)
}

// Partition cuts every link between nodes of different sides; nodes in no
// side keep their links.
func (h *Harness) Partition(sides ...[]int) {
	side := map[int]int{}
	for s, nodes := range sides {
		for _, i := range nodes {
			side[i] = s
		}
	}
	for a := range h.nodes {
		for b := a + 1; b < len(h.nodes); b++ {
			sa, oka := side[a]
			sb, okb := side[b]
			if oka && okb && sa != sb {
				h.net.setCut(h.addrs[a], h.addrs[b], true)
			}
		}
	}
}

// Disconnect cuts every link of node i.
func (h *Harness) Disconnect(i int) {
	for b := range h.nodes {
		if b != i {
			h.net.setCut(h.addrs[i], h.addrs[b], true)
		}
	}
}

// Heal restores every link.
func (h *Harness) Heal() {
	for a := range h.nodes {
		for b := a + 1; b < len(h.nodes); b++ {
			h.net.setCut(h.addrs[a], h.addrs[b], false)
		}
	}
}

// Close shuts every raft instance down, then every Mux.
func (h *Harness) Close() error {
	var errs []error
	for _, n := range h.nodes {
		for _, r := range n.rafts {
			if err := r.Shutdown().Error(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, n := range h.nodes {
		errs = append(errs, n.mux.Close())
	}
	return errors.Join(errs...)
}
