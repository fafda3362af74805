package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/groupcoord"
	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/txncoord"
)

// Produce: v3-13
//
// Behaviour:
//   - Only magic-2 record batches (v3+). Each partition's records must be
//     exactly one batch (Kafka's ProduceRequest.validateRecords): several
//     batches, a truncated batch, another magic or a control batch is
//     INVALID_RECORD, zstd below v7 is UNSUPPORTED_COMPRESSION_TYPE, a
//     transactional batch without a TransactionalID is
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED (as Kafka). CRC, record count and
//     producer fields are checked by log.Partition.Append.
//   - Clients cannot write to __consumer_offsets (INVALID_TOPIC_EXCEPTION,
//     as Kafka refuses appends to internal topics): only the group
//     coordinator writes there.
//   - A topic whose cleanup.policy contains compact refuses records without
//     a key (INVALID_RECORD, with the record's index for v8+), as Kafka;
//     its batches are opened to check (produce_compacted.go).
//   - acks must be 0, 1 or -1 (else INVALID_REQUIRED_ACKS for every
//     partition). acks=0 is processed and answered with nothing. acks=1 and
//     acks=-1 both return once the batch is committed (DESIGN.md: a stronger
//     promise than Kafka's acks=1).
//   - TimeoutMillis bounds the wait for the commit: REQUEST_TIMED_OUT after it
//     (the batch may still commit, as in Kafka).
//   - The records bytes go to Broker.Produce as they sit in the request buffer
//     (kmsg's decoding slices them; nothing copies them here). The log
//     stamps the base offset and leader epoch into them in place.
//   - A retried idempotent batch (same producer, epoch and sequence as one
//     already written) is answered with the original base offset and no error.
//   - Partitions of one request are produced concurrently (bounded); requests
//     on one connection are processed one after another (doc.go), so an
//     idempotent producer's pipelined batches keep their order.
//   - Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for
//     v13 topic IDs), NOT_LEADER_OR_FOLLOWER, CORRUPT_MESSAGE,
//     MESSAGE_TOO_LARGE, INVALID_TIMESTAMP, OUT_OF_ORDER_SEQUENCE_NUMBER,
//     INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID,
//     UNSUPPORTED_FOR_MESSAGE_FORMAT, INVALID_RECORD (with RecordErrors v8+
//     when the log says which record), KAFKA_STORAGE_ERROR.
//   - A topic with strata.produce.backlog.group and .max.records refuses
//     its batches with NOT_ENOUGH_REPLICAS (retriable; the message, v8+,
//     names the group and the limit) while the group's backlog is over
//     the limit (produce_backlog.go).
//
// Version notes:
//   - v3: TransactionalID, magic 2 only
//   - v5: LogStartOffset in the response
//   - v7: zstd allowed
//   - v8: RecordErrors and ErrorMessage
//   - v9: flexible
//   - v10-v12: CurrentLeader/NodeEndpoints tags: a NOT_LEADER_OR_FOLLOWER
//     partition names the leader this broker knows (KIP-951,
//     leader_hints.go), v12 no change for us
//   - v13: topics by ID
//
// Differences from Kafka:
//   - Transactional batches (with a TransactionalID) are verified against
//     the transaction coordinator before they are appended (KIP-890 part
//     1): a partition not in the producer's ongoing transaction gets
//     INVALID_TXN_STATE, an older epoch INVALID_PRODUCER_EPOCH. The check is
//     made in-process when this broker coordinates the transactional ID;
//     when another broker does, the batch is appended unverified (Kafka
//     asks that broker with AddPartitionsToTxn v4 VerifyOnly). From v12
//     (KIP-890 part 2) the produce adds its partition to the transaction
//     instead (in process, or AddPartitionsToTxn to the coordinator);
//     NOT_ENOUGH_REPLICAS (retriable) while the coordinator is busy.
//   - Clients cannot write to __transaction_state either.
//   - Produce v0-v2 (message sets, magic 0/1) are not served (Kafka 4.0 also
//     dropped them); such requests close the connection.
func init() { register(0, 3, 13, barrier, (*Server).handleProduce, (*authz).produce) }

// produceConcurrency bounds the partitions of one request produced at once.
const produceConcurrency = 32

func (s *Server) handleProduce(ctx context.Context, req *kmsg.ProduceRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	jobs := s.produceJobs(req, resp)
	runProduceJobs(jobs, func(jb produceJob) { s.producePartition(ctx, req, jb) })
	s.addProduceLeaderHints(resp)
	if req.Acks == 0 {
		return nil, acksZeroResult(resp)
	}
	return resp, nil
}

