package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication/raftconf"
	"github.com/strata-io/strata/replication/raftstore"
	"github.com/strata-io/strata/replication/transport"
	"github.com/strata-io/strata/retention"
	"github.com/strata-io/strata/segment"
)

const (
	// producerIDBlockSize producer IDs are reserved per metadata command, so
	// a busy broker writes the metadata log once per this many producers,
	// and a restart skips at most this many IDs.
	producerIDBlockSize = 1000
	// maxPartitionsPerTopic bounds CreateTopics/CreatePartitions: each
	// partition is a directory and three open files.
	maxPartitionsPerTopic = 50000
	// maxPartitionsPerBroker bounds all partitions together: every one is
	// open files, memory and a share of the metadata image that each
	// metadata change copies.
	maxPartitionsPerBroker = 200000
)

// Broker is this node's view of the cluster: replicated metadata, and the
// partitions it hosts. Safe for concurrent use.
//
// Readers (Topics, Topic, Partition, Produce, ...) load the current
// metadata image through an atomic pointer and never block on writers.
// Writers (CreateTopic, DeleteTopic, CreatePartitions, SetTopicConfigs,
// AllocateProducerID, Close) hold mu, which makes them the single writer of
// both the metadata log and the image.
type Broker struct {
	cfg       BrokerConfig
	logger    *slog.Logger
	logs      *log.Manager
	clusterID string

	// img is the current metadata; replaced only with mu held, after the
	// command that produced it is durable in the metadata log.
	img atomic.Pointer[image]

	mu      writerLock // this broker's single metadata writer (validate + propose); writer_lock.go
	pidNext int64      // next producer ID of the reserved block; protected by mu
	pidEnd  int64      // end (exclusive) of the reserved block; protected by mu. Invariant: pidNext <= pidEnd

	// The metadata Raft group (broker_raft.go); set by openRaft, then
	// read-only.
	raft  *raft.Raft
	mux   *transport.Mux
	rlog  *raftstore.LogFile
	fsm   *metadataFSM
	fresh bool // the metadata raft store was empty at start

	// ready is set once start() has reconciled the disk with the image;
	// before that, applied commands have no local effects (onApply).
	ready atomic.Bool
	// effMu serializes local effects (onApply, reconcile). Taken on the
	// FSM goroutine, so never held while waiting for raft.
	effMu sync.Mutex

	// groups are the running partition Raft groups (partition_group.go),
	// one per open local partition. Lock order: effMu, then groupsMu;
	// groupsMu is never held while waiting for raft.
	groupsMu sync.RWMutex
	groups   map[log.TopicPartition]*partitionGroup // protected by groupsMu
	byRaft   map[*raft.Raft]*partitionGroup         // protected by groupsMu
	// guards keep a partition's open and removal apart (partition_guard.go).
	guards *partitionGuards
	// testHookOpening, when set, runs in openLog under the partition's
	// guard before the group starts (tests hold an open there).
	testHookOpening func(log.TopicPartition)
	// partitionTiming is the raft timing of groups with several voters.
	partitionTiming raftconf.Timing

	// Leader reports (partition_leaders.go): groups' raft observations
	// arrive on obsCh (observe), groups to report wait in reports
	// (reportLeaders). stop ends both goroutines.
	obsCh        chan raft.Observation
	reportMu     sync.Mutex
	reports      map[log.TopicPartition]*partitionGroup // protected by reportMu
	reportWake   chan struct{}
	stop         chan struct{}
	stopOnce     sync.Once
	observerDone chan struct{}
	memoDone     chan struct{}
	reporterDone chan struct{}
	reassignDone chan struct{}
	// rebalanceDone closes when rebalanceLoop (rebalance.go) ends.
	rebalanceDone chan struct{}
	// fenceDone closes when fenceLoop (fencing.go) ends.
	fenceDone chan struct{}
	// announce wakes announceCommits (broker_raft.go) after a proposal
	// committed here; announceDone closes when it ends.
	announce     chan struct{}
	announceDone chan struct{}

	// disk is the data directory's free-space state (disk_space.go).
	disk diskState

	closed    atomic.Bool // set first thing in Close; writers check it under mu
	closeOnce sync.Once
	closeErr  error

	// Handlers of requests to the controller by name
	// (controller_ext.go); protected by extMu.
	extMu sync.Mutex
	ext   map[string]func([]byte) ([]byte, error)
}

