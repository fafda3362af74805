package replication

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/hashicorp/raft"
	"github.com/strata-io/strata/retention"
)

// Topics in the metadata: reads of topics and brokers from the image,
// and the writers that create, grow, configure and delete topics and
// allocate producer IDs. Each writer validates against the image and
// commits one command under the writer lock; the logs and groups that
// follow are the replicas' (replicaEffects).

// finishDeleteLocked removes a deleted topic's logs and records that.
func (q *metadataQuorum) finishDeleteLocked(id [16]byte, pd pendingDelete) error {
	if err := q.local.deleteLogs(pd); err != nil {
		return err
	}
	_, err := q.commitLocked(Command{Type: CmdDeleteTopicDone, TopicID: id})
	return err
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

// checkPartitionBudget refuses to grow the cluster past
// maxPartitionsPerBroker partitions.
func checkPartitionBudget(img *image, more int) error {
	if total := img.partitionCount(); total+more > maxPartitionsPerBroker {
		return fmt.Errorf("%w: %d more partitions would exceed the limit of %d (now %d)", ErrInvalidPartitions, more, maxPartitionsPerBroker, total)
	}
	return nil
}

// finishDeletionsLocked finishes, on the controller, the topic deletions
// img records as pending (interrupted by a crash), by name.
func (q *metadataQuorum) finishDeletionsLocked(img *image) {
	if q.raft.State() != raft.Leader {
		return
	}
	pendingIDs := make([][16]byte, 0, len(img.pending))
	for id := range img.pending {
		pendingIDs = append(pendingIDs, id)
	}
	sort.Slice(pendingIDs, func(i, j int) bool { return img.pending[pendingIDs[i]].Name < img.pending[pendingIDs[j]].Name })
	for _, id := range pendingIDs {
		pd := img.pending[id]
		q.logger.Info("finishing interrupted topic deletion", "topic", pd.Name)
		if err := q.finishDeleteLocked(id, pd); err != nil {
			// Not fatal: the leftovers are retried at the next start or
			// before a topic of the same name is created.
			q.logger.Error("could not remove deleted topic's logs", "topic", pd.Name, "err", err)
		}
	}
}