// produceJob is one partition's batch of a Produce request to append; its
// result goes to rt.Partitions[idx].
type produceJob struct {
	topic string
	rt    *kmsg.ProduceResponseTopic
	idx   int
	rec   []byte
}

// produceJobs builds resp's skeleton, fills in the partitions that fail
// the request-level checks (acks, topic, the batch's shape, compacted
// keys) and returns the others to append.
func (s *Server) produceJobs(req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) []produceJob {
	var fixed int16 // an error for every partition
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		fixed = kerr.InvalidRequiredAcks.Code
	}
	var jobs []produceJob
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))

		name, topicErr := rt.Topic, int16(0)
		if req.Version >= 13 {
			if t, ok := s.broker.TopicByID(rt.TopicID); ok {
				name = t.Name
			} else {
				topicErr = kerr.UnknownTopicID.Code
			}
		}
		if name == groupcoord.OffsetsTopic || name == txncoord.Topic {
			topicErr = kerr.InvalidTopicException.Code
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			switch {
			case fixed != 0:
				sp.ErrorCode = fixed
			case topicErr != 0:
				sp.ErrorCode = topicErr
			default:
				if code, msg := validateProduceRecords(req.Version, rp.Records, req.TransactionID != nil); code != 0 {
					sp.ErrorCode, sp.ErrorMessage = code, &msg
					continue
				}
				if msg, refused := s.backlog.refuse(name); refused {
					sp.ErrorCode = kerr.NotEnoughReplicas.Code
					if req.Version >= 8 {
						sp.ErrorMessage = &msg
					}
					continue
				}
				if !s.checkCompactedKeys(req.Version, name, sp, rp.Records) {
					continue
				}
				jobs = append(jobs, produceJob{topic: name, rt: st, idx: j, rec: rp.Records})
			}
		}
	}
	return jobs
}

// runProduceJobs runs produce for every job: one goroutine per partition
// (at most produceConcurrency at once); a partition named twice in one
// request is produced in request order by the same goroutine.
func runProduceJobs(jobs []produceJob, produce func(produceJob)) {
	groups := make(map[string][]produceJob, len(jobs))
	var order []string
	for _, jb := range jobs {
		key := jb.topic + "\x00" + strconv.Itoa(int(jb.rt.Partitions[jb.idx].Partition))
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], jb)
	}
	if len(order) == 1 {
		for _, jb := range groups[order[0]] {
			produce(jb)
		}
		return
	}
	sem := make(chan struct{}, produceConcurrency)
	var wg sync.WaitGroup
	for _, key := range order {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			for _, jb := range groups[key] {
				produce(jb)
			}
		}()
	}
	wg.Wait()
}

// producePartition appends one job's batch (a transactional one once the
// transaction coordinator has verified or added its partition) and fills
// in its partition's result.
func (s *Server) producePartition(ctx context.Context, req *kmsg.ProduceRequest, jb produceJob) {
	sp := &jb.rt.Partitions[jb.idx]
	// A panic (a bug some input triggered) fails this partition only,
	// not the request, the connection or the process; the fan-out's
	// goroutines are not the handler's, whose recover would not see it.
	defer s.recoverPartition(&sp.ErrorCode, "produce", jb.topic, sp.Partition)
	if code := s.verifyTxnProduce(ctx, req, jb); code != 0 {
		sp.ErrorCode = code
		return
	}
	proposed := time.Now()
	res, err := s.broker.Produce(ctx, jb.topic, sp.Partition, jb.rec)
	// The append and the wait for the commit run on the partition's Raft
	// goroutines, as Kafka's wait for the replicas is in purgatory: not
	// charged to request_percentage (quotas.go).
	parked(ctx, time.Since(proposed))
	if err != nil && !errors.Is(err, log.ErrDuplicateSequence) {
		sp.ErrorCode = errCode(err)
		if req.Version >= 8 {
			sp.ErrorMessage = errMessage(err)
			var ri recordIndexer
			if errors.As(err, &ri) {
				er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
				er.RelativeOffset, er.ErrorMessage = ri.RecordIndex(), errMessage(err)
				sp.ErrorRecords = append(sp.ErrorRecords, er)
			}
		}
		if errors.Is(err, replication.ErrUnknownTopicOrPartition) || errors.Is(err, replication.ErrNotLeader) {
			return
		}
		if p, perr := s.broker.Partition(jb.topic, sp.Partition); perr == nil {
			sp.LogStartOffset = p.Offsets().LogStart
		}
		return
	}
	sp.BaseOffset = res.BaseOffset
	sp.LogAppendTime = res.LogAppendTime
	sp.LogStartOffset = res.LogStartOffset
	if err == nil {
		s.metrics.topics.produced(jb.topic, jb.rec)
	}
}

