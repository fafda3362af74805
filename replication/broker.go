package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/retention"
	"github.com/strata-io/strata/segment"
)

const (
	// producerIDBlockSize producer IDs are reserved per metadata command, so
	// a busy broker writes the metadata log once per this many producers,
	// and a restart skips at most this many IDs.
	producerIDBlockSize = 1000
	// maxPartitionsPerTopic bounds CreateTopics/CreatePartitions: each
	// partition is a directory and three open files.
	maxPartitionsPerTopic = 50000
	// maxPartitionsPerBroker bounds all partitions together: every one is
	// open files, memory and a share of the metadata image that each
	// metadata change copies.
	maxPartitionsPerBroker = 200000
)

// Broker is this node's view of the cluster: a thin façade over its two
// units, which it starts and stops together. Safe for concurrent use.
//
//   - metadataQuorum (metadata_quorum.go): the replicated metadata -- the
//     metadata Raft group, its image, the single writer that validates and
//     proposes commands, and the controller's requests.
//   - partitionReplicas (partition_replicas.go): the partitions this
//     broker hosts -- their logs and Raft groups, the local effects of
//     applied metadata commands, leader reports, reassignment, leader
//     rebalance and disk space.
//
// Both share a node (node.go): the settings, the replication transport
// and the lifecycle. The quorum reaches the replicas only through the
// replicaEffects interface; the replicas read the quorum's image and
// propose through it.
type Broker struct {
	*node
	*metadataQuorum
	*partitionReplicas

	closeOnce sync.Once
	closeErr  error
}

// NewBroker opens the metadata store and every local partition under
// cfg.DataDir. The broker takes ownership of logs: Close closes it. On an
// error nothing is left open except logs, which the caller still owns.
func NewBroker(cfg BrokerConfig, logs *log.Manager) (*Broker, error) {
	if logs == nil {
		return nil, errors.New("replication: NewBroker: nil log manager")
	}
	if cfg.NodeID < 0 {
		return nil, fmt.Errorf("replication: node.id %d is negative", cfg.NodeID)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("replication: no data directory (log.dirs)")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NumPartitions <= 0 {
		cfg.NumPartitions = 1
	}
	if cfg.DefaultReplicationFactor <= 0 {
		cfg.DefaultReplicationFactor = 1
	}
	cfg.BrokerProps = copyConfigs(cfg.BrokerProps)
	if err := retention.ValidateBroker(cfg.BrokerProps); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if cfg.FS == nil {
		cfg.FS = segment.OSFS{}
	}
	logger := cfg.Logger.With("component", "broker")
	if err := cfg.FS.MkdirAll(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("%w: create data dir: %v", ErrMetadataStorage, err)
	}
	mp, err := loadOrCreateMetaPropertiesWithID(cfg.FS, cfg.DataDir, cfg.NodeID, votersClusterID(cfg.Voters))
	if err != nil {
		return nil, err
	}
	n := &node{cfg: cfg, logger: logger, stop: make(chan struct{})}
	q := newMetadataQuorum(n, mp.ClusterID)
	r := newPartitionReplicas(n, q, logs)
	q.local = r
	b := &Broker{node: n, metadataQuorum: q, partitionReplicas: r}
	go b.observe()
	go b.sweepMemos()
	go b.reportLeaders()
	go b.reassignLoop()
	go b.announceCommits()
	go b.rebalanceLoop()
	go b.fenceLoop()
	go b.diskLoop()
	if err := b.openRaft(); err != nil {
		return nil, err
	}
	if err := b.waitCaughtUp(); err != nil {
		b.closeRaft()
		return nil, err
	}
	if err := b.start(); err != nil {
		// The metadata group first: its FSM opens partition groups as it
		// applies commands, so groups closed before it stops could be
		// followed by new ones, left running on logs the caller then
		// closes (raft panics reading a closed partition: seen in the
		// fault harness when a disk fault failed a start). closed stops
		// a restart after a snapshot install from reopening one.
		b.closed.Store(true)
		b.closeRaft()
		b.effMu.Lock()
		b.closeGroups()
		b.effMu.Unlock()
		return nil, err
	}
	img := b.img.Load()
	logger.Info("broker started", "node_id", cfg.NodeID, "cluster_id", mp.ClusterID,
		"topics", len(img.topics), "metadata_commands", img.applied, "controller", b.ControllerID())
	return b, nil
}

// closeRaft stops the metadata group and closes its files.
func (b *Broker) closeRaft() error {
	b.stopOnce.Do(func() { close(b.stop) })
	var errs []error
	if b.raft != nil {
		errs = append(errs, b.raft.Shutdown().Error())
	}
	if b.mux != nil {
		errs = append(errs, b.mux.Close())
	}
	if b.rlog != nil {
		errs = append(errs, b.rlog.Close())
	}
	// Bounded: a report proposed just as raft shut down may wait on a
	// future raft never answers (an entry left in its apply queue); its
	// goroutine must not hold Close forever.
	for _, done := range []chan struct{}{b.observerDone, b.memoDone, b.reporterDone, b.reassignDone, b.announceDone, b.rebalanceDone, b.fenceDone} {
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			b.logger.Warn("a broker goroutine did not stop within 2s of raft shutting down; left behind")
		}
	}
	return errors.Join(errs...)
}

