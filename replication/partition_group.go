package replication

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication/raftconf"
	"github.com/strata-io/strata/replication/raftstore"
	"github.com/strata-io/strata/replication/transport"
	"github.com/strata-io/strata/sharepart"
)

// The partition Raft groups this broker runs (doc.go, "Partition groups"):
// one per local partition, over the partition's segments (partition_store.go).
// This step runs every group with one voter, this broker (replication
// factor 1): Produce goes through raft exactly as it will with three.

const (
	// partitionRaftDir holds a group's own files inside the partition
	// directory (the log ignores subdirectories; deleting the partition
	// deletes them).
	partitionRaftDir = "raft"
	// anchorKey is the stable-store key of the log offset at which the
	// group's raft log began (index 0): the segments below predate it.
	anchorKey = "StrataAnchorOffset"
	// joinUntilKey is the stable-store key of the group's join gate
	// (transport/join_gate.go): the value SetJoinGate persists.
	joinUntilKey = "StrataJoinUntil"
	// produceApplyTimeout bounds one Produce's wait for raft to take the
	// entry (not for the commit: that is the caller's context).
	produceApplyTimeout = 10 * time.Second
	// leaderWait bounds how long Produce waits for a one-voter group that
	// has just been opened to elect itself.
	leaderWait = 3 * time.Second
)

// singleVoterPartitionTiming is for a partition group whose only voter is
// this broker. A follower waits Heartbeat..2x before its election and the
// leader's lease check (its only idle timer) runs every Lease, which
// cannot exceed Heartbeat: 500 ms is an election 0.5-1 s after the group
// opens (Produce waits for it) and 2 wake-ups a second per idle group
// (with 100 ms, 1,000 idle partitions cost 14% of a core).
var singleVoterPartitionTiming = raftconf.Timing{Heartbeat: 500 * time.Millisecond, Election: 500 * time.Millisecond, Commit: 500 * time.Millisecond, Lease: 500 * time.Millisecond}

// partitionGroup is one running partition group.
type partitionGroup struct {
	tp      log.TopicPartition
	topicID [16]byte
	lp      *log.Partition
	raft    *raft.Raft
	store   *partitionStore
	trans   *transport.Group
	voters  []int32 // the replicas when the group was opened
	timing  raftconf.Timing
	single  bool // this broker is the only voter
	// share is the partition's share state, applied by the FSM
	// (partition_share_state.go); shareReady is the term in which, as leader, a
	// barrier made it hold every entry of earlier terms.
	share      *sharepart.Registry
	shareReady atomic.Uint64

	mu     sync.Mutex
	failed map[raft.ServerID]bool // protected by mu; followers whose heartbeats fail (leader only)
	// promoteMark is, per non-voter being added, the commit index at the
	// reassignment's previous look (caughtUp); protected by mu.
	promoteMark map[int32]uint64

	// stopped is closed once raft has shut down (shutdown): an entry
	// still in its apply queue then is never read nor answered, so a
	// producer waiting on it returns ErrShuttingDown instead of hanging.
	stopped chan struct{}
}

func partitionGroupID(topicID [16]byte, partition int32) string {
	return "p/" + hex.EncodeToString(topicID[:]) + "/" + strconv.Itoa(int(partition))
}

// openGroup starts the partition group of lp (already open) among the
// partition's replicas. The first replica (the preferred leader) starts an
// election at once, so a new partition has a leader in milliseconds and
// leadership lands where the assignment spread it.
func (r *partitionReplicas) openGroup(t *TopicInfo, lp *log.Partition) (err error) {
	tp := lp.TopicPartition()
	r.groupsMu.Lock()
	_, running := r.groups[tp]
	r.groupsMu.Unlock()
	if running {
		return nil
	}
	m, err := r.groupMembers(t, tp)
	if err != nil {
		return err
	}
	store, stable, snaps, err := r.openGroupStores(tp, lp, m.single)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			store.Close()
		}
	}()
	snaps.store = store
	snaps.onInstall = func(index uint64) { go r.restartAfterInstall(tp, index) }
	trans, err := r.mux.Group(partitionGroupID(t.ID, tp.Partition))
	if err != nil {
		return err
	}
	timing := r.partitionTiming
	if m.single {
		timing = singleVoterPartitionTiming
	}
	conf := r.groupConfig(tp, timing, m.preferred)
	share := sharepart.NewRegistry()
	fsm := &partitionFSM{store: store, share: share}
	rf, err := r.startGroupRaft(tp, m, conf, fsm, store, stable, snaps, trans)
	if err != nil {
		return err
	}
	g := &partitionGroup{tp: tp, topicID: t.ID, lp: lp, raft: rf, store: store, trans: trans, voters: m.replicas, timing: timing, single: m.single, share: share, failed: map[raft.ServerID]bool{},
		stopped: make(chan struct{})}
	r.groupsMu.Lock()
	r.groups[tp] = g
	r.byRaft[rf] = g
	r.groupsMu.Unlock()
	rf.RegisterObserver(raft.NewObserver(r.obsCh, true, observationFilter))
	lp.SetSnapshotHook(g.snapshotNow)
	if rf.State() == raft.Leader {
		r.queueReport(g) // elected before the observer was registered
	}
	if m.preferred {
		r.electEarly(g, conf, timing)
	}
	return nil
}