// NewBroker opens the metadata store and every local partition under
// cfg.DataDir. The broker takes ownership of logs: Close closes it. On an
// error nothing is left open except logs, which the caller still owns.
func NewBroker(cfg BrokerConfig, logs *log.Manager) (*Broker, error) {
	if logs == nil {
		return nil, errors.New("replication: NewBroker: nil log manager")
	}
	if cfg.NodeID < 0 {
		return nil, fmt.Errorf("replication: node.id %d is negative", cfg.NodeID)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("replication: no data directory (log.dirs)")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NumPartitions <= 0 {
		cfg.NumPartitions = 1
	}
	if cfg.DefaultReplicationFactor <= 0 {
		cfg.DefaultReplicationFactor = 1
	}
	cfg.BrokerProps = copyConfigs(cfg.BrokerProps)
	if err := retention.ValidateBroker(cfg.BrokerProps); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if cfg.FS == nil {
		cfg.FS = segment.OSFS{}
	}
	logger := cfg.Logger.With("component", "broker")
	if err := cfg.FS.MkdirAll(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("%w: create data dir: %v", ErrMetadataStorage, err)
	}
	mp, err := loadOrCreateMetaPropertiesWithID(cfg.FS, cfg.DataDir, cfg.NodeID, votersClusterID(cfg.Voters))
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, logger: logger, logs: logs, clusterID: mp.ClusterID, mu: newWriterLock(),
		groups: map[log.TopicPartition]*partitionGroup{}, byRaft: map[*raft.Raft]*partitionGroup{},
		guards:          newPartitionGuards(),
		partitionTiming: raftconf.PartitionTiming,
		obsCh:           make(chan raft.Observation, 4096), reports: map[log.TopicPartition]*partitionGroup{},
		reportWake: make(chan struct{}, 1), stop: make(chan struct{}),
		observerDone: make(chan struct{}), memoDone: make(chan struct{}), reporterDone: make(chan struct{}), reassignDone: make(chan struct{}),
		announce: make(chan struct{}, 1), announceDone: make(chan struct{}), rebalanceDone: make(chan struct{}),
		fenceDone: make(chan struct{})}
	if cfg.PartitionHeartbeat > 0 {
		b.partitionTiming = raftconf.PartitionTimingFor(cfg.PartitionHeartbeat)
	}
	// The loops below read the image from their first tick (reassignLoop
	// every 250 ms); openRaft's FSM takes this one over, and a start whose
	// openRaft took longer found none.
	b.img.Store(newImage())
	go b.observe()
	go b.sweepMemos()
	go b.reportLeaders()
	go b.reassignLoop()
	go b.announceCommits()
	go b.rebalanceLoop()
	go b.fenceLoop()
	go b.diskLoop()
	if err := b.openRaft(); err != nil {
		return nil, err
	}
	if err := b.waitCaughtUp(); err != nil {
		b.closeRaft()
		return nil, err
	}
	if err := b.start(); err != nil {
		// The metadata group first: its FSM opens partition groups as it
		// applies commands, so groups closed before it stops could be
		// followed by new ones, left running on logs the caller then
		// closes (raft panics reading a closed partition: seen in the
		// fault harness when a disk fault failed a start). closed stops
		// a restart after a snapshot install from reopening one.
		b.closed.Store(true)
		b.closeRaft()
		b.effMu.Lock()
		b.closeGroups()
		b.effMu.Unlock()
		return nil, err
	}
	img := b.img.Load()
	logger.Info("broker started", "node_id", cfg.NodeID, "cluster_id", mp.ClusterID,
		"topics", len(img.topics), "metadata_commands", img.applied, "controller", b.ControllerID())
	return b, nil
}

