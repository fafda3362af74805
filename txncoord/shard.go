package txncoord

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/coord"
)

// A shard owns the transactions of one __transaction_state partition that
// this broker leads, at one leader epoch: it is the state of a shard of
// the coordinator core (internal/coord), whose goroutine is the only one
// touching the machine -- requests arrive as calls, marker completions as
// calls too, timers as ticks (Tick). Records are written through the
// core's Write before the replies they back; a failed write unloads the
// shard, and the next request reloads it from the log.

// maxMarkerJobs bounds the transactions whose markers are being written
// at once per shard; more wait in the shard's queue.
const maxMarkerJobs = 256

// endResult answers an EndTxn that waited for its markers: the code and
// the producer ID and epoch the client continues with (EndTxn v5).
type endResult struct {
	code  int16
	pid   int64
	epoch int16
}

type shard struct {
	c         *Coordinator
	partition int32
	epoch     int32
	core      *coord.Shard[*shard]
	jobs      chan struct{} // semaphore of marker goroutines

	// Owned by the shard goroutine.
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
		jobs:       make(chan struct{}, maxMarkerJobs),
		mc:         newMachine(),
		endWaiters: map[string][]chan endResult{},
		writing:    map[string]bool{},
	}
}

// Replay is coord.State's: one stored record. One bad record must not
// make every transaction of the partition unavailable: it is skipped.
func (s *shard) Replay(r coord.Decoded, _ time.Time) error {
	if r.Control >= 0 {
		return nil // never written here
	}
	id, m, err := decodeRecord(r.Key, r.Value)
	if err != nil {
		s.c.cfg.Logger.Warn("skipping bad transaction record", "partition", s.partition, "offset", r.Offset, "err", err)
		return nil
	}
	s.mc.replay(id, m)
	return nil
}

// Loaded is coord.State's: transactions caught between prepare and
// complete finish now.
func (s *shard) Loaded() []any {
	for _, j := range s.mc.pending() {
		s.startMarkers(j)
	}
	s.nextExpire = s.c.cfg.Now().Add(s.c.cfg.RemoveExpiredInterval)
	return []any{"transactions", len(s.mc.txns)}
}

// Tick is coord.State's: abort timed-out transactions, expire idle IDs.
func (s *shard) Tick(time.Time) {
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
	_ = s.apply(&e)
}

// Stopped is coord.State's: every EndTxn still waiting is answered
// NOT_COORDINATOR (the client finds the coordinator again and retries;
// the next load resumes the markers).
func (s *shard) Stopped() {
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
		if err := s.core.Write(e.records); err != nil {
			s.c.cfg.Logger.Warn("transaction coordinator write failed; unloading", "partition", s.partition, "err", err)
			return err
		}
	}
	for _, j := range e.markers {
		s.startMarkers(j)
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
		stop := s.core.Stopping()
		select {
		case s.jobs <- struct{}{}:
		case <-stop:
			return
		}
		defer func() { <-s.jobs }()
		if err := s.c.writeMarkers(stop, s.partition, j, s.epoch); err != nil {
			if errors.Is(err, errDeposed) {
				s.c.cfg.Logger.Warn("transaction coordinator deposed while writing markers; unloading", "partition", s.partition, "err", err)
				s.core.Submit(func(s *shard) { s.core.Halt() })
			}
			return // the shard is stopping; the next load resumes
		}
		s.core.Submit(func(s *shard) { s.markersDone(j) })
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
