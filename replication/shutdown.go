package replication

import (
	"context"
	"errors"
)

// CloseContext is Close within ctx: the broker's controlled shutdown.
//
//  1. Leaderships are handed to live replicas (handOffLeaderships), until
//     ctx's deadline at most (and shutdownHandoffTimeout).
//  2. Nothing waits on the network after that: closing b.stop fails the
//     metadata writes waiting for a commit (waitFuture), and closing the
//     transport fails every RPC in flight -- forwards to the controller
//     that hold the writer lock, and the votes and appends to peers that
//     stopped answering, each of which would otherwise hold its group's
//     raft.Shutdown for the RPC timeout (5 s, one group after another).
//     Writers queued on the writer lock find the broker closed and leave.
//  3. The partition groups shut down (in parallel), then the metadata
//     group, and the logs are flushed and closed.
//
// Steps 2 and 3 do not look at ctx: with the transport closed they take
// what the disk takes (each group's raft files, each partition's fsync).
// The caller's own deadline (serve's strata.shutdown.timeout.ms) is the
// bound beyond that. Records a produce acknowledged are committed by the
// replicas' quorum whether or not this broker's flush completes.
func (b *Broker) CloseContext(ctx context.Context) error {
	b.closeOnce.Do(func() {
		// Controlled shutdown: leaderships move to other replicas first,
		// while this broker still serves (followers catch up from it).
		b.handOffLeaderships(ctx, "shutdown")
		b.closed.Store(true)
		b.stopOnce.Do(func() { close(b.stop) })
		if b.mux != nil {
			b.mux.Close() // closeRaft closes it again: a no-op
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.effMu.Lock()
		b.closeGroups()
		b.effMu.Unlock()
		err1 := b.closeRaft()
		err2 := b.logs.Close()
		b.closeErr = errors.Join(err1, err2)
		b.logger.Info("broker closed", "err", b.closeErr)
	})
	return b.closeErr
}