// groupMembers are a partition group's replicas as this broker opens it.
type groupMembers struct {
	replicas []int32
	servers  []raft.Server // the replicas as raft's configuration
	// joining: this broker is not among the replicas (a reassignment's
	// target); single: it is the only one; preferred: it is the first.
	joining, single, preferred bool
}

// groupMembers reads tp's replicas from t and their addresses.
func (r *partitionReplicas) groupMembers(t *TopicInfo, tp log.TopicPartition) (groupMembers, error) {
	if int(tp.Partition) >= len(t.Partitions) {
		return groupMembers{}, fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, tp)
	}
	replicas := append([]int32(nil), t.Partitions[tp.Partition].Replicas...)
	// A broker that joins the partition (a reassignment's target) starts
	// an empty group: the leader adds it to the configuration and fills
	// its log; it must not bootstrap a configuration of its own.
	joining := !containsNode(replicas, r.cfg.NodeID)
	servers := make([]raft.Server, 0, len(replicas))
	for _, n := range replicas {
		addr, err := r.meta.peerAddr(n)
		if err != nil {
			return groupMembers{}, err
		}
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: serverID(n), Address: addr})
	}
	single := len(replicas) == 1 && replicas[0] == r.cfg.NodeID
	preferred := len(replicas) > 0 && replicas[0] == r.cfg.NodeID && !joining
	return groupMembers{replicas: replicas, servers: servers, joining: joining, single: single, preferred: preferred}, nil
}

// openGroupStores opens a partition group's raft stores in
// <partition dir>/raft: its term and vote, its snapshots (finishing an
// interrupted install) and its log over the partition's segments from
// the anchor on.
func (r *partitionReplicas) openGroupStores(tp log.TopicPartition, lp *log.Partition, single bool) (*partitionStore, *raftstore.StableFile, *partitionSnapshots, error) {
	fsys := r.cfg.FS
	dir := filepath.Join(lp.Dir(), partitionRaftDir)
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: create %s: %v", log.ErrStorage, dir, err)
	}
	stable, err := r.openRaftStable(dir, tp.String())
	if err != nil {
		return nil, nil, nil, err
	}
	snaps, err := openPartitionSnapshots(fsys, filepath.Join(dir, "snapshots"), lp, stable, r.logger)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := finishInterruptedInstall(stable, snaps, lp, r.logger); err != nil {
		return nil, nil, nil, err
	}
	anchor, anchorOffset, fresh, err := groupAnchor(stable, snaps, lp)
	if err != nil {
		return nil, nil, nil, err
	}
	if fresh && anchorOffset > 0 {
		// Batches already in the segments (written before this partition
		// had a group) stay below the anchor; raft's log begins after them.
		// (Over an empty log the key is left out: one fsync less for each
		// new partition.)
		if err := stable.SetUint64([]byte(anchorKey), uint64(anchorOffset)); err != nil {
			return nil, nil, nil, err
		}
	}
	// Batches from the anchor on are raft's log: retention and compaction
	// leave them in place until a snapshot covers them (log/removal.go).
	lp.SetRemovalLimit(anchorOffset)
	store, err := openPartitionStoreOpts(fsys, dir, lp, anchor, anchorOffset, single, r.logger)
	if err != nil {
		return nil, nil, nil, err
	}
	return store, stable, snaps, nil
}

