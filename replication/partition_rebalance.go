package replication

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/replication/transport"
)

// Automatic leader balance (Kafka's auto.leader.rebalance.enable).
//
// A broker that restarts comes back leading nothing: while it was away its
// partitions elected other leaders, and raft keeps a leader as long as it
// lives (a returning replica's pre-vote is refused while the group has a
// leader). After a rolling restart the broker restarted last leads
// nothing, and the others carry all the load. Kafka's controller checks
// every leader.imbalance.check.interval.seconds, per broker, the share of
// the partitions whose preferred replica (the first of the replica list)
// it is but that another broker leads; above
// leader.imbalance.per.broker.percentage it runs a preferred election for
// them. Here the metadata group's leader (the controller) does the same
// from its image, through ElectLeaders' own path (transfer: a raft
// leadership transfer run by the current leader, forwarded over the Mux),
// for each such partition whose preferred replica is in the ISR, is not
// being reassigned and whose broker the controller heard from within
// repeatLiveness.

// LeaderRebalanceConfig is Kafka's automatic preferred-leader election.
// The zero value is off (tests and embedders opt in; `strata serve` turns
// it on by default, as Kafka does).
type LeaderRebalanceConfig struct {
	// Enable is auto.leader.rebalance.enable.
	Enable bool
	// Interval is leader.imbalance.check.interval.seconds (0 = 300 s).
	Interval time.Duration
	// ImbalancePercent is leader.imbalance.per.broker.percentage: a
	// broker's preferred partitions led elsewhere are moved back once
	// they are more than this share of all its preferred partitions.
	// 0 moves back any.
	ImbalancePercent int
}

// rebalanceParallel bounds the leadership transfers of one check in
// flight at once (each bounded by transferTimeout).
const rebalanceParallel = 16

// defaultRebalanceInterval is Kafka's leader.imbalance.check.interval.seconds.
const defaultRebalanceInterval = 300 * time.Second

// rebalanceMove is one partition to give back to its preferred replica.
type rebalanceMove struct {
	t         *TopicInfo
	partition int32
	to        int32
}

// imbalancedPartitions returns, from img, the moves a check makes: for
// every broker whose share of preferred partitions led by another broker
// exceeds pct percent, those of its partitions it can take back now
// (preferred replica in the ISR, the partition led, not being
// reassigned, live(broker) true). imbalance counts, per broker, its
// preferred partitions led elsewhere (for the log), whatever the share.
func imbalancedPartitions(img *image, pct int, live func(int32) bool) (moves []rebalanceMove, imbalance map[int32]int) {
	preferred := map[int32]int{}
	notLed := map[int32][]rebalanceMove{}
	for _, name := range img.names {
		t := img.topics[name]
		for i := range t.Partitions {
			pi := &t.Partitions[i]
			if len(pi.Replicas) < 2 {
				continue
			}
			pref := pi.Replicas[0]
			preferred[pref]++
			if pi.Leader == pref {
				continue
			}
			notLed[pref] = append(notLed[pref], rebalanceMove{t: t, partition: pi.Partition, to: pref})
		}
	}
	imbalance = map[int32]int{}
	brokers := make([]int32, 0, len(notLed))
	for n, ms := range notLed {
		imbalance[n] = len(ms)
		brokers = append(brokers, n)
	}
	sort.Slice(brokers, func(i, j int) bool { return brokers[i] < brokers[j] })
	for _, n := range brokers {
		ms := notLed[n]
		// Kafka's test: imbalanced / preferred > percentage / 100.
		if len(ms)*100 <= pct*preferred[n] || !live(n) {
			continue
		}
		for _, m := range ms {
			pi := m.t.Partitions[m.partition]
			if pi.Leader < 0 || pi.Target != nil || !containsNode(pi.ISR, n) {
				continue
			}
			moves = append(moves, m)
		}
	}
	return moves, imbalance
}

// rebalanceLoop runs the check every interval while this broker is the
// controller; it ends when the broker stops. Started by NewBroker;
// rebalanceDone closes when it returns.
func (r *partitionReplicas) rebalanceLoop() {
	defer close(r.rebalanceDone)
	rc := r.cfg.LeaderRebalance
	if !rc.Enable {
		return
	}
	every := rc.Interval
	if every <= 0 {
		every = defaultRebalanceInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
		if r.closed.Load() || !r.ready.Load() || r.meta.raft == nil || r.meta.raft.State() != raft.Leader {
			continue
		}
		r.rebalanceOnce(rc.ImbalancePercent, every)
	}
}

// rebalanceOnce runs one check: the moves imbalancedPartitions finds, at
// most rebalanceParallel at once, all within bound.
func (r *partitionReplicas) rebalanceOnce(pct int, bound time.Duration) {
	live := func(n int32) bool {
		if n == r.cfg.NodeID {
			return true
		}
		addr, err := r.meta.peerAddr(n)
		return err == nil && r.mux != nil && r.mux.PeerHeardWithin(addr, transport.RepeatLiveness)
	}
	moves, imbalance := imbalancedPartitions(r.meta.img.Load(), pct, live)
	if len(moves) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(bound, transferTimeout))
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	start := time.Now()
	sem := make(chan struct{}, rebalanceParallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	moved, failed := 0, 0
	var firstErr error
	for _, m := range moves {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if r.closed.Load() {
				return // stopping: handOffLeaderships moves leaderships away
			}
			// Read the partition again: the image may have moved on since
			// the check (a leader change, a reassignment).
			t := r.meta.img.Load().byID[m.t.ID]
			if t == nil || int(m.partition) >= len(t.Partitions) {
				return
			}
			pi := t.Partitions[m.partition]
			if pi.Leader == m.to || pi.Leader < 0 || len(pi.Replicas) == 0 || pi.Replicas[0] != m.to {
				return
			}
			err := r.transfer(ctx, t, m.partition, m.to)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			moved++
		}()
	}
	wg.Wait()
	args := []any{"imbalance", imbalance, "moves", len(moves), "moved", moved, "failed", failed,
		"took", time.Since(start).Round(time.Millisecond)}
	if firstErr != nil {
		args = append(args, "first_error", firstErr.Error())
	}
	r.logger.Info("leader rebalance: preferred replicas given their leadership back", args...)
}