// verifyTxnProduce checks a transactional batch against its transaction
// before it lands (KIP-890 part 1: the partition must be in the
// producer's ongoing transaction; from v12, part 2: the produce adds its
// partition). It returns the partition's error code, or 0.
func (s *Server) verifyTxnProduce(ctx context.Context, req *kmsg.ProduceRequest, jb produceJob) int16 {
	if req.TransactionID == nil || len(jb.rec) < segment.HeaderSize || binary.BigEndian.Uint16(jb.rec[segment.OffAttributes:])&segment.AttrTransactional == 0 {
		return 0
	}
	pid := int64(binary.BigEndian.Uint64(jb.rec[segment.OffProducerID:]))
	epoch := int16(binary.BigEndian.Uint16(jb.rec[segment.OffProducerEpoch:]))
	verify := s.txns.Verify
	if req.Version >= 12 {
		verify = s.txns.AddImplicit
	}
	code, err := verify(ctx, *req.TransactionID, pid, epoch, jb.topic, jb.rt.Partitions[jb.idx].Partition)
	if err != nil {
		return errCode(err)
	}
	return code
}

// acksZeroResult is an acks=0 request's outcome: no response; but an
// error closes the connection, as Kafka does, so the client notices (e.g.
// refreshes metadata after NOT_LEADER_OR_FOLLOWER) instead of losing
// records silently.
func acksZeroResult(resp *kmsg.ProduceResponse) error {
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			if sp.ErrorCode != 0 {
				return fmt.Errorf("%w: acks=0 produce to %s/%d failed: %v", ErrAcksZeroFailed, st.Topic, sp.Partition, kerr.ErrorForCode(sp.ErrorCode))
			}
		}
	}
	return nil
}

// validateProduceRecords does Kafka's cheap request-level checks: exactly
// one whole magic-2 batch, zstd only from v7. It returns a Kafka code and
// message, or 0.
func validateProduceRecords(version int16, rec []byte, txnID bool) (int16, string) {
	if len(rec) < segment.HeaderSize {
		return kerr.InvalidRecord.Code, fmt.Sprintf("records of %d bytes hold no whole record batch", len(rec))
	}
	if magic := rec[segment.OffMagic]; magic != 2 {
		return kerr.InvalidRecord.Code, fmt.Sprintf("produce v%d only accepts record batches of magic 2, not %d", version, magic)
	}
	n := int64(int32(binary.BigEndian.Uint32(rec[segment.OffBatchLength:])))
	if n+segment.LogOverhead != int64(len(rec)) {
		return kerr.InvalidRecord.Code, "produce requests must contain exactly one whole record batch per partition"
	}
	attrs := binary.BigEndian.Uint16(rec[segment.OffAttributes:])
	if attrs&segment.AttrCompressionMask == 4 && version < 7 {
		return kerr.UnsupportedCompressionType.Code, "zstd needs produce v7 or later"
	}
	if attrs&segment.AttrControl != 0 {
		return kerr.InvalidRecord.Code, "control batches cannot be produced by clients"
	}
	if attrs&segment.AttrTransactional != 0 && !txnID {
		// Kafka: transactional records need an authorized transactional
		// ID; without one the answer is this authorization error.
		return kerr.TransactionalIDAuthorizationFailed.Code, "transactional records without a transactional id"
	}
	return 0, ""
}

func (z *authz) produce(r *kmsg.ProduceRequest) (kmsg.Response, func(kmsg.Response)) {
	name := func(i int) string {
		if r.Version >= 13 {
			return z.topicName(r.Topics[i].TopicID)
		}
		return r.Topics[i].Topic
	}
	txnDenied := r.TransactionID != nil && !z.ok(acl.Write, acl.TransactionalID, *r.TransactionID)
	keep, denied := z.splitTopics(len(r.Topics), acl.Write, name)
	if txnDenied {
		keep, denied = nil, append(keep, denied...)
	}
	if len(denied) == 0 {
		return nil, nil
	}
	code := errTopicAuth
	if txnDenied {
		code = errTxnAuth
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		pr := resp.(*kmsg.ProduceResponse)
		for _, t := range gone {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, code
				sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			pr.Topics = append(pr.Topics, st)
		}
	}
}