// groupConfig is the raft configuration of tp's group.
func (r *partitionReplicas) groupConfig(tp log.TopicPartition, timing raftconf.Timing, preferred bool) *raft.Config {
	conf := raftconf.New(serverID(r.cfg.NodeID), timing, r.cfg.Logger.With("partition", tp.String()))
	// A topic creation elects a leader for each of its partitions: those
	// normal elections log at DEBUG (the metadata group's at INFO).
	conf.Logger = raftconf.NewLogger(r.cfg.Logger.With("partition", tp.String(), "component", "raft", "raft_id", string(serverID(r.cfg.NodeID))), slog.LevelDebug)
	if preferred {
		// Started a hair longer so that lowering it below (ReloadConfig)
		// wakes the follower loop, which finds no leader contact and
		// starts the election now instead of in HeartbeatTimeout.
		conf.HeartbeatTimeout += time.Millisecond
		conf.ElectionTimeout = max(conf.ElectionTimeout, conf.HeartbeatTimeout)
	}
	return conf
}

// startGroupRaft starts tp's raft instance: a joining replica's votes
// held back until it caught up (the transport's join gate), the
// configuration bootstrapped on a fresh store of a replica that is not
// joining. trans is closed if it fails.
func (r *partitionReplicas) startGroupRaft(tp log.TopicPartition, m groupMembers, conf *raft.Config, fsm raft.FSM, store *partitionStore, stable *raftstore.StableFile, snaps *partitionSnapshots, trans *transport.Group) (*raft.Raft, error) {
	existing, err := raft.HasExistingState(store, stable, snaps)
	if err != nil {
		trans.Close()
		return nil, err
	}
	joinValue, err := stable.GetUint64([]byte(joinUntilKey))
	if errors.Is(err, raftstore.ErrNotFound) {
		joinValue, err = 0, nil
	}
	if err == nil && m.joining && !existing {
		joinValue, err = 1, stable.SetUint64([]byte(joinUntilKey), 1)
	}
	if err != nil {
		trans.Close()
		return nil, err
	}
	var started atomic.Pointer[raft.Raft]
	trans.SetJoinGate(func() uint64 {
		if rf := started.Load(); rf != nil {
			return rf.LastIndex()
		}
		return 0
	}, joinValue, func(v uint64) error { return stable.SetUint64([]byte(joinUntilKey), v) }, r.logger.With("partition", tp.String()))
	if !existing && !m.joining {
		if err := raft.BootstrapCluster(conf, store, stable, snaps, trans, raft.Configuration{Servers: m.servers}); err != nil {
			trans.Close()
			return nil, fmt.Errorf("replication: bootstrap %s: %w", tp, err)
		}
	}
	rf, err := raft.NewRaft(conf, fsm, store, stable, snaps, trans)
	if err != nil {
		trans.Close()
		return nil, fmt.Errorf("replication: start raft of %s: %w", tp, err)
	}
	started.Store(rf)
	trans.SetCatchUp(rf)
	return rf, nil
}

// electEarly has the preferred replica start the first election now
// (lowering the heartbeat timeout wakes raft's follower loop), then fits
// the timing to the role it has.
func (r *partitionReplicas) electEarly(g *partitionGroup, conf *raft.Config, timing raftconf.Timing) {
	if err := g.raft.ReloadConfig(raft.ReloadableConfig{
		TrailingLogs: conf.TrailingLogs, SnapshotInterval: conf.SnapshotInterval, SnapshotThreshold: conf.SnapshotThreshold,
		HeartbeatTimeout: timing.Heartbeat, ElectionTimeout: conf.ElectionTimeout,
	}); err != nil {
		r.logger.Warn("partition raft: could not start the first election early", "partition", g.tp.String(), "err", err)
	}
	g.fitTiming(r.logger) // elected already: the reload above set a follower's timing
}

// fitTiming gives g's raft the heartbeat timeout of its role: a leader
// runs with leaderHeartbeatFactor times its followers' (raftconf/config.go).
// Called on every change of role (the observer) and after open.
func (g *partitionGroup) fitTiming(logger *slog.Logger) {
	if g.single {
		return // no followers to heartbeat, no leader to wait for
	}
	hb, election := g.timing.Heartbeat, g.timing.Election
	if g.raft.State() == raft.Leader {
		hb *= raftconf.LeaderHeartbeatFactor
		election = max(election, hb)
	}
	cur := g.raft.ReloadableConfig()
	if cur.HeartbeatTimeout == hb && cur.ElectionTimeout == election {
		return
	}
	cur.HeartbeatTimeout, cur.ElectionTimeout = hb, election
	if err := g.raft.ReloadConfig(cur); err != nil {
		logger.Warn("partition raft: heartbeat timeout not changed for the new role", "partition", g.tp.String(), "err", err)
	}
}

