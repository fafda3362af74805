package txncoord

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/log"
)

// A shard owns the transactions of one __transaction_state partition that
// this broker leads, at one leader epoch. Its goroutine (run) is the only
// one touching the machine: requests arrive as calls on a bounded
// channel, marker completions as calls too, timers as ticks. Records are
// written through Broker.Produce before the replies they back; a failed
// write unloads the shard, and the next request reloads it from the log.

const (
	maxQueuedCalls = 1024
	loadReadBytes  = 1 << 20
	maxLoadReads   = 1 << 20
	writeTimeout   = 30 * time.Second
	// maxMarkerJobs bounds the transactions whose markers are being
	// written at once per shard; more wait in the shard's queue.
	maxMarkerJobs = 256
)

var errShardGone = errors.New("txncoord: coordinator partition unloaded")

// endResult answers an EndTxn that waited for its markers: the code and
// the producer ID and epoch the client continues with (EndTxn v5).
type endResult struct {
	code  int16
	pid   int64
	epoch int16
}

// call runs fn on the shard goroutine.
type call struct{ fn func(s *shard) }

type shard struct {
	c         *Coordinator
	partition int32
	epoch     int32

	calls    chan call
	stop     chan struct{}
	done     chan struct{}
	loaded   atomic.Bool
	loadedCh chan struct{}
	jobs     chan struct{} // semaphore of marker goroutines

	// Owned by the run goroutine.
	mc *machine
	// endWaiters are EndTxn replies waiting for their markers, by ID.
	endWaiters map[string][]chan endResult
	// writing are the IDs whose markers are being written.
	writing    map[string]bool
	nextExpire time.Time
}

func newShard(c *Coordinator, partition, epoch int32) *shard {
	return &shard{
		c: c, partition: partition, epoch: epoch,
		calls:      make(chan call, maxQueuedCalls),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		loadedCh:   make(chan struct{}),
		jobs:       make(chan struct{}, maxMarkerJobs),
		mc:         newMachine(),
		endWaiters: map[string][]chan endResult{},
		writing:    map[string]bool{},
	}
}

func (s *shard) halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
}

func (s *shard) run() {
	defer close(s.done)
	defer s.c.forget(s)
	defer s.failWaiters()
	start := time.Now()
	if err := s.load(); err != nil {
		s.c.cfg.Logger.Warn("transaction coordinator load failed", "partition", s.partition, "epoch", s.epoch, "err", err)
		return
	}
	s.loaded.Store(true)
	close(s.loadedCh)
	s.c.cfg.Logger.Info("transaction coordinator loaded", "partition", s.partition, "epoch", s.epoch, "transactions", len(s.mc.txns), "took", time.Since(start))
	// Transactions caught between prepare and complete finish now.
	for _, j := range s.mc.pending() {
		s.startMarkers(j)
	}
	s.nextExpire = s.c.cfg.Now().Add(s.c.cfg.RemoveExpiredInterval)
	tick := time.NewTicker(s.c.cfg.AbortTimedOutInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case cl := <-s.calls:
			cl.fn(s)
			if s.isStopping() {
				return
			}
		case <-tick.C:
			if !s.c.leads(s.partition, s.epoch) {
				s.c.cfg.Logger.Info("transaction coordinator unloading: no longer leader", "partition", s.partition, "epoch", s.epoch)
				return
			}
			now := s.c.cfg.Now()
			var e effects
			if n := s.mc.abortTimedOut(now, &e); n > 0 {
				s.c.stats.timeouts.Add(int64(n))
				s.c.cfg.Logger.Info("aborting timed-out transactions", "partition", s.partition, "count", n)
			}
			if !now.Before(s.nextExpire) {
				s.nextExpire = now.Add(s.c.cfg.RemoveExpiredInterval)
				if n := s.mc.expire(now, s.c.cfg.IDExpiration, &e); n > 0 {
					s.c.stats.expired.Add(int64(n))
					s.c.cfg.Logger.Info("expired transactional ids", "partition", s.partition, "count", n)
				}
			}
			if err := s.apply(&e); err != nil {
				return
			}
		}
	}
}

