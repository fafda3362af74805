package replication

import (
	"fmt"
	"sync"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/retention"
)

// The local effects of applied metadata commands (onApply, reconcile):
// opening the logs and groups of partitions placed on this broker,
// removing those of deleted topics and of replicas moved away, and
// applying topic and broker configs to live logs. Each partition's open
// and removal take its guard (partition_guard.go).

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

// setLogConfigs gives t's open local logs cfg.
func (r *partitionReplicas) setLogConfigs(t *TopicInfo, cfg log.Config) {
	for _, p := range t.Partitions {
		if lp := r.logs.Get(log.TopicPartition{Topic: t.Name, Partition: p.Partition}); lp != nil {
			lp.SetConfig(cfg)
		}
	}
}

// onApply carries out an applied command's local effects on this broker
// (raft's FSM goroutine; every broker, the proposer included). While the
// broker starts, effects wait: replaying old commands one by one could
// delete the directory of a later topic of the same name; start()
// reconciles the disk with the final image instead.
//
// publish makes next the broker's image. Under effMu, so start's
// reconcile (which sets ready, then takes effMu and reads the image) sees
// either this command's image or this command's effects. Commands that
// make partitions usable publish after their effects, so a reader never
// finds a partition led here without its log; the rest publish first, so
// no published image names a log that is being removed.
func (r *partitionReplicas) onApply(index uint64, c Command, prev, next *image, publish func()) {
	r.effMu.Lock()
	defer r.effMu.Unlock()
	opens := c.Type == CmdCreateTopic || c.Type == CmdCreatePartitions
	if opens {
		defer publish() // after the logs are open (deferred calls run before the unlock)
	} else {
		publish()
	}
	if !r.ready.Load() {
		return
	}
	switch c.Type {
	case CmdCreateTopic, CmdCreatePartitions:
		first := int32(0)
		if t, ok := prev.topics[c.Topic]; ok && c.Type == CmdCreatePartitions {
			first = int32(len(t.Partitions))
		}
		if t, ok := next.topics[c.Topic]; ok {
			if err := r.openLogs(t, first); err != nil {
				r.logger.Error("could not open a partition log of a new topic", "topic", c.Topic, "err", err)
			}
		}
	case CmdDeleteTopic:
		if pd, ok := next.pending[c.TopicID]; ok {
			if err := r.deleteLogs(pd); err != nil {
				r.logger.Error("could not remove a deleted topic's logs; retried at the next start", "topic", pd.Name, "err", err)
			}
		}
	case CmdReassign:
		if t, ok := next.topics[c.Topic]; ok || c.Reassign != nil {
			if !ok {
				t, ok = next.byID[c.Reassign.TopicID]
			}
			if ok {
				// A broker that joins opens the log and an empty group.
				if err := r.openLogs(t, 0); err != nil {
					r.logger.Error("could not open a partition log for a reassignment", "topic", t.Name, "err", err)
				}
			}
		}
	case CmdReassignDone:
		if t, ok := next.byID[c.Reassign.TopicID]; ok {
			r.dropNonMember(t, c.Reassign.Partition)
		}
	case CmdSetTopicConfigs:
		if t, ok := next.topics[c.Topic]; ok {
			r.applyTopicConfigs(t)
		}
	case CmdSetBrokerConfigs:
		r.applyBrokerConfigs(c, next)
	case 0: // a snapshot was restored
		r.reconcileLocked(next)
	}
}

// openLogs opens the local logs of t's partitions from first on.
func (r *partitionReplicas) openLogs(t *TopicInfo, first int32) error {
	return r.openLogsChecked(t, first, false)
}

