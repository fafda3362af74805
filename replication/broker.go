package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
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

// Broker is this node's view of the cluster: a thin façade over its two
// units, which it starts and stops together. Safe for concurrent use.
//
//   - metadataQuorum (metadata_quorum.go): the replicated metadata -- the
//     metadata Raft group, its image, the single writer that validates and
//     proposes commands, and the controller's requests.
//   - partitionReplicas (partition_replicas.go): the partitions this
//     broker hosts -- their logs and Raft groups, the local effects of
//     applied metadata commands, leader reports, reassignment, leader
//     rebalance and disk space.
//
// Both share a node (node.go): the settings, the replication transport
// and the lifecycle. The quorum reaches the replicas only through the
// replicaEffects interface; the replicas read the quorum's image and
// propose through it.
type Broker struct {
	*node
	*metadataQuorum
	*partitionReplicas

	closeOnce sync.Once
	closeErr  error
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
	n := &node{cfg: cfg, logger: logger, stop: make(chan struct{})}
	q := newMetadataQuorum(n, mp.ClusterID)
	r := newPartitionReplicas(n, q, logs)
	q.local = r
	b := &Broker{node: n, metadataQuorum: q, partitionReplicas: r}
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

// finishDeleteLocked removes a deleted topic's logs and records that.
func (q *metadataQuorum) finishDeleteLocked(id [16]byte, pd pendingDelete) error {
	if err := q.local.deleteLogs(pd); err != nil {
		return err
	}
	_, err := q.commitLocked(Command{Type: CmdDeleteTopicDone, TopicID: id})
	return err
}

// hasLog reports whether the manager knows tp (open, or found on disk).
func (r *partitionReplicas) hasLog(tp log.TopicPartition) bool {
	if r.logs.Get(tp) != nil {
		return true
	}
	for _, q := range r.logs.Partitions() {
		if q == tp {
			return true
		}
	}
	return false
}

// lockWriter takes the writer lock unless the broker is closed or ctx is
// done.
func (q *metadataQuorum) lockWriter(ctx context.Context) error {
	if err := q.mu.LockCtx(ctx); err != nil {
		return err
	}
	if q.closed.Load() {
		q.mu.Unlock()
		return ErrShuttingDown
	}
	return nil
}

func (n *node) NodeID() int32               { return n.cfg.NodeID }
func (q *metadataQuorum) ClusterID() string { return q.clusterID }

// Brokers returns the registered brokers sorted by node ID.
func (q *metadataQuorum) Brokers() []BrokerInfo {
	img := q.img.Load()
	out := make([]BrokerInfo, 0, len(img.brokers))
	for _, bi := range img.brokers {
		out = append(out, bi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

// Config returns the broker configuration (a copy).
func (n *node) Config() BrokerConfig {
	c := n.cfg
	c.BrokerProps = copyConfigs(n.cfg.BrokerProps)
	return c
}

// Topics returns every topic, sorted by name. The TopicInfo values share
// their slices and maps with the metadata image: callers must not modify
// them.
func (q *metadataQuorum) Topics() []TopicInfo {
	img := q.img.Load()
	out := make([]TopicInfo, 0, len(img.names))
	for _, n := range img.names {
		out = append(out, *img.topics[n])
	}
	return out
}

// Topic looks a topic up by name.
func (q *metadataQuorum) Topic(name string) (TopicInfo, bool) {
	t, ok := q.img.Load().topics[name]
	if !ok {
		return TopicInfo{}, false
	}
	return *t, true
}

// TopicByID looks a topic up by ID.
func (q *metadataQuorum) TopicByID(id [16]byte) (TopicInfo, bool) {
	t, ok := q.img.Load().byID[id]
	if !ok {
		return TopicInfo{}, false
	}
	return *t, true
}

// CreateTopic validates and (unless ValidateOnly) creates a topic,
// creating its partition logs. Returns the topic as created (or as it
// would be).
func (q *metadataQuorum) CreateTopic(ctx context.Context, req CreateTopicRequest) (TopicInfo, error) {
	t, err := q.createTopic(ctx, req)
	if err != nil || req.ValidateOnly {
		return t, err
	}
	// Answer once the new partitions' groups have elected leaders (as
	// Kafka answers once the controller chose them), without the writer
	// lock: the leaders' reports go through the controller.
	q.waitLeaders(ctx, req.Name, 0)
	if t2, ok := q.Topic(req.Name); ok && t2.ID == t.ID {
		return t2, nil
	}
	return t, nil
}

func (q *metadataQuorum) createTopic(ctx context.Context, req CreateTopicRequest) (TopicInfo, error) {
	if err := q.lockWriter(ctx); err != nil {
		return TopicInfo{}, err
	}
	defer q.mu.Unlock()
	img := q.img.Load()
	if err := validateTopicName(req.Name); err != nil {
		return TopicInfo{}, err
	}
	if _, ok := img.topics[req.Name]; ok {
		return TopicInfo{}, fmt.Errorf("%w: %s", ErrTopicExists, req.Name)
	}
	if other := img.collidingTopic(req.Name); other != "" {
		return TopicInfo{}, fmt.Errorf("%w: topic %q collides with existing topic %q ('.' and '_' collide)", ErrInvalidTopic, req.Name, other)
	}
	assign, err := q.assignLocked(img, req)
	if err != nil {
		return TopicInfo{}, err
	}
	if assign, err = checkOrPlace(img, q.brokerPropsOf(img), assign, req.Assignment == nil, 0); err != nil {
		return TopicInfo{}, err
	}
	if err := checkPartitionBudget(img, len(assign)); err != nil {
		return TopicInfo{}, err
	}
	if err := retention.ValidateTopic(req.Configs); err != nil {
		return TopicInfo{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if _, err := retention.LogConfig(req.Configs, q.brokerProps()); err != nil {
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
	if err := q.controllerDiskErr(); err != nil {
		return TopicInfo{}, err
	}
	// A same-named topic whose deletion did not finish, or partition
	// directories of no topic, must not become the new topic's data.
	finished, err := q.local.removeLeftoversLocked(req.Name)
	if err != nil {
		return TopicInfo{}, err
	}
	for _, pid := range finished {
		if _, err := q.commitLocked(Command{Type: CmdDeleteTopicDone, TopicID: pid}); err != nil {
			return TopicInfo{}, err
		}
	}
	next, err := q.commitLocked(c)
	if err != nil {
		return TopicInfo{}, err
	}
	t := next.topics[req.Name]
	openErr := q.local.openLogs(t, 0)
	// The command is durable: publish even if a log failed to open (the
	// next start retries it), so that metadata and disk agree on restart.
	if openErr != nil {
		q.logger.Error("topic created but a partition log failed to open", "topic", req.Name, "err", openErr)
		return *t, openErr
	}
	q.logger.Info("topic created", "topic", req.Name, "partitions", len(t.Partitions), "configs", len(req.Configs))
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
func (r *partitionReplicas) removeLeftoversLocked(name string) ([][16]byte, error) {
	r.effMu.Lock()
	defer r.effMu.Unlock()
	cur := r.meta.img.Load()
	if _, ok := cur.topics[name]; ok {
		return nil, fmt.Errorf("%w: %s", ErrTopicExists, name)
	}
	var finished [][16]byte
	for pid, pd := range cur.pending {
		if pd.Name == name {
			if err := r.deleteLogs(pd); err != nil {
				return nil, err
			}
			finished = append(finished, pid)
		}
	}
	for _, tp := range r.logs.Partitions() {
		if tp.Topic != name {
			continue
		}
		if err := r.deleteStray(tp); err != nil {
			return nil, fmt.Errorf("replication: remove stray %s-%d: %w", tp.Topic, tp.Partition, err)
		}
	}
	return finished, nil
}

// deleteStray deletes tp's directory unless a group runs on it, under
// tp's guard.
func (r *partitionReplicas) deleteStray(tp log.TopicPartition) error {
	g := r.guards.of(tp)
	g.Lock()
	defer g.Unlock()
	if r.group(tp) != nil {
		return nil
	}
	r.logger.Warn("removing stray partition directory before creating its topic", "topic", tp.Topic, "partition", tp.Partition)
	return r.logs.Delete(tp)
}

// assignLocked checks partitions, replication factor and any explicit
// assignment of req and returns the assignment to persist.
func (q *metadataQuorum) assignLocked(img *image, req CreateTopicRequest) ([]Assignment, error) {
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
		n = q.cfg.NumPartitions
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d partitions; must be at least 1", ErrInvalidPartitions, n)
	}
	if n > maxPartitionsPerTopic {
		return nil, fmt.Errorf("%w: %d partitions, more than %d", ErrInvalidPartitions, n, maxPartitionsPerTopic)
	}
	rf := req.ReplicationFactor
	if rf == -1 {
		rf = q.cfg.DefaultReplicationFactor
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
func (q *metadataQuorum) AutoCreate(ctx context.Context, name string) (TopicInfo, error) {
	if t, ok := q.Topic(name); ok {
		return t, nil
	}
	if !q.cfg.AutoCreateTopics {
		return TopicInfo{}, fmt.Errorf("%w: %s (auto.create.topics.enable=false)", ErrUnknownTopicOrPartition, name)
	}
	if err := validateTopicName(name); err != nil {
		return TopicInfo{}, err
	}
	t, err := q.CreateTopic(ctx, CreateTopicRequest{Name: name, NumPartitions: -1, ReplicationFactor: -1})
	if errors.Is(err, ErrTopicExists) {
		if t, ok := q.Topic(name); ok {
			return t, nil
		}
	}
	return t, err
}

// DeleteTopic removes a topic and its partition files: first from the
// metadata (durably), then from disk. If removing files fails, the topic is
// still deleted; the files are removed at the next start or before a topic
// of the same name is created.
func (q *metadataQuorum) DeleteTopic(ctx context.Context, name string) error {
	if !q.cfg.DeleteTopicEnable {
		return fmt.Errorf("%w: %s (delete.topic.enable=false)", ErrTopicDeletionDisabled, name)
	}
	if err := q.lockWriter(ctx); err != nil {
		return err
	}
	defer q.mu.Unlock()
	t, ok := q.img.Load().topics[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, name)
	}
	next, err := q.commitLocked(Command{Type: CmdDeleteTopic, Topic: name, TopicID: t.ID})
	if err != nil {
		return err
	}
	if err := q.finishDeleteLocked(t.ID, next.pending[t.ID]); err != nil {
		q.logger.Error("topic deleted but its logs were not all removed; retried at next start", "topic", name, "err", err)
		return nil
	}
	q.logger.Info("topic deleted", "topic", name)
	return nil
}

// CreatePartitions grows a topic to count partitions. assignment, when
// non-nil, gives the replicas of each new partition.
func (q *metadataQuorum) CreatePartitions(ctx context.Context, name string, count int32, assignment [][]int32, validateOnly bool) error {
	var cur int32
	if t, ok := q.Topic(name); ok {
		cur = int32(len(t.Partitions))
	}
	if err := q.createPartitions(ctx, name, count, assignment, validateOnly); err != nil || validateOnly {
		return err
	}
	q.waitLeaders(ctx, name, cur)
	return nil
}

func (q *metadataQuorum) createPartitions(ctx context.Context, name string, count int32, assignment [][]int32, validateOnly bool) error {
	if err := q.lockWriter(ctx); err != nil {
		return err
	}
	defer q.mu.Unlock()
	img := q.img.Load()
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
	if assign, err = checkOrPlace(img, q.brokerPropsOf(img), assign, assignment == nil, cur); err != nil {
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
	if err := q.controllerDiskErr(); err != nil {
		return err
	}
	next, err := q.commitLocked(c)
	if err != nil {
		return err
	}
	openErr := q.local.openLogs(next.topics[name], cur)
	if openErr != nil {
		return openErr
	}
	q.logger.Info("partitions created", "topic", name, "from", cur, "to", count)
	return nil
}

// SetTopicConfigs replaces a topic's config overrides with configs (the
// complete set; IncrementalAlterConfigs merges into TopicInfo.Configs
// first) and applies them to the live partitions.
func (q *metadataQuorum) SetTopicConfigs(ctx context.Context, name string, configs map[string]string, validateOnly bool) error {
	if err := q.lockWriter(ctx); err != nil {
		return err
	}
	defer q.mu.Unlock()
	t, ok := q.img.Load().topics[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, name)
	}
	cfg, err := retention.LogConfig(configs, q.brokerProps())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if validateOnly {
		return nil
	}
	_, err = q.commitLocked(Command{Type: CmdSetTopicConfigs, Topic: name, Configs: configs})
	if err != nil {
		return err
	}
	q.local.setLogConfigs(t, cfg)
	q.logger.Info("topic configs set", "topic", name, "configs", len(configs))
	return nil
}

// setLogConfigs gives t's open local logs cfg.
func (r *partitionReplicas) setLogConfigs(t *TopicInfo, cfg log.Config) {
	for _, p := range t.Partitions {
		if lp := r.logs.Get(log.TopicPartition{Topic: t.Name, Partition: p.Partition}); lp != nil {
			lp.SetConfig(cfg)
		}
	}
}

// Partition returns the local log of a partition this broker leads.
// ErrUnknownTopicOrPartition or ErrNotLeader otherwise.
func (r *partitionReplicas) Partition(topic string, partition int32) (*log.Partition, error) {
	lp, _, err := r.partition(topic, partition)
	return lp, err
}

func (r *partitionReplicas) partition(topic string, partition int32) (*log.Partition, PartitionInfo, error) {
	if r.closed.Load() {
		return nil, PartitionInfo{}, ErrShuttingDown
	}
	t, ok := r.meta.img.Load().topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, PartitionInfo{}, fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, topic, partition)
	}
	pi := t.Partitions[partition]
	if pi.Leader != r.cfg.NodeID {
		return nil, pi, fmt.Errorf("%w: %s-%d is led by %d", ErrNotLeader, topic, partition, pi.Leader)
	}
	lp := r.logs.Get(log.TopicPartition{Topic: topic, Partition: partition})
	if lp == nil {
		return nil, pi, fmt.Errorf("%w: %s-%d has no open log", log.ErrStorage, topic, partition)
	}
	return lp, pi, nil
}

// Produce appends records to a partition this broker leads and returns once
// they are committed (the high watermark has passed them). With one voter
// the write is committed as soon as it is in the log. A retried idempotent
// batch returns the original offsets with Duplicate set.
func (r *partitionReplicas) Produce(ctx context.Context, topic string, partition int32, records []byte) (log.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return log.AppendResult{}, err
	}
	lp, _, err := r.partition(topic, partition)
	if err != nil {
		return log.AppendResult{}, err
	}
	if err := r.diskErr(); err != nil {
		return log.AppendResult{}, err // below strata.log.dir.min.free.bytes
	}
	g := r.group(lp.TopicPartition())
	if g == nil {
		return log.AppendResult{}, fmt.Errorf("%w: %s-%d has no raft group", log.ErrStorage, topic, partition)
	}
	return g.produce(ctx, records)
}

// AllocateProducerID returns a new, never before used producer ID. IDs come
// from blocks reserved durably in the metadata log, so a restart never
// hands out an ID twice (it skips the rest of the block).
func (q *metadataQuorum) AllocateProducerID(ctx context.Context) (int64, error) {
	if err := q.lockWriter(ctx); err != nil {
		return -1, err
	}
	defer q.mu.Unlock()
	if q.pidNext >= q.pidEnd {
		start := q.img.Load().nextProducerID
		c, _, err := q.commitCmdLocked(Command{Type: CmdAllocateProducerIDs, ProducerIDStart: start, ProducerIDCount: producerIDBlockSize})
		if err != nil {
			return -1, err
		}
		q.pidNext, q.pidEnd = c.ProducerIDStart, c.ProducerIDStart+producerIDBlockSize
	}
	id := q.pidNext
	q.pidNext++
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
