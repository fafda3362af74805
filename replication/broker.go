package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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
	if err := b.registerLocked(); err != nil {
		return err
	}
	img := b.enableEffects()
	b.finishDeletionsLocked(img)
	if err := b.openPlaced(); err != nil {
		return err
	}
	b.removeStrays()
	return nil
}

// Close flushes and closes everything: the metadata log and every
// partition (through the log manager). Later calls return the first
// result. It is CloseContext with no deadline but the handoff's own
// (shutdown.go).
func (b *Broker) Close() error { return b.CloseContext(context.Background()) }