// openLogsChecked is openLogs; with recheck, a partition the published
// image no longer places here (moved away or deleted since t was read) is
// skipped. Effects leave recheck off: a command that opens partitions
// publishes its image after them.
func (r *partitionReplicas) openLogsChecked(t *TopicInfo, first int32, recheck bool) error {
	cfg, err := retention.LogConfig(t.Configs, r.meta.brokerProps())
	if err != nil {
		return fmt.Errorf("%w: topic %s: %w", ErrInvalidConfig, t.Name, err)
	}
	// The partitions open side by side (log.Manager.Open creates distinct
	// partitions concurrently): each is a handful of files created and
	// fsync'd and a raft group bootstrapped, and this runs on the FSM
	// goroutine, so every later metadata command -- a CreateTopics, a
	// leader report -- waits for it (issue 15: a burst of 300 partitions
	// held CreateTopics back for seconds).
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, openLogsParallel)
	)
	for _, p := range t.Partitions[first:] {
		if !containsNode(p.members(), r.cfg.NodeID) {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(part int32) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := r.openLog(t, part, cfg, recheck); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}(p.Partition)
	}
	wg.Wait()
	return firstErr
}

// openLogsParallel bounds the partitions openLogs opens at once.
const openLogsParallel = 8

// openLog opens one partition's log and starts its raft group, under the
// partition's guard (partition_guard.go).
func (r *partitionReplicas) openLog(t *TopicInfo, part int32, cfg log.Config, recheck bool) error {
	tp := log.TopicPartition{Topic: t.Name, Partition: part}
	g := r.guards.of(tp)
	g.Lock()
	defer g.Unlock()
	if recheck && !r.stillLocal(t.ID, part) {
		r.logger.Debug("partition left this broker before start opened it", "partition", tp.String())
		return nil
	}
	if err := r.dropStrayDir(tp, t.ID); err != nil {
		return err
	}
	lp, err := r.logs.Open(tp, cfg)
	if err != nil {
		return fmt.Errorf("replication: open %s-%d: %w", t.Name, part, err)
	}
	r.adoptDir(lp, t.ID)
	if h := r.testHookOpening; h != nil {
		h(tp)
	}
	if err := r.openGroup(t, lp); err != nil {
		return fmt.Errorf("replication: raft group of %s-%d: %w", t.Name, part, err)
	}
	return nil
}

// deleteLogs removes this broker's logs of a deleted topic.
func (r *partitionReplicas) deleteLogs(pd pendingDelete) error {
	// Stop the groups side by side first: each shutdown waits for its
	// raft's goroutines, on the FSM goroutine that every later metadata
	// command waits for (issue 15: a 33-partition deletion held a
	// broker's metadata 39 s behind, one group after another).
	sem := make(chan struct{}, closeGroupsParallel)
	var wg sync.WaitGroup
	for p := int32(0); p < pd.Partitions; p++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(tp log.TopicPartition) {
			defer func() { <-sem; wg.Done() }()
			g := r.guards.of(tp)
			g.Lock()
			defer g.Unlock()
			r.closeGroup(tp)
		}(log.TopicPartition{Topic: pd.Name, Partition: p})
	}
	wg.Wait()
	for p := int32(0); p < pd.Partitions; p++ {
		tp := log.TopicPartition{Topic: pd.Name, Partition: p}
		if err := r.deleteGuarded(tp); err != nil {
			return fmt.Errorf("replication: delete %s-%d: %w", pd.Name, p, err)
		}
	}
	return nil
}

// deleteGuarded closes tp's group (if one runs) and deletes its log (if
// there is one), under tp's guard, so no open of tp interleaves.
func (r *partitionReplicas) deleteGuarded(tp log.TopicPartition) error {
	g := r.guards.of(tp)
	g.Lock()
	defer g.Unlock()
	if !r.hasLog(tp) {
		return nil
	}
	r.closeGroup(tp)
	return r.logs.Delete(tp)
}

func (r *partitionReplicas) applyTopicConfigs(t *TopicInfo) {
	cfg, err := retention.LogConfig(t.Configs, r.meta.brokerProps())
	if err != nil {
		r.logger.Error("topic configs do not apply", "topic", t.Name, "err", err)
		return
	}
	for _, p := range t.Partitions {
		if lp := r.logs.Get(log.TopicPartition{Topic: t.Name, Partition: p.Partition}); lp != nil {
			lp.SetConfig(cfg)
		}
	}
}

