package txncoord

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/groupcoord"
	"github.com/strata-io/strata/internal/coord"
	"github.com/strata-io/strata/replication"
)

// scrapeTimeout bounds one metrics scrape's calls to the shards.
const scrapeTimeout = 2 * time.Second

// Coordinator is this broker's transaction coordinator: it routes each
// transactional ID's requests to the shard of the __transaction_state
// partition the ID hashes to, loading that shard when this broker leads
// the partition (the routing, loading and shard goroutines are the
// core's, internal/coord). Methods are safe for concurrent use.
type Coordinator struct {
	cfg    Config
	broker *replication.Broker
	groups *groupcoord.Coordinator // told of markers on __consumer_offsets
	remote *remoteMarkers          // markers for partitions led elsewhere
	stats  counters                // event counts (metrics.go)
	core   *coord.Coordinator[*shard]
	// verifyLeader confirms this broker leads a __transaction_state
	// partition, writeLocal writes one marker on a partition it leads
	// (the broker's; tests replace them).
	verifyLeader func(ctx context.Context, partition int32) error
	writeLocal   func(ctx context.Context, topic string, partition int32, pid int64, epoch int16, commit bool, coordEpoch int32) error
}

// New returns a coordinator over broker. groups (may be nil in tests) is
// told when a marker lands on a __consumer_offsets partition, so pending
// transactional offsets become visible or are dropped.
func New(cfg Config, broker *replication.Broker, groups *groupcoord.Coordinator) *Coordinator {
	c := &Coordinator{cfg: cfg.withDefaults(), broker: broker, groups: groups}
	c.core = coord.New(coord.Config[*shard]{
		Name:              "transaction coordinator",
		Topic:             Topic,
		NumPartitions:     c.cfg.NumPartitions,
		ReplicationFactor: c.cfg.ReplicationFactor,
		TopicConfigs: map[string]string{
			"cleanup.policy":   "compact",
			"compression.type": "uncompressed",
			"segment.bytes":    strconv.FormatInt(c.cfg.SegmentBytes, 10),
		},
		NewState: func(sh *coord.Shard[*shard]) *shard {
			s := newShard(c, sh.Partition(), sh.Epoch())
			s.core = sh
			return s
		},
		TickInterval: c.cfg.AbortTimedOutInterval,
		LoadTimeout:  c.cfg.LoadTimeout,
		Clock:        coord.WithNow(c.cfg.Clock, c.cfg.Now),
		Logger:       c.cfg.Logger,
	}, broker)
	c.remote = newRemoteMarkers(c)
	c.verifyLeader = func(ctx context.Context, partition int32) error { return broker.VerifyLeader(ctx, Topic, partition) }
	c.writeLocal = c.WriteMarkerLocal
	return c
}

// TransactionVersion is the transaction.version feature level to
// advertise (Config.TransactionVersion).
func (c *Coordinator) TransactionVersion() int16 { return c.cfg.TransactionVersion }

// Close stops every shard and waits for them.
func (c *Coordinator) Close() {
	c.core.Close()
	c.remote.close()
}

// do runs fn on the shard of id and waits for it: the routing error code,
// NOT_COORDINATOR when the shard stops first (coord.DoKey: followed once
// to a new leader epoch here), or ctx's error.
func (c *Coordinator) do(ctx context.Context, id string, fn func(s *shard)) (int16, error) {
	return coord.DoKey(ctx, c.core, id, fn)
}

// ensureTopic returns the state topic, creating it on first use.
func (c *Coordinator) ensureTopic(ctx context.Context) (replication.TopicInfo, error) {
	return c.core.EnsureTopic(ctx)
}

// FindCoordinator answers one transaction key of FindCoordinator: the
// leader of the ID's __transaction_state partition (created on first use).
func (c *Coordinator) FindCoordinator(ctx context.Context, key string) kmsg.FindCoordinatorResponseCoordinator {
	return c.core.Find(ctx, key)
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
	p := coord.PartitionFor(req.Group, int32(len(ot.Partitions)))
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
// on a shard goroutine, bounded by coord.WriteTimeout.
func (c *Coordinator) allocate() (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), coord.WriteTimeout)
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
	c.core.LoadLeading()
	loading := c.core.Clock().NewTimer(c.core.LoadWait()) // one bound for all the loads
	defer loading.Stop()
	for _, s := range c.core.Shards() {
		select {
		case <-s.LoadedC():
		case <-s.Done():
			continue
		case <-loading.C():
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			return resp, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		var part []TxnState
		if _, err := coord.Do(ctx, s, 0, func(s *shard) {
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
