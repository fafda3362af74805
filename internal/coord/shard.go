package coord

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/log"
)

const (
	maxQueuedCalls = 1024    // calls waiting for a shard; more wait in the sender
	loadReadBytes  = 1 << 20 // bytes per Read while loading
	// maxLoadReads bounds the load loop (1 MiB reads: 1 TiB).
	maxLoadReads = 1 << 20
	// WriteTimeout bounds one Write (the records' replication).
	WriteTimeout = 30 * time.Second
)

// ErrShardGone is returned by a load cut short by the shard stopping.
var ErrShardGone = errors.New("coord: coordinator partition unloaded")

// Shard owns one partition of the topic that this broker leads, at one
// leader epoch, and the user's state of it. Its goroutine is the only one
// that touches the state: calls arrive on a bounded channel, timers as
// ticks.
type Shard[S State] struct {
	c         *Coordinator[S]
	partition int32
	epoch     int32
	state     S

	calls    chan func(S)
	stop     chan struct{} // closed to ask run to return
	done     chan struct{} // closed when run returned
	loaded   atomic.Bool   // set once the partition is replayed
	loadedCh chan struct{} // closed with loaded set
}

func (c *Coordinator[S]) newShard(p, epoch int32) *Shard[S] {
	s := &Shard[S]{
		c: c, partition: p, epoch: epoch,
		calls:    make(chan func(S), maxQueuedCalls),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		loadedCh: make(chan struct{}),
	}
	s.state = c.cfg.NewState(s)
	return s
}

// Partition is the shard's partition of the topic.
func (s *Shard[S]) Partition() int32 { return s.partition }

// Epoch is the leader epoch the shard loaded at.
func (s *Shard[S]) Epoch() int32 { return s.epoch }

// State is the user's state (touch it only on the shard goroutine).
func (s *Shard[S]) State() S { return s.state }

// IsLoaded reports whether the replay finished.
func (s *Shard[S]) IsLoaded() bool { return s.loaded.Load() }

// LoadedC is closed once the replay finished.
func (s *Shard[S]) LoadedC() <-chan struct{} { return s.loadedCh }

// Done is closed once the shard's goroutine returned.
func (s *Shard[S]) Done() <-chan struct{} { return s.done }

// Stopping is closed once the shard was asked to stop.
func (s *Shard[S]) Stopping() <-chan struct{} { return s.stop }

// Halt asks the shard to stop; it returns at once.
func (s *Shard[S]) Halt() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
}

func (s *Shard[S]) isStopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

func (s *Shard[S]) run() {
	cfg := &s.c.cfg
	// A panic in the user's code -- a replay, a request's call, a tick,
	// Stopped -- is a bug that some input triggered: it stops this shard
	// only (its callers get NOT_COORDINATOR and retry, and the next request
	// reloads the partition from its log), never the process.
	// Done closes only after the panic was counted and logged and the
	// coordinator forgot the shard, so whoever waits on it sees all of that.
	defer func() {
		s.notePanic(recover())
		func() {
			defer func() { s.notePanic(recover()) }()
			s.state.Stopped()
		}()
		s.c.forget(s)
		close(s.done)
	}()
	start := time.Now()
	if err := s.load(); err != nil {
		cfg.Logger.Warn(cfg.Name+" load failed", "partition", s.partition, "epoch", s.epoch, "err", err)
		return
	}
	s.loaded.Store(true)
	close(s.loadedCh)
	attrs := append([]any{"partition", s.partition, "epoch", s.epoch}, s.state.Loaded()...)
	cfg.Logger.Info(cfg.Name+" loaded", append(attrs, "took", time.Since(start))...)
	tick := cfg.Clock.NewTicker(cfg.TickInterval)
	defer tick.Stop()
	for !s.isStopping() {
		select {
		case <-s.stop:
			return
		case fn := <-s.calls:
			fn(s.state)
		case <-tick.C():
			if !s.c.Leads(s.partition, s.epoch) {
				cfg.Logger.Info(cfg.Name+" unloading: no longer leader", "partition", s.partition, "epoch", s.epoch)
				return
			}
			s.state.Tick(cfg.Clock.Now())
		}
	}
}

// Panics counts the panics shards of any coordinator recovered from (tests
// and metrics read it; each is a bug, logged with its stack).
var Panics atomic.Int64

// notePanic counts and logs a value recovered from a panic (nil: none).
func (s *Shard[S]) notePanic(r any) {
	if r == nil {
		return
	}
	Panics.Add(1)
	s.c.cfg.Logger.Error(s.c.cfg.Name+" shard panicked; unloaded", "partition", s.partition, "epoch", s.epoch,
		"panic", r, "stack", string(debug.Stack()))
}