// reconcileLocked makes the local disk follow img: deleted topics' logs
// removed, every local partition open. effMu must be held.
func (r *partitionReplicas) reconcileLocked(img *image) {
	for _, pd := range img.pending {
		if err := r.deleteLogs(pd); err != nil {
			r.logger.Error("could not remove a deleted topic's logs", "topic", pd.Name, "err", err)
		}
	}
	for _, name := range img.names {
		if err := r.openLogs(img.topics[name], 0); err != nil {
			r.logger.Error("could not open a partition log", "topic", name, "err", err)
		}
	}
}

// applyBrokerConfigs re-resolves and applies the config of every local
// partition after a SetBrokerConfigs that concerns this broker (onApply,
// raft's FSM goroutine, effMu held; next is published).
func (r *partitionReplicas) applyBrokerConfigs(c Command, next *image) {
	if c.ConfigResource != "" && c.ConfigResource != r.meta.ownResource() {
		return
	}
	props := r.meta.brokerPropsOf(next)
	for _, name := range next.names {
		t := next.topics[name]
		cfg, err := retention.LogConfig(t.Configs, props)
		if err != nil {
			r.logger.Error("dynamic broker configs do not apply to a topic; it keeps its previous config", "topic", name, "err", err)
			continue
		}
		for _, p := range t.Partitions {
			if lp := r.logs.Get(log.TopicPartition{Topic: name, Partition: p.Partition}); lp != nil {
				lp.SetConfig(cfg)
			}
		}
	}
	if f := r.cfg.OnBrokerProps; f != nil {
		f(copyConfigs(props))
	}
}

// enableEffects turns local effects on at start: from here on applied
// commands act on the disk. What was applied before is reconciled at
// once, under effMu so that no command's effect interleaves; the image
// reconciled is returned.
func (r *partitionReplicas) enableEffects() *image {
	r.ready.Store(true)
	r.effMu.Lock()
	defer r.effMu.Unlock()
	img := r.meta.img.Load()
	r.reconcileLocked(img)
	return img
}

// openPlaced opens at start every partition the image places here. Not
// under effMu (that stalled the metadata FSM for the whole start,
// ff2f24b): each partition is opened under its guard, after checking
// that the image of the moment still places it here.
func (r *partitionReplicas) openPlaced() error {
	img := r.meta.img.Load()
	for _, name := range img.names {
		if err := r.openLogsChecked(img.topics[name], 0, true); err != nil {
			return err
		}
	}
	return nil
}

// removeStrays removes at start the partition directories the image no
// longer places here. Under effMu, against the image of the moment: a
// topic created meanwhile (its partitions opened by the FSM) is not a
// stray.
func (r *partitionReplicas) removeStrays() {
	r.effMu.Lock()
	defer r.effMu.Unlock()
	img := r.meta.img.Load()
	for _, tp := range r.logs.Partitions() {
		if t, ok := img.topics[tp.Topic]; ok && tp.Partition >= 0 && int(tp.Partition) < len(t.Partitions) {
			// Moved away by a reassignment that finished while this
			// broker was down.
			r.dropNonMember(t, tp.Partition)
			continue
		}
		// No topic of that name (or no such partition) in the metadata,
		// which this broker has caught up with: a deletion it missed
		// while down (its CmdDeleteTopicDone was recorded by another
		// broker). Deleted, as Kafka deletes stray replicas.
		r.logger.Warn("partition directory of a topic deleted while this broker was away; deleting it",
			"topic", tp.Topic, "partition", tp.Partition)
		if err := r.deleteGuarded(tp); err != nil {
			r.logger.Error("could not delete a stray partition directory", "partition", tp.String(), "err", err)
		}
	}
}
