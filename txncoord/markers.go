package txncoord

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/groupcoord"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication"
)

// Markers: when a transaction ends, its coordinator writes a control batch
// (log.MarkerBatch) to every partition of the transaction, through
// Broker.Produce on that partition's leader: locally when this broker
// leads it, else with WriteTxnMarkers (API 27) to the leader, as Kafka's
// brokers do between themselves. A marker on a __consumer_offsets
// partition also tells the group coordinator, which makes the
// transaction's pending offsets visible (commit) or drops them (abort).
// Markers are retried until written (or the partition is deleted, or the
// shard unloads: the next load resumes them).

var errStopped = errors.New("txncoord: stopped")

// errDeposed is writeMarkers' answer when another broker leads the
// coordinator partition: the shard halts (its EndTxn waiters get
// NOT_COORDINATOR and find the coordinator again) rather than wait for
// the metadata to say so.
var errDeposed = errors.New("txncoord: no longer the coordinator")

const (
	markerBackoffMin = 20 * time.Millisecond
	markerBackoffMax = time.Second
)

// WriteMarkerLocal writes one marker to a partition this broker leads and,
// for __consumer_offsets, completes the group coordinator's pending
// offsets. The protocol's WriteTxnMarkers handler calls it too.
func (c *Coordinator) WriteMarkerLocal(ctx context.Context, topic string, partition int32, pid int64, epoch int16, commit bool, coordEpoch int32) error {
	b := log.MarkerBatch(pid, epoch, commit, coordEpoch, c.cfg.Now().UnixMilli())
	if _, err := c.broker.Produce(ctx, topic, partition, b); err != nil {
		return err
	}
	if topic == groupcoord.OffsetsTopic && c.groups != nil {
		c.groups.CompleteTxn(ctx, partition, pid, commit)
	}
	return nil
}

// writeMarkers writes every marker of j, retrying until all are written;
// errStopped when stop closes first. partition is the coordinator's
// __transaction_state partition and coordEpoch its leader epoch.
//
// A deposed coordinator must not write a marker: under KIP-890 part 2 the
// markers carry the epoch the producer's next transaction writes with, so
// a marker landing after the new coordinator completed the transaction
// (and the producer began its next one on that partition) ends the next
// transaction there too, and read_committed returns its records before
// their commit was asked for. The fault harness found it (seed 3, 4 min:
// the coordinator of __transaction_state-3 lost its leadership at
// 04:46:58.208, the new one wrote the commit marker at .344, the producer
// wrote its next transaction at .435, and the old coordinator's retried
// marker, still with coordinator epoch 6, landed at .448). So each attempt
// first confirms leadership with a quorum (VerifyLeader), every write
// checks stop, and stop cancels the attempt's writes in flight.
func (c *Coordinator) writeMarkers(stop <-chan struct{}, partition int32, j markerJob, coordEpoch int32) error {
	remaining := j.partitions
	backoff := markerBackoffMin
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for {
		if stopped() {
			return errStopped
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.MarkerTimeout)
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		var failed []tp
		byLeader := map[int32][]tp{}
		var lastErr error
		if err := c.verifyLeader(ctx, partition); err != nil {
			if errors.Is(err, replication.ErrNotLeader) {
				cancel()
				return fmt.Errorf("%w: %w", errDeposed, err)
			}
			failed, lastErr = remaining, err
			remaining = nil
		}
		for _, p := range remaining {
			if stopped() {
				cancel()
				return errStopped
			}
			err := c.writeLocal(ctx, p.topic, p.partition, j.pid, j.epoch, j.commit, coordEpoch)
			switch {
			case err == nil:
				c.stats.markers.Add(1)
			case errors.Is(err, replication.ErrUnknownTopicOrPartition):
				// Deleted since: nothing to mark (Kafka skips it too).
			case errors.Is(err, log.ErrTransactionCoordinatorFenced):
				// A newer coordinator has written this producer's marker
				// there: this one is deposed; its marker must not land.
				c.cfg.Logger.Info("transaction marker refused: a newer coordinator wrote this producer's marker", "transactional_id", j.id, "topic", p.topic, "partition", p.partition, "coordinator_epoch", coordEpoch)
			case errors.Is(err, replication.ErrNotLeader):
				if l := c.leaderOf(p); l >= 0 && l != c.broker.NodeID() {
					byLeader[l] = append(byLeader[l], p)
				} else {
					failed, lastErr = append(failed, p), err
				}
			default:
				failed, lastErr = append(failed, p), err
			}
		}
		for leader, ps := range byLeader {
			if stopped() {
				cancel()
				return errStopped
			}
			f, err := c.remote.send(ctx, leader, j, ps, coordEpoch)
			if err != nil {
				lastErr = err
			}
			c.stats.markers.Add(int64(len(ps) - len(f)))
			failed = append(failed, f...)
		}
		cancel()
		if len(failed) == 0 {
			return nil
		}
		c.stats.markerFailures.Add(int64(len(failed)))
		c.cfg.Logger.Warn("transaction markers not written yet; retrying", "transactional_id", j.id, "partitions", len(failed), "first", failed[0].topic+"-"+strconv.Itoa(int(failed[0].partition)), "err", lastErr)
		remaining = failed
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
			return errStopped
		}
		backoff = min(backoff*2, markerBackoffMax)
	}
}