// load replays the partition from its log start to the log end seen at
// start, waiting (bounded) for that tail to commit: as leader, everything
// in the log will commit, and the state must include all of it.
func (s *Shard[S]) load() error {
	cfg := &s.c.cfg
	lp, err := s.c.broker.Partition(cfg.Topic, s.partition)
	if err != nil {
		return err
	}
	target := lp.Offsets().LogEnd
	off := lp.Offsets().LogStart
	deadline := cfg.Clock.NewTimer(cfg.LoadTimeout)
	defer deadline.Stop()
	now := cfg.Clock.Now()
	for i := 0; off < target; i++ {
		if i >= maxLoadReads {
			return fmt.Errorf("coord: load of %s partition %d did not finish in %d reads", cfg.Topic, s.partition, maxLoadReads)
		}
		res, err := lp.Read(off, loadReadBytes)
		if errors.Is(err, log.ErrOffsetOutOfRange) && off < res.Offsets.LogStart {
			off = res.Offsets.LogStart // retention moved the start meanwhile
			continue
		}
		if err != nil {
			return err
		}
		if len(res.Records) == 0 {
			select {
			case <-lp.Wait(off):
			case <-deadline.C():
				return fmt.Errorf("coord: %s partition %d tail did not commit in %v", cfg.Topic, s.partition, cfg.LoadTimeout)
			case <-s.stop:
				return ErrShardGone
			}
			continue
		}
		next, err := DecodeBatches(res.Records, off, func(r Decoded) error { return s.state.Replay(r, now) })
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

// Write appends recs to the partition and returns once they are committed
// (replicated); only then may the replies they back be sent. A failed
// write stops the shard -- its state is ahead of the log -- and the next
// request reloads it from the log.
func (s *Shard[S]) Write(recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	return s.produce(BuildBatches(recs, s.c.cfg.Clock.Now().UnixMilli()))
}

// WriteTxn is Write of one transactional batch of producer pid at epoch.
func (s *Shard[S]) WriteTxn(recs []Record, pid int64, epoch int16) error {
	return s.produce([][]byte{BuildTxnBatch(recs, s.c.cfg.Clock.Now().UnixMilli(), pid, epoch)})
}

func (s *Shard[S]) produce(batches [][]byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), WriteTimeout)
	defer cancel()
	for _, b := range batches {
		if _, err := s.c.broker.Produce(ctx, s.c.cfg.Topic, s.partition, b); err != nil {
			s.Halt()
			return err
		}
	}
	return nil
}

// Submit queues fn to run on the shard goroutine without waiting for it
// (a background job reporting back); false when the shard stops first.
func (s *Shard[S]) Submit(fn func(S)) bool {
	select {
	case s.calls <- fn:
		return true
	case <-s.stop:
		return false
	}
}

// Call runs fn on s's goroutine and returns what fn -- or anything it
// hands reply to, later -- replies first. code is NOT_COORDINATOR when s
// stops before replying (the client finds the coordinator again); err is
// ctx's when it ends first. s nil means the routing failed with code,
// which is passed through.
func Call[S State, R any](ctx context.Context, s *Shard[S], code int16, fn func(st S, reply func(R))) (R, int16, error) {
	var zero R
	if code != 0 || s == nil {
		if code == 0 {
			code = kerr.NotCoordinator.Code
		}
		return zero, code, nil
	}
	ch := make(chan R, 1)
	reply := func(r R) {
		select {
		case ch <- r:
		default: // replied already
		}
	}
	select {
	case s.calls <- func(st S) { fn(st, reply) }:
	case <-s.done:
		return zero, kerr.NotCoordinator.Code, nil
	case <-ctx.Done():
		return zero, 0, ctx.Err()
	}
	select {
	case r := <-ch:
		return r, 0, nil
	case <-s.done:
		select {
		case r := <-ch:
			return r, 0, nil
		default:
			return zero, kerr.NotCoordinator.Code, nil
		}
	case <-ctx.Done():
		return zero, 0, ctx.Err()
	}
}

// CallKey routes key (Route) and runs fn on its shard (Call). When the
// shard stops before replying and this broker now leads the key's
// partition at another leader epoch (a re-election moved it, as after a
// restart), it routes and calls once more instead of answering
// NOT_COORDINATOR: fn then runs on the new epoch's shard, as it would
// when the client retried. fn must not have replied on the first shard
// (it did not: the shard stopped first).
func CallKey[S State, R any](ctx context.Context, c *Coordinator[S], key string, fn func(st S, reply func(R))) (R, int16, error) {
	for attempt := 0; ; attempt++ {
		s, code := c.Route(key)
		r, code, err := Call(ctx, s, code, fn)
		if err != nil || code != kerr.NotCoordinator.Code || s == nil || attempt > 0 {
			return r, code, err
		}
		if _, moved := c.movedHere(s); !moved {
			return r, code, err
		}
	}
}

// DoKey is CallKey for a fn that replies by returning.
func DoKey[S State](ctx context.Context, c *Coordinator[S], key string, fn func(st S)) (int16, error) {
	_, code, err := CallKey(ctx, c, key, func(st S, reply func(struct{})) {
		fn(st)
		reply(struct{}{})
	})
	return code, err
}

// Do is Call for a fn that replies by returning: it waits until fn ran.
func Do[S State](ctx context.Context, s *Shard[S], code int16, fn func(st S)) (int16, error) {
	_, code, err := Call(ctx, s, code, func(st S, reply func(struct{})) {
		fn(st)
		reply(struct{}{})
	})
	return code, err
}
