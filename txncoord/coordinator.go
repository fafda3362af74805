package txncoord

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/groupcoord"
	"github.com/strata-io/strata/replication"
)

// loadWait is how long a request waits for its coordinator partition to
// load before it is answered COORDINATOR_LOAD_IN_PROGRESS.
const loadWait = 2 * time.Second

// scrapeTimeout bounds one metrics scrape's calls to the shards.
const scrapeTimeout = 2 * time.Second

// Coordinator is this broker's transaction coordinator: it routes each
// transactional ID's requests to the shard of the __transaction_state
// partition the ID hashes to, loading that shard when this broker leads
// the partition. Methods are safe for concurrent use.
type Coordinator struct {
	cfg    Config
	broker *replication.Broker
	groups *groupcoord.Coordinator // told of markers on __consumer_offsets
	remote *remoteMarkers          // markers for partitions led elsewhere
	stats  counters                // event counts (metrics.go)

	createMu sync.Mutex // serializes creation of the state topic

	mu     sync.Mutex
	shards map[int32]*shard // protected by mu
	closed bool             // protected by mu
}

// New returns a coordinator over broker. groups (may be nil in tests) is
// told when a marker lands on a __consumer_offsets partition, so pending
// transactional offsets become visible or are dropped.
func New(cfg Config, broker *replication.Broker, groups *groupcoord.Coordinator) *Coordinator {
	c := &Coordinator{cfg: cfg.withDefaults(), broker: broker, groups: groups, shards: map[int32]*shard{}}
	c.remote = newRemoteMarkers(c)
	return c
}

// TransactionVersion is the transaction.version feature level to
// advertise (Config.TransactionVersion).
func (c *Coordinator) TransactionVersion() int16 { return c.cfg.TransactionVersion }

// Close stops every shard and waits for them.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	shards := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.mu.Unlock()
	for _, s := range shards {
		s.halt()
		<-s.done
	}
	c.remote.close()
}

func (c *Coordinator) forget(s *shard) {
	c.mu.Lock()
	if c.shards[s.partition] == s {
		delete(c.shards, s.partition)
	}
	c.mu.Unlock()
}

// leads reports whether this broker leads partition p at epoch.
func (c *Coordinator) leads(p, epoch int32) bool {
	t, ok := c.broker.Topic(Topic)
	if !ok || int(p) >= len(t.Partitions) {
		return false
	}
	pi := t.Partitions[p]
	return pi.Leader == c.broker.NodeID() && pi.LeaderEpoch == epoch
}

// route finds (loading if needed) the shard of a transactional ID: the
// shard, or NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) route(id string) (*shard, int16) {
	t, ok := c.broker.Topic(Topic)
	if !ok || len(t.Partitions) == 0 {
		return nil, kerr.NotCoordinator.Code
	}
	s, code := c.shardFor(t.Partitions[PartitionFor(id, int32(len(t.Partitions)))])
	if code != 0 {
		return nil, code
	}
	if s.loaded.Load() {
		return s, 0
	}
	tm := time.NewTimer(loadWait)
	defer tm.Stop()
	select {
	case <-s.loadedCh:
		return s, 0
	case <-s.done:
		return nil, kerr.NotCoordinator.Code
	case <-tm.C:
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
}

// shardFor returns the shard of a partition this broker leads, starting
// its load (or a reload at a new leader epoch).
func (c *Coordinator) shardFor(pi replication.PartitionInfo) (*shard, int16) {
	if pi.Leader != c.broker.NodeID() {
		return nil, kerr.NotCoordinator.Code
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, kerr.NotCoordinator.Code
	}
	s := c.shards[pi.Partition]
	switch {
	case s != nil && s.epoch != pi.LeaderEpoch:
		s.halt()
		prev := s
		s = newShard(c, pi.Partition, pi.LeaderEpoch)
		c.shards[pi.Partition] = s
		go func() {
			<-prev.done // the old epoch's writes finish before the replay
			s.run()
		}()
	case s == nil:
		s = newShard(c, pi.Partition, pi.LeaderEpoch)
		c.shards[pi.Partition] = s
		go s.run()
	}
	return s, 0
}

// do runs fn on the shard of id and waits for it: the routing error code,
// NOT_COORDINATOR when the shard stops first, or ctx's error.
func (c *Coordinator) do(ctx context.Context, id string, fn func(s *shard)) (int16, error) {
	s, code := c.route(id)
	if code != 0 {
		return code, nil
	}
	return c.doOn(ctx, s, fn)
}