// groupAnchor finds where the group's raft log begins in the segments:
// the newest snapshot (index, high watermark then), else index 0 at the
// offset recorded when the group was created; a group without either is
// new and starts at the log end.
func groupAnchor(stable *raftstore.StableFile, snaps *partitionSnapshots, lp *log.Partition) (index uint64, offset int64, fresh bool, err error) {
	metas, err := snaps.List()
	if err != nil {
		return 0, 0, false, err
	}
	if len(metas) > 0 {
		meta, pos, err := snaps.position(metas[0].ID)
		if err != nil {
			return 0, 0, false, fmt.Errorf("%w: snapshot %s: %w", errPartitionStore, metas[0].ID, err)
		}
		return meta.Index, pos.end, false, nil
	}
	// raft sets CurrentTerm first thing at bootstrap.
	if _, err := stable.GetUint64([]byte("CurrentTerm")); errors.Is(err, raftstore.ErrNotFound) {
		return 0, lp.Offsets().LogEnd, true, nil
	} else if err != nil {
		return 0, 0, false, err
	}
	v, err := stable.GetUint64([]byte(anchorKey))
	if errors.Is(err, raftstore.ErrNotFound) {
		return 0, 0, false, nil // created over an empty log (no key written)
	}
	if err != nil {
		return 0, 0, false, err
	}
	return 0, int64(v), false, nil
}

// snapshotNow takes a raft snapshot of the group (the retention cleaner
// asks, to raise the removal limit); nothing new to snapshot is success.
func (g *partitionGroup) snapshotNow() error {
	err := g.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	return err
}

// raftErr maps a raft future's error to the broker's errors.
func raftErr(g *partitionGroup, err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %s: %v", ErrNotLeader, g.tp, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShuttingDown
	}
	return fmt.Errorf("%w: %s: %v", log.ErrStorage, g.tp, err)
}

