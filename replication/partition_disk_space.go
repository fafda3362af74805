package replication

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
)

// A full disk (strata.log.dir.min.free.bytes, BrokerConfig.MinFreeBytes).
//
// Kafka takes a log directory offline when a write to it fails (an
// IOException, ENOSPC included): its partitions answer
// KAFKA_STORAGE_ERROR, their leaderships move to other replicas, and a
// broker whose only directory failed halts. Strata acts before the disk
// is full, so that nothing it must write -- raft's entries, its term,
// the metadata log -- meets ENOSPC: every diskCheckInterval the broker
// measures the usable bytes of the file system holding its data
// directory. Below MinFreeBytes the directory is "full":
//
//   - Produce to a partition led here answers KAFKA_STORAGE_ERROR (a
//     retriable error: clients retry, refresh their metadata and follow a
//     moved leader) before anything is written; reads go on.
//   - Every partition this broker leads that has another live voter is
//     handed to it (raft's leadership transfer, as a controlled shutdown
//     does), and so is the controller (the metadata group's leadership),
//     repeated every diskMoveInterval while the directory stays full
//     (elections may hand some back).
//   - DescribeLogDirs reports the directory with KAFKA_STORAGE_ERROR
//     (its partitions and space still listed).
//
// Once the usable bytes are back at or above diskResumeAt(MinFreeBytes)
// (10% over the threshold, so that a directory at the edge does not flap)
// produce is accepted again, by itself; leaderships come back with the
// preferred-leader balance (auto.leader.rebalance.enable) or ElectLeaders.
//
// What still writes while the directory is full: followers' replication
// (the partitions led elsewhere), internal topics, the metadata log. The
// threshold is their margin. Raft's stable store (term, vote) needs no
// space at all (raftstore.StableFile reserves it); a metadata log append that
// meets ENOSPC is cut back and fails only that write; a partition
// segment whose append meets ENOSPC refuses writes until the broker
// restarts, as a failed fsync does.

const (
	// diskCheckInterval is how often the usable space is measured (one
	// statfs).
	diskCheckInterval = 500 * time.Millisecond
	// diskMoveInterval spaces the leadership moves while full.
	diskMoveInterval = 2 * time.Second
)

// diskResumeAt is the usable bytes at which a full directory takes
// writes again.
func diskResumeAt(min int64) int64 { return min + min/10 }

// diskState is the data directory's free-space state.
type diskState struct {
	full     atomic.Bool
	free     atomic.Int64 // usable bytes at the last check; -1 before it
	moving   atomic.Bool  // a leadership move is running
	lastMove atomic.Int64 // unix nanoseconds of the last move's start
}

// diskLoop measures the data directory's usable space until the broker
// stops; off when MinFreeBytes is 0.
func (r *partitionReplicas) diskLoop() {
	r.disk.free.Store(-1)
	if r.cfg.MinFreeBytes <= 0 {
		return
	}
	free := r.cfg.FreeSpace
	if free == nil {
		free = statfsUsable
	}
	t := time.NewTicker(diskCheckInterval)
	defer t.Stop()
	failing := false
	for {
		n, err := free(r.cfg.DataDir)
		switch {
		case err != nil && !failing:
			failing = true
			r.logger.Warn("cannot measure the log directory's free space; strata.log.dir.min.free.bytes not enforced until it can", "dir", r.cfg.DataDir, "err", err)
		case err == nil:
			failing = false
			r.noteFree(n)
		}
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
	}
}

// noteFree records a measurement: the state changes and, while full, the
// leadership moves.
func (r *partitionReplicas) noteFree(n int64) {
	r.disk.free.Store(n)
	min := r.cfg.MinFreeBytes
	switch full := r.disk.full.Load(); {
	case !full && n < min:
		r.disk.full.Store(true)
		r.logger.Error("log directory below its free-space threshold: produce answers KAFKA_STORAGE_ERROR and leaderships move to other replicas until space returns",
			"dir", r.cfg.DataDir, "usable_bytes", n, "strata.log.dir.min.free.bytes", min, "resume_at_bytes", diskResumeAt(min))
	case full && n >= diskResumeAt(min):
		r.disk.full.Store(false)
		r.logger.Info("log directory has free space again: produce resumes", "dir", r.cfg.DataDir, "usable_bytes", n,
			"strata.log.dir.min.free.bytes", min)
	}
	if r.disk.full.Load() {
		r.moveOffFullDisk()
	}
}

// diskErr is the error of a write refused because the data directory is
// below its free-space threshold; nil otherwise.
func (r *partitionReplicas) diskErr() error {
	if !r.disk.full.Load() {
		return nil
	}
	return fmt.Errorf("%w: log directory %s has %d usable bytes, below strata.log.dir.min.free.bytes=%d; writes resume at %d",
		log.ErrStorage, r.cfg.DataDir, r.disk.free.Load(), r.cfg.MinFreeBytes, diskResumeAt(r.cfg.MinFreeBytes))
}

// LogDirError is the data directory's state for DescribeLogDirs: an
// error wrapping log.ErrStorage while it is below its free-space
// threshold, nil otherwise.
func (r *partitionReplicas) LogDirError() error { return r.diskErr() }

// moveOffFullDisk hands this broker's leaderships (partitions with
// another live voter, and the controller) to other replicas, in the
// background, at most once per diskMoveInterval.
func (r *partitionReplicas) moveOffFullDisk() {
	if !r.ready.Load() || r.closed.Load() {
		return
	}
	now := time.Now().UnixNano()
	if now-r.disk.lastMove.Load() < int64(diskMoveInterval) || !r.disk.moving.CompareAndSwap(false, true) {
		return
	}
	r.disk.lastMove.Store(now)
	go func() {
		defer r.disk.moving.Store(false)
		if mr := r.meta.raft; mr != nil && mr.State() == raft.Leader && metadataVoters(mr) > 1 {
			if err := mr.LeadershipTransfer().Error(); err != nil {
				r.logger.Warn("cannot move the controller off a full log directory", "err", err)
			} else {
				r.logger.Info("controller moved off a full log directory")
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), transferTimeout)
		defer cancel()
		r.handOffLeaderships(ctx, "log directory below its free-space threshold")
	}()
}

// metadataVoters counts the voters of r's configuration (0 when unknown).
func metadataVoters(r *raft.Raft) int {
	f := r.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	n := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			n++
		}
	}
	return n
}

// UsableBytes returns the bytes of the file system holding dir that an
// unprivileged writer may still use (statfs), as BrokerConfig.FreeSpace's
// default measures them.
func UsableBytes(dir string) (int64, error) { return statfsUsable(dir) }