func (c *Coordinator) doOn(ctx context.Context, s *shard, fn func(s *shard)) (int16, error) {
	done := make(chan struct{})
	select {
	case s.calls <- call{fn: func(s *shard) { fn(s); close(done) }}:
	case <-s.done:
		return kerr.NotCoordinator.Code, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case <-done:
		return 0, nil
	case <-s.done:
		select {
		case <-done:
			return 0, nil
		default:
			return kerr.NotCoordinator.Code, nil
		}
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// ensureTopic returns the state topic, creating it on first use.
func (c *Coordinator) ensureTopic(ctx context.Context) (replication.TopicInfo, error) {
	if t, ok := c.broker.Topic(Topic); ok {
		return t, nil
	}
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if t, ok := c.broker.Topic(Topic); ok {
		return t, nil
	}
	rf := c.cfg.ReplicationFactor
	if n := len(c.broker.Brokers()); int(rf) > n {
		rf = int16(n)
	}
	t, err := c.broker.CreateTopic(ctx, replication.CreateTopicRequest{
		Name:              Topic,
		NumPartitions:     c.cfg.NumPartitions,
		ReplicationFactor: rf,
		Configs: map[string]string{
			"cleanup.policy":   "compact",
			"compression.type": "uncompressed",
			"segment.bytes":    strconv.FormatInt(c.cfg.SegmentBytes, 10),
		},
	})
	if errors.Is(err, replication.ErrTopicExists) {
		if t, ok := c.broker.Topic(Topic); ok {
			return t, nil
		}
	}
	return t, err
}

// FindCoordinator answers one transaction key of FindCoordinator: the
// leader of the ID's __transaction_state partition (created on first use).
func (c *Coordinator) FindCoordinator(ctx context.Context, key string) kmsg.FindCoordinatorResponseCoordinator {
	co := kmsg.NewFindCoordinatorResponseCoordinator()
	co.Key, co.NodeID, co.Port = key, -1, -1
	fail := func(e *kerr.Error) kmsg.FindCoordinatorResponseCoordinator {
		co.ErrorCode = e.Code
		msg := e.Message
		co.ErrorMessage = &msg
		return co
	}
	if key == "" {
		return fail(kerr.InvalidRequest)
	}
	t, err := c.ensureTopic(ctx)
	if err != nil || len(t.Partitions) == 0 {
		c.cfg.Logger.Warn("transaction state topic unavailable", "err", err)
		return fail(kerr.CoordinatorNotAvailable)
	}
	pi := t.Partitions[PartitionFor(key, int32(len(t.Partitions)))]
	if pi.Leader < 0 {
		return fail(kerr.CoordinatorNotAvailable)
	}
	for _, b := range c.broker.Brokers() {
		if b.NodeID == pi.Leader {
			co.NodeID, co.Host, co.Port = b.NodeID, b.Host, b.Port
			if b.NodeID == c.broker.NodeID() {
				c.shardFor(pi) // start loading: the client's next request is for it
			}
			return co
		}
	}
	return fail(kerr.CoordinatorNotAvailable)
}

// InitProducerID answers InitProducerId for a transactional ID (the
// caller handles the idempotent-only case).
func (c *Coordinator) InitProducerID(ctx context.Context, req *kmsg.InitProducerIDRequest) (*kmsg.InitProducerIDResponse, error) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	id := ""
	if req.TransactionalID != nil {
		id = *req.TransactionalID
	}
	if id == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	if _, err := c.ensureTopic(ctx); err != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	r := initRequest{id: id, timeoutMs: req.TransactionTimeoutMillis, pid: -1, epoch: -1, newCodes: req.Version >= 4}
	if req.Version >= 3 && req.ProducerID >= 0 {
		r.pid, r.epoch = req.ProducerID, req.ProducerEpoch
	}
	code, err := c.do(ctx, id, func(s *shard) {
		var e effects
		pid, epoch, code := s.mc.initProducerID(r, c.cfg.Now(), c.cfg.MaxTimeout, c.allocate, &e)
		if err := s.apply(&e); err != nil {
			code, pid, epoch = kerr.NotCoordinator.Code, -1, -1
		}
		resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = pid, epoch, code
	})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		resp.ErrorCode = code
	}
	return resp, nil
}

