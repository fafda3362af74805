package replication

import (
	"log/slog"
	"sync"
	"sync/atomic"

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
	// disk is the data directory's free-space state (disk_space.go):
	// the metadata log and the partitions share the directory.
	disk diskState

	// stop ends every background goroutine of both units.
	stop     chan struct{}
	stopOnce sync.Once
}
