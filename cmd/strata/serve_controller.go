package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/log"
)

// serveController runs a controller-only node (process.roles=controller;
// replication/metadata_roles.go): a voter of the metadata quorum with its
// replication listener and the monitoring listener, no Kafka listener,
// no registration as a broker (so no partitions, and no place in
// Metadata's broker list). ready, when set, is sent the replication
// listener's address.
func serveController(ctx context.Context, stop func(), cfg *Config, logger *slog.Logger, ready chan<- net.Addr) error {
	dataDir := cfg.LogDirs[0]
	faults := startFaultInjection(ctx, logger)
	reg := prometheus.NewRegistry()
	mon, err := startMonitor(cfg.Monitoring, reg, logger)
	if err != nil {
		return err
	}
	defer mon.close()
	repLn, err := net.Listen("tcp", cfg.Cluster.Bind)
	if err != nil {
		return fmt.Errorf("listen on replication listener %s: %w", cfg.Cluster.Bind, err)
	}
	bc := replicationConfig(cfg, dataDir, repLn, faults, logger)
	bc.ControllerOnly = true
	_, broker, err := openReplicated(log.ManagerOptions{Dir: dataDir, Logger: logger, UseHighWatermarkCheckpoint: true, FS: faults.FS, Now: faults.Now}, bc, "start controller")
	if err != nil {
		return err
	}
	broker.RegisterMetrics(reg)
	logger.Info("strata controller ready", "replication_listener", repLn.Addr().String(), "node_id", cfg.NodeID,
		"cluster_id", broker.ClusterID(), "data_dir", dataDir)
	mon.setReady(true)
	if ready != nil {
		ready <- repLn.Addr()
	}
	<-ctx.Done()
	logger.Info("shutting down", "cause", context.Cause(ctx))
	if stop != nil {
		stop()
	}
	mon.setReady(false)
	total := cfg.ShutdownTimeout
	if total <= 0 {
		total = defaultShutdownTimeout
	}
	bctx, cancel := context.WithTimeout(context.Background(), total)
	defer cancel()
	start := time.Now()
	if err := broker.CloseContext(bctx); err != nil {
		return fmt.Errorf("close controller: %w", err)
	}
	logger.Info("strata stopped", "took", time.Since(start).Round(time.Millisecond))
	return nil
}