// start registers this broker, finishes interrupted deletions and opens
// every local partition.
func (b *Broker) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.migrateMetadataLog(); err != nil {
		return err
	}
	self := b.selfInfo()
	// The registration is asked again while the controller changes (its
	// answer "not controller": a new controller, or a controller that lost
	// its quorum for a moment), within StartTimeout, as Kafka's brokers
	// retry theirs: the simulated 100-broker cluster (internal/sim) saw the
	// controller step down while 100 brokers joined, and a broker's start
	// failed on it. A registration whose answer was lost may have been
	// committed: the image says.
	timeout := b.cfg.StartTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	deadline := time.Now().Add(timeout)
	for !b.cfg.ControllerOnly {
		if cur, ok := b.img.Load().brokers[self.NodeID]; ok && cur == self {
			break
		}
		_, err := b.commitLocked(Command{Type: CmdRegisterBroker, Broker: &self})
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNotController) || time.Now().After(deadline) {
			return err
		}
		b.logger.Info("broker registration not taken by the controller; asking again", "err", err)
		time.Sleep(200 * time.Millisecond)
	}
	// From here on applied commands act on the disk; reconcile what was
	// applied before (under effMu, so no command's effect interleaves).
	b.ready.Store(true)
	b.effMu.Lock()
	img := b.img.Load()
	b.reconcileLocked(img)
	b.effMu.Unlock()
	if b.raft.State() == raft.Leader {
		pendingIDs := make([][16]byte, 0, len(img.pending))
		for id := range img.pending {
			pendingIDs = append(pendingIDs, id)
		}
		sort.Slice(pendingIDs, func(i, j int) bool { return img.pending[pendingIDs[i]].Name < img.pending[pendingIDs[j]].Name })
		for _, id := range pendingIDs {
			pd := img.pending[id]
			b.logger.Info("finishing interrupted topic deletion", "topic", pd.Name)
			if err := b.finishDeleteLocked(id, pd); err != nil {
				// Not fatal: the leftovers are retried at the next start or
				// before a topic of the same name is created.
				b.logger.Error("could not remove deleted topic's logs", "topic", pd.Name, "err", err)
			}
		}
	}
	// Not under effMu (that stalled the metadata FSM for the whole start,
	// ff2f24b): each partition is opened under its guard, after checking
	// that the image of the moment still places it here.
	img = b.img.Load()
	for _, name := range img.names {
		if err := b.openLogsChecked(img.topics[name], 0, true); err != nil {
			return err
		}
	}
	// Under effMu, against the image of the moment: a topic created
	// meanwhile (its partitions opened by the FSM) is not a stray.
	b.effMu.Lock()
	defer b.effMu.Unlock()
	img = b.img.Load()
	for _, tp := range b.logs.Partitions() {
		if t, ok := img.topics[tp.Topic]; ok && tp.Partition >= 0 && int(tp.Partition) < len(t.Partitions) {
			// Moved away by a reassignment that finished while this
			// broker was down.
			b.dropNonMember(t, tp.Partition)
			continue
		}
		// No topic of that name (or no such partition) in the metadata,
		// which this broker has caught up with: a deletion it missed
		// while down (its CmdDeleteTopicDone was recorded by another
		// broker). Deleted, as Kafka deletes stray replicas.
		b.logger.Warn("partition directory of a topic deleted while this broker was away; deleting it",
			"topic", tp.Topic, "partition", tp.Partition)
		if err := b.deleteGuarded(tp); err != nil {
			b.logger.Error("could not delete a stray partition directory", "partition", tp.String(), "err", err)
		}
	}
	return nil
}

// Close flushes and closes everything: the metadata log and every
// partition (through the log manager). Later calls return the first
// result. It is CloseContext with no deadline but the handoff's own
// (shutdown.go).
func (b *Broker) Close() error { return b.CloseContext(context.Background()) }