// closeRaft stops the metadata group and closes its files.
func (b *Broker) closeRaft() error {
	b.stopOnce.Do(func() { close(b.stop) })
	var errs []error
	if b.raft != nil {
		errs = append(errs, b.raft.Shutdown().Error())
	}
	if b.mux != nil {
		errs = append(errs, b.mux.Close())
	}
	if b.rlog != nil {
		errs = append(errs, b.rlog.Close())
	}
	// Bounded: a report proposed just as raft shut down may wait on a
	// future raft never answers (an entry left in its apply queue); its
	// goroutine must not hold Close forever.
	for _, done := range []chan struct{}{b.observerDone, b.memoDone, b.reporterDone, b.reassignDone, b.announceDone, b.rebalanceDone, b.fenceDone} {
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			b.logger.Warn("a broker goroutine did not stop within 2s of raft shutting down; left behind")
		}
	}
	return errors.Join(errs...)
}

// start registers this broker, finishes interrupted deletions and opens
// every local partition.
func (b *Broker) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.migrateMetadataLog(); err != nil {
		return err
	}
	self := b.selfInfo()
	// The registration is asked again while the controller changes (its
	// answer "not controller": a new controller, or a controller that lost
	// its quorum for a moment), within StartTimeout, as Kafka's brokers
	// retry theirs: the simulated 100-broker cluster (internal/sim) saw the
	// controller step down while 100 brokers joined, and a broker's start
	// failed on it. A registration whose answer was lost may have been
	// committed: the image says.
	timeout := b.cfg.StartTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	deadline := time.Now().Add(timeout)
	for !b.cfg.ControllerOnly {
		if cur, ok := b.img.Load().brokers[self.NodeID]; ok && cur == self {
			break
		}
		_, err := b.commitLocked(Command{Type: CmdRegisterBroker, Broker: &self})
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNotController) || time.Now().After(deadline) {
			return err
		}
		b.logger.Info("broker registration not taken by the controller; asking again", "err", err)
		time.Sleep(200 * time.Millisecond)
	}
	// From here on applied commands act on the disk; reconcile what was
	// applied before (under effMu, so no command's effect interleaves).
	b.ready.Store(true)
	b.effMu.Lock()
	img := b.img.Load()
	b.reconcileLocked(img)
	b.effMu.Unlock()
	if b.raft.State() == raft.Leader {
		pendingIDs := make([][16]byte, 0, len(img.pending))
		for id := range img.pending {
			pendingIDs = append(pendingIDs, id)
		}
		sort.Slice(pendingIDs, func(i, j int) bool { return img.pending[pendingIDs[i]].Name < img.pending[pendingIDs[j]].Name })
		for _, id := range pendingIDs {
			pd := img.pending[id]
			b.logger.Info("finishing interrupted topic deletion", "topic", pd.Name)
			if err := b.finishDeleteLocked(id, pd); err != nil {
				// Not fatal: the leftovers are retried at the next start or
				// before a topic of the same name is created.
				b.logger.Error("could not remove deleted topic's logs", "topic", pd.Name, "err", err)
			}
		}
	}
	// Not under effMu (that stalled the metadata FSM for the whole start,
	// ff2f24b): each partition is opened under its guard, after checking
	// that the image of the moment still places it here.
	img = b.img.Load()
	for _, name := range img.names {
		if err := b.openLogsChecked(img.topics[name], 0, true); err != nil {
			return err
		}
	}
	// Under effMu, against the image of the moment: a topic created
	// meanwhile (its partitions opened by the FSM) is not a stray.
	b.effMu.Lock()
	defer b.effMu.Unlock()
	img = b.img.Load()
	for _, tp := range b.logs.Partitions() {
		if t, ok := img.topics[tp.Topic]; ok && tp.Partition >= 0 && int(tp.Partition) < len(t.Partitions) {
			// Moved away by a reassignment that finished while this
			// broker was down.
			b.dropNonMember(t, tp.Partition)
			continue
		}
		// No topic of that name (or no such partition) in the metadata,
		// which this broker has caught up with: a deletion it missed
		// while down (its CmdDeleteTopicDone was recorded by another
		// broker). Deleted, as Kafka deletes stray replicas.
		b.logger.Warn("partition directory of a topic deleted while this broker was away; deleting it",
			"topic", tp.Topic, "partition", tp.Partition)
		if err := b.deleteGuarded(tp); err != nil {
			b.logger.Error("could not delete a stray partition directory", "partition", tp.String(), "err", err)
		}
	}
	return nil
}

// openLogsLocked opens the local logs of t's partitions from first on.
func (b *Broker) openLogsLocked(t *TopicInfo, first int32) error { return b.openLogs(t, first) }

