package replication

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/strata-io/strata/replication/raftstore"
	"github.com/strata-io/strata/replication/transport"
)

// node is what the metadata quorum and the partition replicas share: this
// broker's settings and logger, the replication transport both talk
// through, and the lifecycle both follow.
type node struct {
	cfg    BrokerConfig
	logger *slog.Logger

	// mux is the replication transport: the metadata group and every
	// partition group use it. Set by openRaft, then read-only.
	mux *transport.Mux

	// ready is set once start() has reconciled the disk with the image;
	// before that, applied commands have no local effects (onApply).
	ready atomic.Bool
	// closed is set first thing in Close; writers check it under the
	// quorum's writer lock.
	closed atomic.Bool
	// disk is the data directory's free-space state (partition_disk_space.go):
	// the metadata log and the partitions share the directory.
	disk diskState

	// stop ends every background goroutine of both units.
	stop     chan struct{}
	stopOnce sync.Once
}

func (n *node) NodeID() int32 { return n.cfg.NodeID }

// Config returns the broker configuration (a copy).
func (n *node) Config() BrokerConfig {
	c := n.cfg
	c.BrokerProps = copyConfigs(n.cfg.BrokerProps)
	return c
}

func containsNode(nodes []int32, id int32) bool {
	for _, n := range nodes {
		if n == id {
			return true
		}
	}
	return false
}

// openRaftStable opens a raft group's stable store in dir, wired to
// OnStorageFatal: a term that cannot be saved stops the broker cleanly
// instead of raft's panic.
func (n *node) openRaftStable(dir, group string) (*raftstore.StableFile, error) {
	s, err := raftstore.OpenStableFile(n.cfg.FS, dir)
	if err != nil {
		return nil, err
	}
	if fatal := n.cfg.OnStorageFatal; fatal != nil {
		s.SetOnFatal(func(err error) { fatal(fmt.Errorf("raft group %s: %w", group, err)) })
	}
	return s, nil
}