func (s *shard) isStopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// failWaiters answers every EndTxn still waiting: NOT_COORDINATOR (the
// client finds the coordinator again and retries; the next load resumes
// the markers).
func (s *shard) failWaiters() {
	for id, ws := range s.endWaiters {
		for _, w := range ws {
			w <- endResult{code: kerr.NotCoordinator.Code}
		}
		delete(s.endWaiters, id)
	}
}

// apply writes e's records, then starts its marker jobs. A failed write
// stops the shard (memory is ahead of the log) and is returned.
func (s *shard) apply(e *effects) error {
	if len(e.records) > 0 {
		if err := s.write(e.records); err != nil {
			s.c.cfg.Logger.Warn("transaction coordinator write failed; unloading", "partition", s.partition, "err", err)
			s.halt()
			return err
		}
	}
	for _, j := range e.markers {
		s.startMarkers(j)
	}
	return nil
}

func (s *shard) write(recs []record) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	for _, b := range buildBatches(recs, s.c.cfg.Now().UnixMilli()) {
		if _, err := s.c.broker.Produce(ctx, Topic, s.partition, b); err != nil {
			return err
		}
	}
	return nil
}

// startMarkers writes a transaction's markers on a goroutine (bounded by
// jobs) and, once all are written, completes the transaction on the
// shard goroutine.
func (s *shard) startMarkers(j markerJob) {
	if s.writing[j.id] {
		return
	}
	s.writing[j.id] = true
	go func() {
		select {
		case s.jobs <- struct{}{}:
		case <-s.stop:
			return
		}
		defer func() { <-s.jobs }()
		if err := s.c.writeMarkers(s.stop, j, s.epoch); err != nil {
			return // the shard is stopping; the next load resumes
		}
		select {
		case s.calls <- call{fn: func(s *shard) { s.markersDone(j) }}:
		case <-s.stop:
		}
	}()
}

// markersDone completes a transaction and answers its EndTxn waiters.
func (s *shard) markersDone(j markerJob) {
	delete(s.writing, j.id)
	var e effects
	s.mc.markersWritten(j, s.c.cfg.Now(), &e)
	r := endResult{pid: -1, epoch: -1}
	if m := s.mc.txns[j.id]; m != nil {
		r.pid, r.epoch = m.pid, m.epoch
	}
	if err := s.apply(&e); err != nil {
		r = endResult{code: kerr.NotCoordinator.Code, pid: -1, epoch: -1}
	}
	for _, w := range s.endWaiters[j.id] {
		w <- r
	}
	delete(s.endWaiters, j.id)
}

// load replays the partition from its log start to the log end seen at
// start, waiting (bounded) for that tail to commit.
func (s *shard) load() error {
	lp, err := s.c.broker.Partition(Topic, s.partition)
	if err != nil {
		return err
	}
	target := lp.Offsets().LogEnd
	off := lp.Offsets().LogStart
	deadline := time.NewTimer(s.c.cfg.LoadTimeout)
	defer deadline.Stop()
	for i := 0; off < target; i++ {
		if i >= maxLoadReads {
			return fmt.Errorf("txncoord: load of partition %d did not finish in %d reads", s.partition, maxLoadReads)
		}
		res, err := lp.Read(off, loadReadBytes)
		if errors.Is(err, log.ErrOffsetOutOfRange) && off < res.Offsets.LogStart {
			off = res.Offsets.LogStart
			continue
		}
		if err != nil {
			return err
		}
		if len(res.Records) == 0 {
			select {
			case <-lp.Wait(off):
			case <-deadline.C:
				return fmt.Errorf("txncoord: partition %d tail did not commit in %v", s.partition, s.c.cfg.LoadTimeout)
			case <-s.stop:
				return errShardGone
			}
			continue
		}
		next, err := decodeBatches(res.Records, off, func(o int64, key, value []byte) {
			id, m, err := decodeRecord(key, value)
			if err != nil {
				// One bad record must not make every transaction of
				// the partition unavailable.
				s.c.cfg.Logger.Warn("skipping bad transaction record", "partition", s.partition, "offset", o, "err", err)
				return
			}
			s.mc.replay(id, m)
		})
		if err != nil {
			return err
		}
		if next <= off {
			return fmt.Errorf("%w: no progress at offset %d", ErrBadRecord, off)
		}
		off = next
	}
	return nil
}