// partitionCode is 0 when topic/partition exists, else
// UNKNOWN_TOPIC_OR_PARTITION.
func (c *Coordinator) partitionCode(topic string, p int32) int16 {
	t, ok := c.broker.Topic(topic)
	if !ok || p < 0 || int(p) >= len(t.Partitions) {
		return kerr.UnknownTopicOrPartition.Code
	}
	return 0
}

// addPartitions runs one transaction of AddPartitionsToTxn: per-partition
// codes, in request order.
func (c *Coordinator) addPartitions(ctx context.Context, id string, pid int64, epoch int16, verifyOnly bool, parts []tp, newCodes bool) ([]int16, error) {
	codes := make([]int16, len(parts))
	fill := func(code int16) {
		for i := range codes {
			codes[i] = code
		}
	}
	bad := false
	for i, p := range parts {
		if codes[i] = c.partitionCode(p.topic, p.partition); codes[i] != 0 {
			bad = true
		}
	}
	if bad {
		// Kafka: the unknown ones say so, the rest were not attempted.
		for i := range codes {
			if codes[i] == 0 {
				codes[i] = kerr.OperationNotAttempted.Code
			}
		}
		return codes, nil
	}
	code, err := c.do(ctx, id, func(s *shard) {
		if verifyOnly {
			for i, p := range parts {
				codes[i] = s.mc.verify(id, pid, epoch, p.topic, p.partition)
			}
			return
		}
		var e effects
		code := s.mc.addPartitions(id, pid, epoch, parts, c.cfg.Now(), newCodes, &e)
		if err := s.apply(&e); err != nil {
			code = kerr.NotCoordinator.Code
		}
		fill(code)
	})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		fill(code)
	}
	return codes, nil
}

// AddPartitionsToTxn answers AddPartitionsToTxn v0-5 (batched
// transactions and VerifyOnly from v4, as brokers send it).
func (c *Coordinator) AddPartitionsToTxn(ctx context.Context, req *kmsg.AddPartitionsToTxnRequest) (*kmsg.AddPartitionsToTxnResponse, error) {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	newCodes := req.Version >= 2
	if req.Version < 4 {
		var parts []tp
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, tp{t.Topic, p})
			}
		}
		if len(parts) > maxTxnPartitions {
			return nil, errors.New("txncoord: too many partitions in AddPartitionsToTxn")
		}
		codes, err := c.addPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, parts, newCodes)
		if err != nil {
			return nil, err
		}
		i := 0
		for _, t := range req.Topics {
			rt := kmsg.AddPartitionsToTxnResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p, ErrorCode: codes[i]})
				i++
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	for _, tx := range req.Transactions {
		var parts []tp
		for _, t := range tx.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, tp{t.Topic, p})
			}
		}
		if len(parts) > maxTxnPartitions {
			return nil, errors.New("txncoord: too many partitions in AddPartitionsToTxn")
		}
		codes, err := c.addPartitions(ctx, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly, parts, true)
		if err != nil {
			return nil, err
		}
		rtx := kmsg.AddPartitionsToTxnResponseTransaction{TransactionalID: tx.TransactionalID}
		i := 0
		for _, t := range tx.Topics {
			rt := kmsg.AddPartitionsToTxnResponseTransactionTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.AddPartitionsToTxnResponseTransactionTopicPartition{Partition: p, ErrorCode: codes[i]})
				i++
			}
			rtx.Topics = append(rtx.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, rtx)
	}
	return resp, nil
}

// AddOffsetsToTxn answers AddOffsetsToTxn: the group's __consumer_offsets
// partition joins the transaction (its TxnOffsetCommit records are then
// decided by the transaction's markers).
func (c *Coordinator) AddOffsetsToTxn(ctx context.Context, req *kmsg.AddOffsetsToTxnRequest) (*kmsg.AddOffsetsToTxnResponse, error) {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	if c.groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	ot, err := c.groups.EnsureOffsetsTopic(ctx)
	if err != nil || len(ot.Partitions) == 0 {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	p := groupcoord.PartitionFor(req.Group, int32(len(ot.Partitions)))
	codes, err := c.addPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, []tp{{groupcoord.OffsetsTopic, p}}, req.Version >= 2)
	if err != nil {
		return nil, err
	}
	resp.ErrorCode = codes[0]
	return resp, nil
}