// finishDeleteLocked removes a deleted topic's logs and records that.
func (b *Broker) finishDeleteLocked(id [16]byte, pd pendingDelete) error {
	if err := b.deleteLogs(pd); err != nil {
		return err
	}
	_, err := b.commitLocked(Command{Type: CmdDeleteTopicDone, TopicID: id})
	return err
}

// hasLog reports whether the manager knows tp (open, or found on disk).
func (b *Broker) hasLog(tp log.TopicPartition) bool {
	if b.logs.Get(tp) != nil {
		return true
	}
	for _, q := range b.logs.Partitions() {
		if q == tp {
			return true
		}
	}
	return false
}

// lockWriter takes the writer lock unless the broker is closed or ctx is
// done.
func (b *Broker) lockWriter(ctx context.Context) error {
	if err := b.mu.LockCtx(ctx); err != nil {
		return err
	}
	if b.closed.Load() {
		b.mu.Unlock()
		return ErrShuttingDown
	}
	return nil
}

func (b *Broker) NodeID() int32     { return b.cfg.NodeID }
func (b *Broker) ClusterID() string { return b.clusterID }

// Brokers returns the registered brokers sorted by node ID.
func (b *Broker) Brokers() []BrokerInfo {
	img := b.img.Load()
	out := make([]BrokerInfo, 0, len(img.brokers))
	for _, bi := range img.brokers {
		out = append(out, bi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

// Config returns the broker configuration (a copy).
func (b *Broker) Config() BrokerConfig {
	c := b.cfg
	c.BrokerProps = copyConfigs(b.cfg.BrokerProps)
	return c
}

// Topics returns every topic, sorted by name. The TopicInfo values share
// their slices and maps with the metadata image: callers must not modify
// them.
func (b *Broker) Topics() []TopicInfo {
	img := b.img.Load()
	out := make([]TopicInfo, 0, len(img.names))
	for _, n := range img.names {
		out = append(out, *img.topics[n])
	}
	return out
}

// Topic looks a topic up by name.
func (b *Broker) Topic(name string) (TopicInfo, bool) {
	t, ok := b.img.Load().topics[name]
	if !ok {
		return TopicInfo{}, false
	}
	return *t, true
}

// TopicByID looks a topic up by ID.
func (b *Broker) TopicByID(id [16]byte) (TopicInfo, bool) {
	t, ok := b.img.Load().byID[id]
	if !ok {
		return TopicInfo{}, false
	}
	return *t, true
}

// CreateTopic validates and (unless ValidateOnly) creates a topic,
// creating its partition logs. Returns the topic as created (or as it
// would be).
func (b *Broker) CreateTopic(ctx context.Context, req CreateTopicRequest) (TopicInfo, error) {
	t, err := b.createTopic(ctx, req)
	if err != nil || req.ValidateOnly {
		return t, err
	}
	// Answer once the new partitions' groups have elected leaders (as
	// Kafka answers once the controller chose them), without the writer
	// lock: the leaders' reports go through the controller.
	b.waitLeaders(ctx, req.Name, 0)
	if t2, ok := b.Topic(req.Name); ok && t2.ID == t.ID {
		return t2, nil
	}
	return t, nil
}

func (b *Broker) createTopic(ctx context.Context, req CreateTopicRequest) (TopicInfo, error) {
	if err := b.lockWriter(ctx); err != nil {
		return TopicInfo{}, err
	}
	defer b.mu.Unlock()
	img := b.img.Load()
	if err := validateTopicName(req.Name); err != nil {
		return TopicInfo{}, err
	}
	if _, ok := img.topics[req.Name]; ok {
		return TopicInfo{}, fmt.Errorf("%w: %s", ErrTopicExists, req.Name)
	}
	if other := img.collidingTopic(req.Name); other != "" {
		return TopicInfo{}, fmt.Errorf("%w: topic %q collides with existing topic %q ('.' and '_' collide)", ErrInvalidTopic, req.Name, other)
	}
	assign, err := b.assignLocked(img, req)
	if err != nil {
		return TopicInfo{}, err
	}
	if assign, err = checkOrPlace(img, b.brokerPropsOf(img), assign, req.Assignment == nil, 0); err != nil {
		return TopicInfo{}, err
	}
	if err := checkPartitionBudget(img, len(assign)); err != nil {
		return TopicInfo{}, err
	}
	if err := retention.ValidateTopic(req.Configs); err != nil {
		return TopicInfo{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if _, err := retention.LogConfig(req.Configs, b.brokerProps()); err != nil {
		return TopicInfo{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	// A collision of 122 random bits does not happen; the bound only keeps
	// the loop finite.
	id := randomUUID()
	for i := 0; i < 10 && (img.byID[id] != nil || img.pending[id].Name != ""); i++ {
		id = randomUUID()
	}
	c := Command{Type: CmdCreateTopic, Topic: req.Name, TopicID: id, Partitions: assign, Configs: req.Configs}
	if req.ValidateOnly {
		next, err := img.Apply(c)
		if err != nil {
			return TopicInfo{}, err
		}
		return *next.topics[req.Name], nil
	}
	if err := b.controllerDiskErr(); err != nil {
		return TopicInfo{}, err
	}
	// A same-named topic whose deletion did not finish, or partition
	// directories of no topic, must not become the new topic's data.
	finished, err := b.removeLeftoversLocked(req.Name)
	if err != nil {
		return TopicInfo{}, err
	}
	for _, pid := range finished {
		if _, err := b.commitLocked(Command{Type: CmdDeleteTopicDone, TopicID: pid}); err != nil {
			return TopicInfo{}, err
		}
	}
	next, err := b.commitLocked(c)
	if err != nil {
		return TopicInfo{}, err
	}
	t := next.topics[req.Name]
	openErr := b.openLogsLocked(t, 0)
	// The command is durable: publish even if a log failed to open (the
	// next start retries it), so that metadata and disk agree on restart.
	if openErr != nil {
		b.logger.Error("topic created but a partition log failed to open", "topic", req.Name, "err", openErr)
		return *t, openErr
	}
	b.logger.Info("topic created", "topic", req.Name, "partitions", len(t.Partitions), "configs", len(req.Configs))
	return *t, nil
}

// removeLeftoversLocked removes, before a topic named name is created,
// the logs of a same-named topic whose deletion did not finish (returning
// their IDs, for CmdDeleteTopicDone) and partition directories of no
// topic. Under effMu and against the current image, not the caller's:
// another broker may have created the topic meanwhile, and this broker's
// FSM opened its partitions and raft groups -- those are not leftovers
// (removing them under a running group made raft panic). Then it answers
// ErrTopicExists and removes nothing.
func (b *Broker) removeLeftoversLocked(name string) ([][16]byte, error) {
	b.effMu.Lock()
	defer b.effMu.Unlock()
	cur := b.img.Load()
	if _, ok := cur.topics[name]; ok {
		return nil, fmt.Errorf("%w: %s", ErrTopicExists, name)
	}
	var finished [][16]byte
	for pid, pd := range cur.pending {
		if pd.Name == name {
			if err := b.deleteLogs(pd); err != nil {
				return nil, err
			}
			finished = append(finished, pid)
		}
	}
	for _, tp := range b.logs.Partitions() {
		if tp.Topic != name {
			continue
		}
		if err := b.deleteStray(tp); err != nil {
			return nil, fmt.Errorf("replication: remove stray %s-%d: %w", tp.Topic, tp.Partition, err)
		}
	}
	return finished, nil
}

// deleteStray deletes tp's directory unless a group runs on it, under
// tp's guard.
func (b *Broker) deleteStray(tp log.TopicPartition) error {
	g := b.guards.of(tp)
	g.Lock()
	defer g.Unlock()
	if b.group(tp) != nil {
		return nil
	}
	b.logger.Warn("removing stray partition directory before creating its topic", "topic", tp.Topic, "partition", tp.Partition)
	return b.logs.Delete(tp)
}

// assignLocked checks partitions, replication factor and any explicit
// assignment of req and returns the assignment to persist.
func (b *Broker) assignLocked(img *image, req CreateTopicRequest) ([]Assignment, error) {
	if req.Assignment != nil {
		if req.NumPartitions != -1 && req.NumPartitions != int32(len(req.Assignment)) {
			return nil, fmt.Errorf("%w: both partition count %d and an assignment of %d partitions given", ErrInvalidReplicaAssignment, req.NumPartitions, len(req.Assignment))
		}
		if len(req.Assignment) == 0 {
			return nil, fmt.Errorf("%w: empty assignment", ErrInvalidPartitions)
		}
		if len(req.Assignment) > maxPartitionsPerTopic {
			return nil, fmt.Errorf("%w: %d partitions, more than %d", ErrInvalidPartitions, len(req.Assignment), maxPartitionsPerTopic)
		}
		list := make([][]int32, len(req.Assignment))
		for p, reps := range req.Assignment {
			if p < 0 || int(p) >= len(req.Assignment) {
				return nil, fmt.Errorf("%w: partitions must be numbered 0..%d, got %d", ErrInvalidReplicaAssignment, len(req.Assignment)-1, p)
			}
			list[p] = reps
		}
		return checkExplicit(img, list, 0, -1)
	}
	n := req.NumPartitions
	if n == -1 {
		n = b.cfg.NumPartitions
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d partitions; must be at least 1", ErrInvalidPartitions, n)
	}
	if n > maxPartitionsPerTopic {
		return nil, fmt.Errorf("%w: %d partitions, more than %d", ErrInvalidPartitions, n, maxPartitionsPerTopic)
	}
	rf := req.ReplicationFactor
	if rf == -1 {
		rf = b.cfg.DefaultReplicationFactor
	}
	return autoAssign(img, 0, n, int(rf))
}

// autoAssign places partitions first..first+n-1 round-robin over the
// registered brokers that are not fenced, rf replicas each.
func autoAssign(img *image, first, n int32, rf int) ([]Assignment, error) {
	nodes := make([]int32, 0, len(img.brokers))
	for id, bi := range img.brokers {
		if !bi.Fenced {
			nodes = append(nodes, id)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	if rf <= 0 {
		return nil, fmt.Errorf("%w: replication factor %d; must be at least 1", ErrInvalidReplicationFactor, rf)
	}
	if rf > len(nodes) {
		return nil, fmt.Errorf("%w: replication factor %d larger than the %d available broker(s)", ErrInvalidReplicationFactor, rf, len(nodes))
	}
	out := make([]Assignment, n)
	for i := int32(0); i < n; i++ {
		p := first + i
		reps := make([]int32, rf)
		for r := 0; r < rf; r++ {
			reps[r] = nodes[(int(p)+r)%len(nodes)]
		}
		out[i] = Assignment{Partition: p, Replicas: reps}
	}
	return out, nil
}

// checkExplicit validates an explicit assignment (list[i] is partition
// first+i) against the registered brokers; rf is the required replica
// count, or -1 to take the first partition's.
func checkExplicit(img *image, list [][]int32, first int32, rf int) ([]Assignment, error) {
	out := make([]Assignment, len(list))
	for i, reps := range list {
		p := first + int32(i)
		if len(reps) == 0 {
			return nil, fmt.Errorf("%w: partition %d has no replicas", ErrInvalidReplicaAssignment, p)
		}
		if rf == -1 {
			rf = len(reps)
		}
		if len(reps) != rf {
			return nil, fmt.Errorf("%w: partition %d has %d replicas, others %d", ErrInvalidReplicaAssignment, p, len(reps), rf)
		}
		for j, r := range reps {
			if _, ok := img.brokers[r]; !ok {
				return nil, fmt.Errorf("%w: partition %d: broker %d is not registered", ErrInvalidReplicaAssignment, p, r)
			}
			if containsNode(reps[:j], r) {
				return nil, fmt.Errorf("%w: partition %d: broker %d listed twice", ErrInvalidReplicaAssignment, p, r)
			}
		}
		out[i] = Assignment{Partition: p, Replicas: append([]int32(nil), reps...)}
	}
	return out, nil
}

// AutoCreate creates name with the broker defaults if auto.create.topics.enable
// is set and the name is valid; it returns the topic either way if it exists.
func (b *Broker) AutoCreate(ctx context.Context, name string) (TopicInfo, error) {
	if t, ok := b.Topic(name); ok {
		return t, nil
	}
	if !b.cfg.AutoCreateTopics {
		return TopicInfo{}, fmt.Errorf("%w: %s (auto.create.topics.enable=false)", ErrUnknownTopicOrPartition, name)
	}
	if err := validateTopicName(name); err != nil {
		return TopicInfo{}, err
	}
	t, err := b.CreateTopic(ctx, CreateTopicRequest{Name: name, NumPartitions: -1, ReplicationFactor: -1})
	if errors.Is(err, ErrTopicExists) {
		if t, ok := b.Topic(name); ok {
			return t, nil
		}
	}
	return t, err
}

// DeleteTopic removes a topic and its partition files: first from the
// metadata (durably), then from disk. If removing files fails, the topic is
// still deleted; the files are removed at the next start or before a topic
// of the same name is created.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	if !b.cfg.DeleteTopicEnable {
		return fmt.Errorf("%w: %s (delete.topic.enable=false)", ErrTopicDeletionDisabled, name)
	}
	if err := b.lockWriter(ctx); err != nil {
		return err
	}
	defer b.mu.Unlock()
	t, ok := b.img.Load().topics[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, name)
	}
	next, err := b.commitLocked(Command{Type: CmdDeleteTopic, Topic: name, TopicID: t.ID})
	if err != nil {
		return err
	}
	if err := b.finishDeleteLocked(t.ID, next.pending[t.ID]); err != nil {
		b.logger.Error("topic deleted but its logs were not all removed; retried at next start", "topic", name, "err", err)
		return nil
	}
	b.logger.Info("topic deleted", "topic", name)
	return nil
}

// CreatePartitions grows a topic to count partitions. assignment, when
// non-nil, gives the replicas of each new partition.
func (b *Broker) CreatePartitions(ctx context.Context, name string, count int32, assignment [][]int32, validateOnly bool) error {
	var cur int32
	if t, ok := b.Topic(name); ok {
		cur = int32(len(t.Partitions))
	}
	if err := b.createPartitions(ctx, name, count, assignment, validateOnly); err != nil || validateOnly {
		return err
	}
	b.waitLeaders(ctx, name, cur)
	return nil
}

func (b *Broker) createPartitions(ctx context.Context, name string, count int32, assignment [][]int32, validateOnly bool) error {
	if err := b.lockWriter(ctx); err != nil {
		return err
	}
	defer b.mu.Unlock()
	img := b.img.Load()
	t, ok := img.topics[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, name)
	}
	cur := int32(len(t.Partitions))
	if count <= cur {
		return fmt.Errorf("%w: topic %s has %d partitions; the new count %d must be larger", ErrInvalidPartitions, name, cur, count)
	}
	if count > maxPartitionsPerTopic {
		return fmt.Errorf("%w: %d partitions, more than %d", ErrInvalidPartitions, count, maxPartitionsPerTopic)
	}
	rf := len(t.Partitions[0].Replicas)
	var assign []Assignment
	var err error
	if assignment != nil {
		if int32(len(assignment)) != count-cur {
			return fmt.Errorf("%w: %d new partitions but an assignment for %d", ErrInvalidReplicaAssignment, count-cur, len(assignment))
		}
		assign, err = checkExplicit(img, assignment, cur, rf)
	} else {
		assign, err = autoAssign(img, cur, count-cur, rf)
	}
	if err != nil {
		return err
	}
	if assign, err = checkOrPlace(img, b.brokerPropsOf(img), assign, assignment == nil, cur); err != nil {
		return err
	}
	if err := checkPartitionBudget(img, len(assign)); err != nil {
		return err
	}
	c := Command{Type: CmdCreatePartitions, Topic: name, Partitions: assign}
	if validateOnly {
		_, err := img.Apply(c)
		return err
	}
	if err := b.controllerDiskErr(); err != nil {
		return err
	}
	next, err := b.commitLocked(c)
	if err != nil {
		return err
	}
	openErr := b.openLogsLocked(next.topics[name], cur)
	if openErr != nil {
		return openErr
	}
	b.logger.Info("partitions created", "topic", name, "from", cur, "to", count)
	return nil
}

// SetTopicConfigs replaces a topic's config overrides with configs (the
// complete set; IncrementalAlterConfigs merges into TopicInfo.Configs
// first) and applies them to the live partitions.
func (b *Broker) SetTopicConfigs(ctx context.Context, name string, configs map[string]string, validateOnly bool) error {
	if err := b.lockWriter(ctx); err != nil {
		return err
	}
	defer b.mu.Unlock()
	t, ok := b.img.Load().topics[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, name)
	}
	cfg, err := retention.LogConfig(configs, b.brokerProps())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if validateOnly {
		return nil
	}
	_, err = b.commitLocked(Command{Type: CmdSetTopicConfigs, Topic: name, Configs: configs})
	if err != nil {
		return err
	}
	for _, p := range t.Partitions {
		if lp := b.logs.Get(log.TopicPartition{Topic: name, Partition: p.Partition}); lp != nil {
			lp.SetConfig(cfg)
		}
	}
	b.logger.Info("topic configs set", "topic", name, "configs", len(configs))
	return nil
}

// Partition returns the local log of a partition this broker leads.
// ErrUnknownTopicOrPartition or ErrNotLeader otherwise.
func (b *Broker) Partition(topic string, partition int32) (*log.Partition, error) {
	lp, _, err := b.partition(topic, partition)
	return lp, err
}

func (b *Broker) partition(topic string, partition int32) (*log.Partition, PartitionInfo, error) {
	if b.closed.Load() {
		return nil, PartitionInfo{}, ErrShuttingDown
	}
	t, ok := b.img.Load().topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, PartitionInfo{}, fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, topic, partition)
	}
	pi := t.Partitions[partition]
	if pi.Leader != b.cfg.NodeID {
		return nil, pi, fmt.Errorf("%w: %s-%d is led by %d", ErrNotLeader, topic, partition, pi.Leader)
	}
	lp := b.logs.Get(log.TopicPartition{Topic: topic, Partition: partition})
	if lp == nil {
		return nil, pi, fmt.Errorf("%w: %s-%d has no open log", log.ErrStorage, topic, partition)
	}
	return lp, pi, nil
}

// Produce appends records to a partition this broker leads and returns once
// they are committed (the high watermark has passed them). With one voter
// the write is committed as soon as it is in the log. A retried idempotent
// batch returns the original offsets with Duplicate set.
func (b *Broker) Produce(ctx context.Context, topic string, partition int32, records []byte) (log.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return log.AppendResult{}, err
	}
	lp, _, err := b.partition(topic, partition)
	if err != nil {
		return log.AppendResult{}, err
	}
	if err := b.diskErr(); err != nil {
		return log.AppendResult{}, err // below strata.log.dir.min.free.bytes
	}
	g := b.group(lp.TopicPartition())
	if g == nil {
		return log.AppendResult{}, fmt.Errorf("%w: %s-%d has no raft group", log.ErrStorage, topic, partition)
	}
	return g.produce(ctx, records)
}

// AllocateProducerID returns a new, never before used producer ID. IDs come
// from blocks reserved durably in the metadata log, so a restart never
// hands out an ID twice (it skips the rest of the block).
func (b *Broker) AllocateProducerID(ctx context.Context) (int64, error) {
	if err := b.lockWriter(ctx); err != nil {
		return -1, err
	}
	defer b.mu.Unlock()
	if b.pidNext >= b.pidEnd {
		start := b.img.Load().nextProducerID
		c, _, err := b.commitCmdLocked(Command{Type: CmdAllocateProducerIDs, ProducerIDStart: start, ProducerIDCount: producerIDBlockSize})
		if err != nil {
			return -1, err
		}
		b.pidNext, b.pidEnd = c.ProducerIDStart, c.ProducerIDStart+producerIDBlockSize
	}
	id := b.pidNext
	b.pidNext++
	return id, nil
}

// Close flushes and closes everything: the metadata log and every
// partition (through the log manager). Later calls return the first
// result. It is CloseContext with no deadline but the handoff's own
// (shutdown.go).
func (b *Broker) Close() error { return b.CloseContext(context.Background()) }

// checkPartitionBudget refuses to grow the cluster past
// maxPartitionsPerBroker partitions.
func checkPartitionBudget(img *image, more int) error {
	if total := img.partitionCount(); total+more > maxPartitionsPerBroker {
		return fmt.Errorf("%w: %d more partitions would exceed the limit of %d (now %d)", ErrInvalidPartitions, more, maxPartitionsPerBroker, total)
	}
	return nil
}

func containsNode(nodes []int32, id int32) bool {
	for _, n := range nodes {
		if n == id {
			return true
		}
	}
	return false
}
