package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication"
)

// Options size a simulated cluster.
type Options struct {
	// Brokers is the number of broker-only nodes (process.roles=broker):
	// they host the partitions. Node IDs 1..Brokers.
	Brokers int
	// Controllers is the size of the metadata quorum, controller-only
	// nodes (process.roles=controller, controller.quorum.voters), node IDs
	// 9001..; default 3.
	Controllers int
	// Dir holds one data directory per node; required.
	Dir string
	// PartitionHeartbeat is strata.partition.heartbeat.timeout.ms; 0 = the
	// broker's default (2 s). The metadata group's timing is the
	// broker's own (1 s heartbeat timeout), not settable.
	PartitionHeartbeat time.Duration
	// SessionTimeout is broker.session.timeout.ms; 0 = 9 s (Kafka's and
	// strata serve's default).
	SessionTimeout time.Duration
	// StartConcurrency bounds how many broker-only nodes start at once
	// (each joins the metadata quorum and registers); default 16.
	StartConcurrency int
	// Latency delays every write on the network (Network.SetLatency);
	// 0 = none.
	Latency time.Duration
	// Logger receives every node's log lines, with a "node" attribute;
	// nil = discarded.
	Logger *slog.Logger
}

// Node is one simulated node.
type Node struct {
	ID         int32
	Addr       string // its replication listener on the Network
	Controller bool   // controller-only (a metadata voter)
	Dir        string
	Broker     *replication.Broker // nil once stopped

	cfg replication.BrokerConfig
}

// Cluster is a running simulated cluster.
type Cluster struct {
	Net         *Network
	Controllers []*Node
	Brokers     []*Node
	opts        Options
	voters      []replication.Voter
}

// ControllerBase is the first controller's node ID.
const ControllerBase = 9001

// Start starts the controllers (together: they elect the first controller
// among themselves), then the broker-only nodes, which join the quorum as
// non-voters and register. It returns once every node's NewBroker has
// returned (each caught up with the metadata), or the first error.
func Start(opts Options) (*Cluster, error) {
	if opts.Controllers <= 0 {
		opts.Controllers = 3
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 9 * time.Second
	}
	if opts.StartConcurrency <= 0 {
		opts.StartConcurrency = 16
	}
	if opts.Dir == "" {
		return nil, errors.New("sim: Options.Dir is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Cluster{Net: NewNetwork(), opts: opts}
	c.Net.SetLatency(opts.Latency)
	for i := 0; i < opts.Controllers; i++ {
		id := int32(ControllerBase + i)
		n := &Node{ID: id, Addr: nodeAddr(id), Controller: true, Dir: filepath.Join(opts.Dir, fmt.Sprintf("controller-%d", id))}
		c.Controllers = append(c.Controllers, n)
		c.voters = append(c.voters, replication.Voter{NodeID: id, Addr: n.Addr})
	}
	for i := 1; i <= opts.Brokers; i++ {
		id := int32(i)
		c.Brokers = append(c.Brokers, &Node{ID: id, Addr: nodeAddr(id), Dir: filepath.Join(opts.Dir, fmt.Sprintf("broker-%d", id))})
	}
	if err := c.startAll(c.Controllers, len(c.Controllers)); err != nil {
		c.Close()
		return nil, fmt.Errorf("sim: starting the controllers: %w", err)
	}
	if err := c.startAll(c.Brokers, opts.StartConcurrency); err != nil {
		c.Close()
		return nil, fmt.Errorf("sim: starting the brokers: %w", err)
	}
	return c, nil
}

// nodeAddr is a node's replication address: 10.x.y.z:9093, never
// resolved (the Network routes by name).
func nodeAddr(id int32) string {
	return fmt.Sprintf("10.%d.%d.%d:9093", (id>>16)&0xff, (id>>8)&0xff, id&0xff)
}

func (c *Cluster) startAll(nodes []*Node, concurrency int) error {
	sem := make(chan struct{}, concurrency)
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = c.start(n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// start starts node n on its data directory (fresh or not).
func (c *Cluster) start(n *Node) error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	ln, err := c.Net.Listen(n.Addr)
	if err != nil {
		return err
	}
	logger := c.opts.Logger.With("node", n.ID)
	logs, err := log.OpenManager(log.ManagerOptions{Dir: n.Dir, Logger: logger, UseHighWatermarkCheckpoint: true})
	if err != nil {
		ln.Close()
		return err
	}
	cfg := replication.BrokerConfig{
		NodeID:                   n.ID,
		AdvertisedHost:           fmt.Sprintf("broker-%d.sim", n.ID), // no Kafka listener runs
		AdvertisedPort:           9092,
		DataDir:                  n.Dir,
		NumPartitions:            1,
		DefaultReplicationFactor: 3,
		DeleteTopicEnable:        true,
		Logger:                   logger,
		Voters:                   c.voters,
		BrokerOnly:               !n.Controller,
		ControllerOnly:           n.Controller,
		// The joins come from the Network, not loopback; admitting them
		// over plaintext is the operator's choice (roles.go).
		JoinOffLoopback:      true,
		ReplicationListener:  ln,
		ReplicationDial:      c.Net.Dialer(n.Addr),
		PartitionHeartbeat:   c.opts.PartitionHeartbeat,
		StartTimeout:         2 * time.Minute,
		BrokerSessionTimeout: c.opts.SessionTimeout,
	}
	b, err := replication.NewBroker(cfg, logs)
	if err != nil {
		logs.Close()
		return fmt.Errorf("node %d: %w", n.ID, err)
	}
	n.Broker, n.cfg = b, cfg
	return nil
}

// Nodes is every node, controllers first.
func (c *Cluster) Nodes() []*Node {
	return append(append([]*Node(nil), c.Controllers...), c.Brokers...)
}

// Running is every node not stopped.
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, n := range c.Nodes() {
		if n.Broker != nil {
			out = append(out, n)
		}
	}
	return out
}

// Node returns the node with the given ID, or nil.
func (c *Cluster) Node(id int32) *Node {
	for _, n := range c.Nodes() {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Controller is the node every running node names as the controller, or
// nil while they do not agree (or none is known).
func (c *Cluster) Controller() *Node {
	id := int32(-2)
	for _, n := range c.Running() {
		got := n.Broker.MetadataLeader()
		if got < 0 || (id != -2 && got != id) {
			return nil
		}
		id = got
	}
	if n := c.Node(id); n != nil && n.Broker != nil {
		return n
	}
	return nil
}

// Kill is a SIGKILL as its peers see it: the node's connections are cut
// and it can neither dial nor be dialed; then its broker is closed with no
// leadership handoff (a context already done) while still cut off, so it
// tells nobody. Its data directory stays for Restart.
func (c *Cluster) Kill(n *Node) error {
	c.Net.Isolate(n.Addr)
	b := n.Broker
	n.Broker = nil
	if b == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := b.CloseContext(ctx)
	return err
}

// Restart starts a killed node again on its data directory, reachable.
func (c *Cluster) Restart(n *Node) error {
	if n.Broker != nil {
		return fmt.Errorf("sim: node %d is running", n.ID)
	}
	c.Net.Heal(n.Addr)
	return c.start(n)
}

// Close stops every running node at once, without leadership handoffs.
func (c *Cluster) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, n := range c.Running() {
		wg.Add(1)
		go func(n *Node, b *replication.Broker) {
			defer wg.Done()
			if err := b.CloseContext(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("node %d: %w", n.ID, err))
				mu.Unlock()
			}
		}(n, n.Broker)
		n.Broker = nil
	}
	wg.Wait()
	return errors.Join(errs...)
}