// EndTxn answers EndTxn v0-5: commit or abort. The answer waits until
// every marker is written, so the outcome is visible everywhere once the
// client hears it. v5 (KIP-890 part 2, with transaction.version 2) bumps
// the epoch and answers the producer ID and epoch to continue with.
func (c *Coordinator) EndTxn(ctx context.Context, req *kmsg.EndTxnRequest) (*kmsg.EndTxnResponse, error) {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	tv2 := req.Version >= 5
	var wait chan endResult
	code, err := c.do(ctx, req.TransactionalID, func(s *shard) {
		var e effects
		var code int16
		var w bool
		if tv2 {
			code, w = s.mc.endTxnV2(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, c.cfg.Now(), c.allocate, &e)
		} else {
			code, w = s.mc.endTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, c.cfg.Now(), req.Version >= 2, &e)
		}
		if err := s.apply(&e); err != nil {
			code, w = kerr.NotCoordinator.Code, false
		}
		resp.ErrorCode = code
		if code == 0 && w {
			wait = make(chan endResult, 1)
			s.endWaiters[req.TransactionalID] = append(s.endWaiters[req.TransactionalID], wait)
		} else if code == 0 && tv2 {
			m := s.mc.txns[req.TransactionalID]
			resp.ProducerID, resp.ProducerEpoch = m.pid, m.epoch
		}
	})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	if wait != nil {
		select {
		case r := <-wait:
			resp.ErrorCode = r.code
			if tv2 && r.code == 0 {
				resp.ProducerID, resp.ProducerEpoch = r.pid, r.epoch
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if resp.ErrorCode == 0 && !tv2 {
		resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch
	}
	return resp, nil
}

// allocate hands out a new producer ID (the broker's, durable). It runs
// on a shard goroutine, bounded by writeTimeout.
func (c *Coordinator) allocate() (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	return c.broker.AllocateProducerID(ctx)
}

// Verify answers whether a transactional produce to topic/partition is
// part of the producer's ongoing transaction (KIP-890 part 1: the
// partition leader asks before appending): 0, INVALID_TXN_STATE, or a
// fence. When the ID's coordinator is another broker it answers 0 (that
// broker is not asked; see doc.go).
func (c *Coordinator) Verify(ctx context.Context, id string, pid int64, epoch int16, topic string, partition int32) (int16, error) {
	t, ok := c.broker.Topic(Topic)
	if !ok || len(t.Partitions) == 0 {
		return kerr.InvalidTxnState.Code, nil
	}
	if t.Partitions[PartitionFor(id, int32(len(t.Partitions)))].Leader != c.broker.NodeID() {
		return 0, nil
	}
	var out int16
	code, err := c.do(ctx, id, func(s *shard) { out = s.mc.verify(id, pid, epoch, topic, partition) })
	if err != nil {
		return 0, err
	}
	if code != 0 {
		// Not loaded or moving: the client retries on this code.
		return kerr.NotEnoughReplicas.Code, nil
	}
	return out, nil
}

// TxnState is one transaction as DescribeTransactions and
// ListTransactions report it.
type TxnState struct {
	ID           string
	ProducerID   int64
	Epoch        int16
	State        string
	TimeoutMs    int32
	StartMs      int64 // -1 when no transaction is open
	LastUpdateMs int64
	Partitions   map[string][]int32
}

func (m *txnMeta) export() TxnState {
	st := TxnState{ID: m.id, ProducerID: m.pid, Epoch: m.epoch, State: StateName(m.state), TimeoutMs: m.timeoutMs, StartMs: m.startMs, LastUpdateMs: m.lastUpdateMs, Partitions: map[string][]int32{}}
	for _, p := range m.list() {
		st.Partitions[p.topic] = append(st.Partitions[p.topic], p.partition)
	}
	return st
}

// DescribeTransactions answers DescribeTransactions (v0).
func (c *Coordinator) DescribeTransactions(ctx context.Context, req *kmsg.DescribeTransactionsRequest) (*kmsg.DescribeTransactionsResponse, error) {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
		var m *TxnState
		code, err := c.do(ctx, id, func(s *shard) {
			if tm := s.mc.txns[id]; tm != nil {
				x := tm.export()
				m = &x
			}
		})
		if err != nil {
			return nil, err
		}
		switch {
		case code != 0:
			st.ErrorCode = code
		case m == nil:
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
		default:
			st.State, st.TimeoutMillis, st.StartTimestamp = m.State, m.TimeoutMs, m.StartMs
			st.ProducerID, st.ProducerEpoch = m.ProducerID, m.Epoch
			topics := make([]string, 0, len(m.Partitions))
			for t := range m.Partitions {
				topics = append(topics, t)
			}
			sort.Strings(topics)
			for _, t := range topics {
				st.Topics = append(st.Topics, kmsg.DescribeTransactionsResponseTransactionStateTopic{Topic: t, Partitions: m.Partitions[t]})
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}

// ListTransactions answers ListTransactions (v0-1): the transactions of
// every loaded coordinator partition this broker leads, filtered by state,
// producer ID, and (v1) running for at least DurationFilterMillis.
func (c *Coordinator) ListTransactions(ctx context.Context, req *kmsg.ListTransactionsRequest) (*kmsg.ListTransactionsResponse, error) {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	states := map[string]bool{}
	for _, s := range req.StateFilters {
		known := false
		for st := stateEmpty; st <= statePrepareFence; st++ {
			if StateName(st) == s {
				known = true
			}
		}
		if !known {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
			continue
		}
		states[s] = true
	}
	pids := map[int64]bool{}
	for _, p := range req.ProducerIDFilters {
		pids[p] = true
	}
	nowMs := c.cfg.Now().UnixMilli()
	// Coordinator partitions this broker leads get loaded, so the list is
	// complete for them.
	if t, ok := c.broker.Topic(Topic); ok {
		for _, pi := range t.Partitions {
			if pi.Leader == c.broker.NodeID() {
				c.shardFor(pi)
			}
		}
	}
	c.mu.Lock()
	shards := make([]*shard, 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.mu.Unlock()
	sort.Slice(shards, func(i, j int) bool { return shards[i].partition < shards[j].partition })
	loading := time.NewTimer(loadWait) // one bound for all the loads
	defer loading.Stop()
	for _, s := range shards {
		select {
		case <-s.loadedCh:
		case <-s.done:
			continue
		case <-loading.C:
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			return resp, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		var part []TxnState
		if _, err := c.doOn(ctx, s, func(s *shard) {
			for _, id := range s.mc.sortedIDs() {
				part = append(part, s.mc.txns[id].export())
			}
		}); err != nil {
			return nil, err
		}
		for _, m := range part {
			if len(states) > 0 && !states[m.State] {
				continue
			}
			if len(pids) > 0 && !pids[m.ProducerID] {
				continue
			}
			if req.Version >= 1 && req.DurationFilterMillis >= 0 && nowMs-m.StartMs < req.DurationFilterMillis {
				continue
			}
			resp.TransactionStates = append(resp.TransactionStates, kmsg.ListTransactionsResponseTransactionState{TransactionalID: m.ID, ProducerID: m.ProducerID, TransactionState: m.State})
		}
	}
	return resp, nil
}

// AddImplicit adds topic/partition to the producer's transaction on
// behalf of the partition's leader (KIP-890 part 2: a Produce v12+
// transactional batch or a TxnOffsetCommit v5+ adds its partition itself,
// with no AddPartitionsToTxn from the client). The coordinator is asked in
// process when it is this broker, else with AddPartitionsToTxn. The code is
// what the produce or commit should answer: 0, INVALID_TXN_STATE,
// INVALID_PRODUCER_EPOCH for a fenced producer, INVALID_PRODUCER_ID_MAPPING,
// or NOT_ENOUGH_REPLICAS (retriable) while the coordinator is moving,
// loading or completing the previous transaction (Kafka's mapping).
func (c *Coordinator) AddImplicit(ctx context.Context, id string, pid int64, epoch int16, topic string, partition int32) (int16, error) {
	var code int16
	t, ok := c.broker.Topic(Topic)
	if ok && len(t.Partitions) > 0 && t.Partitions[PartitionFor(id, int32(len(t.Partitions)))].Leader == c.broker.NodeID() {
		codes, err := c.addPartitions(ctx, id, pid, epoch, false, []tp{{topic, partition}}, true)
		if err != nil {
			return 0, err
		}
		code = codes[0]
	} else {
		var err error
		if code, err = c.remote.add(ctx, id, pid, epoch, topic, partition); err != nil {
			c.cfg.Logger.Warn("implicit add to a remote transaction coordinator failed", "transactional_id", id, "err", err)
			code = kerr.NotEnoughReplicas.Code
		}
	}
	switch code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code, kerr.ConcurrentTransactions.Code:
		return kerr.NotEnoughReplicas.Code, nil
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code, nil
	}
	return code, nil
}