func (c *Coordinator) leaderOf(p tp) int32 {
	t, ok := c.broker.Topic(p.topic)
	if !ok || p.partition < 0 || int(p.partition) >= len(t.Partitions) {
		return -1
	}
	return t.Partitions[p.partition].Leader
}

// remoteMarkers sends WriteTxnMarkers to other brokers through one kgo
// client, created on first use (a single broker never needs it).
type remoteMarkers struct {
	c      *Coordinator
	mu     sync.Mutex
	client *kgo.Client // protected by mu
}

func newRemoteMarkers(c *Coordinator) *remoteMarkers { return &remoteMarkers{c: c} }

func (r *remoteMarkers) get() (*kgo.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		return r.client, nil
	}
	var seeds []string
	for _, b := range r.c.broker.Brokers() {
		seeds = append(seeds, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("strata-txn-markers")}, r.c.cfg.ClientOpts...)...)
	if err != nil {
		return nil, err
	}
	r.client = cl
	return cl, nil
}

func (r *remoteMarkers) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client != nil {
		r.client.Close()
		r.client = nil
	}
}

// send writes the markers of j for ps on broker leader; it returns the
// partitions that failed.
func (r *remoteMarkers) send(ctx context.Context, leader int32, j markerJob, ps []tp, coordEpoch int32) ([]tp, error) {
	cl, err := r.get()
	if err != nil {
		return ps, err
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = j.pid, j.epoch, j.commit, coordEpoch
	idx := map[string]int{}
	for _, p := range ps {
		i, ok := idx[p.topic]
		if !ok {
			i = len(m.Topics)
			idx[p.topic] = i
			m.Topics = append(m.Topics, kmsg.WriteTxnMarkersRequestMarkerTopic{Topic: p.topic})
		}
		m.Topics[i].Partitions = append(m.Topics[i].Partitions, p.partition)
	}
	req.Markers = append(req.Markers, m)
	kresp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		return ps, fmt.Errorf("txncoord: WriteTxnMarkers to broker %d: %w", leader, err)
	}
	var failed []tp
	var firstErr error
	for _, rm := range kresp.Markers {
		for _, t := range rm.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 || p.ErrorCode == kerr.UnknownTopicOrPartition.Code {
					continue
				}
				if p.ErrorCode == kerr.TransactionCoordinatorFenced.Code {
					// A newer coordinator wrote the producer's marker
					// there: this one's must not land (not retried).
					r.c.cfg.Logger.Info("transaction marker refused: a newer coordinator wrote this producer's marker", "transactional_id", j.id, "topic", t.Topic, "partition", p.Partition, "coordinator_epoch", coordEpoch)
					continue
				}
				failed = append(failed, tp{t.Topic, p.Partition})
				if firstErr == nil {
					firstErr = kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}
	}
	return failed, firstErr
}

// add asks the coordinator of id (another broker) to add a partition to
// the producer's transaction (AddPartitionsToTxn; kgo finds the
// coordinator).
func (r *remoteMarkers) add(ctx context.Context, id string, pid int64, epoch int16, topic string, partition int32) (int16, error) {
	cl, err := r.get()
	if err != nil {
		return 0, err
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{partition}}}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, nil
	}
	for _, tx := range resp.Transactions {
		for _, t := range tx.Topics {
			for _, p := range t.Partitions {
				return p.ErrorCode, nil
			}
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			return p.ErrorCode, nil
		}
	}
	return kerr.UnknownServerError.Code, nil
}