// restartAfterInstall restarts tp's group once raft has finished
// installing the snapshot at index (applied it and answered the leader):
// restarting before that fails the install, the leader sends it again, and
// the replica never catches up.
func (r *partitionReplicas) restartAfterInstall(tp log.TopicPartition, index uint64) {
	g := r.group(tp)
	if g == nil {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for g.raft.AppliedIndex() < index && time.Now().Before(deadline) {
		if r.closed.Load() || g.raft.State() == raft.Shutdown {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The answer to the leader follows right after the apply.
	time.Sleep(100 * time.Millisecond)
	if r.group(tp) != g {
		return // restarted or closed meanwhile
	}
	r.restartGroup(tp)
}

// restartGroup stops and reopens tp's group, so raft re-reads a log store
// that a snapshot install cut below what raft believed it held.
func (r *partitionReplicas) restartGroup(tp log.TopicPartition) {
	r.effMu.Lock()
	defer r.effMu.Unlock()
	if r.closed.Load() {
		return
	}
	g := r.guards.of(tp)
	g.Lock()
	defer g.Unlock()
	r.closeGroup(tp)
	t, ok := r.meta.img.Load().topics[tp.Topic]
	lp := r.logs.Get(tp)
	if !ok || lp == nil {
		return
	}
	if err := r.openGroup(t, lp); err != nil {
		r.logger.Error("partition raft group did not restart after a snapshot install", "partition", tp.String(), "err", err)
		return
	}
	r.logger.Info("partition raft group restarted after a snapshot install", "partition", tp.String())
}

// closeGroup stops tp's group (before its log is closed or deleted).
func (r *partitionReplicas) closeGroup(tp log.TopicPartition) {
	r.groupsMu.Lock()
	g := r.groups[tp]
	delete(r.groups, tp)
	if g != nil {
		delete(r.byRaft, g.raft)
	}
	r.groupsMu.Unlock()
	if g != nil {
		g.shutdown(r)
	}
}

func (g *partitionGroup) shutdown(r *partitionReplicas) {
	g.lp.SetSnapshotHook(nil)
	// The transport first: raft's Shutdown waits for its goroutines, and
	// one waiting on an RPC (a vote, an append, to a peer that deleted the
	// group already or stopped answering) would hold it for the RPC's
	// timeout; with the transport closed the RPC ends at once.
	g.trans.Close()
	if err := g.raft.Shutdown().Error(); err != nil {
		r.logger.Warn("partition raft shutdown", "partition", g.tp.String(), "err", err)
	}
	if g.stopped != nil {
		close(g.stopped) // after raft's goroutines are done: nothing reads an entry's data any more
	}
	if err := g.store.Close(); err != nil {
		r.logger.Warn("partition raft store close", "partition", g.tp.String(), "err", err)
	}
}

// closeGroups stops every partition group (Close), closeGroupsParallel
// at a time: each shutdown waits for its raft's goroutines and closes its
// raft files, and one group after another added up (a group whose raft
// waits on an RPC to a silent peer held every group behind it).
func (r *partitionReplicas) closeGroups() {
	r.groupsMu.Lock()
	gs := r.groups
	r.groups = map[log.TopicPartition]*partitionGroup{}
	r.byRaft = map[*raft.Raft]*partitionGroup{}
	r.groupsMu.Unlock()
	sem := make(chan struct{}, closeGroupsParallel)
	var wg sync.WaitGroup
	for _, g := range gs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			g.shutdown(r)
		}()
	}
	wg.Wait()
}

// closeGroupsParallel bounds the partition groups shutting down at once.
const closeGroupsParallel = 32

func (r *partitionReplicas) group(tp log.TopicPartition) *partitionGroup {
	r.groupsMu.RLock()
	defer r.groupsMu.RUnlock()
	return r.groups[tp]
}

func (r *partitionReplicas) groupOf(rf *raft.Raft) *partitionGroup {
	r.groupsMu.RLock()
	defer r.groupsMu.RUnlock()
	return r.byRaft[rf]
}

// awaitLeader returns nil on the group's leader; on a group that has no
// leader yet (just opened: its preferred replica starts the election at
// once) it waits up to leaderWait for one. ErrNotLeader naming the leader
// otherwise.
func (g *partitionGroup) awaitLeader(ctx context.Context) error {
	if g.raft.State() == raft.Leader {
		return nil
	}
	if _, id := g.raft.LeaderWithID(); id != "" {
		return fmt.Errorf("%w: %s is led by broker %s", ErrNotLeader, g.tp, id)
	}
	t := time.NewTimer(leaderWait)
	defer t.Stop()
	for g.raft.State() != raft.Leader {
		if g.raft.State() == raft.Shutdown {
			return ErrShuttingDown
		}
		if _, id := g.raft.LeaderWithID(); id != "" && g.raft.State() != raft.Leader {
			return fmt.Errorf("%w: %s is led by broker %s", ErrNotLeader, g.tp, id)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return fmt.Errorf("%w: %s has no leader yet", ErrNotLeader, g.tp)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// unstampedExt is the extension of every produced entry (shared: raft
// never writes to an entry's slices).
var unstampedExt = []byte{extUnstamped}

// produce proposes one batch to the group and waits until it is committed
// (applied here). records belongs to the caller and is reused once
// Produce returns (protocol's pooled bodies): produce returns only after
// raft is done with it (below).
func (g *partitionGroup) produce(ctx context.Context, records []byte) (log.AppendResult, error) {
	if err := g.awaitLeader(ctx); err != nil {
		return log.AppendResult{}, err
	}
	// No copy of records (protocol reuses the buffer once Produce
	// returns): raft uses an entry's Data only until its future is
	// answered -- the leader's StoreLogs appends it to the segment, and
	// followers are sent the stamped batch read back from the segment
	// (GetLog), never this buffer -- and Produce always waits for the
	// future (ApplyLog's timeout bounds only the enqueue, after which raft
	// never saw the entry). partition_group_test.go overwrites the buffers
	// after each Produce and checks every replica.
	proposed := time.Now()
	f := g.raft.ApplyLog(raft.Log{Data: records, Extensions: unstampedExt}, produceApplyTimeout)
	if err := waitFutureOr(f, g.stopped); err != nil {
		return log.AppendResult{}, raftErr(g, err)
	}
	partitionCommitLatency.Observe(time.Since(proposed))
	r, ok := f.Response().(partitionResult)
	if !ok {
		return log.AppendResult{}, fmt.Errorf("%w: %s: unexpected raft response %T", log.ErrStorage, g.tp, f.Response())
	}
	if r.err == nil && r.res.Duplicate && (r.res.LastOffset < r.res.BaseOffset || r.res.LastOffset < 0) {
		// A duplicate whose original offsets are unknown is refused, as
		// the log refuses it.
		return r.res, fmt.Errorf("%w: %s", log.ErrDuplicateSequence, g.tp)
	}
	return r.res, r.err
}
