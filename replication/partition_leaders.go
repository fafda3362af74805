package replication

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
)

// Partition leaders in the metadata (doc.go, "Leaders and epochs"). A
// partition's Raft group elects its leader; the leader epoch is the
// leader's Raft term (the epoch stamped into every batch it appends). The
// new leader reports (leader, epoch, ISR) to the controller as a
// CmdPartitionLeaders metadata command, so that every broker answers
// Metadata, Fetch and OffsetForLeaderEpoch with the same leader and epoch.
// Reports are batched: a broker that wins a thousand elections at start
// sends a few commands, not a thousand.

const (
	// maxLeadersPerCommand bounds one CmdPartitionLeaders (each report is
	// ~100 bytes of JSON in the metadata log).
	maxLeadersPerCommand = 2000
	// leaderReportRetry is the wait before a report the controller did not
	// take is sent again.
	leaderReportRetry = 200 * time.Millisecond
	// leaderSweepInterval is how often the reporter compares the groups
	// this broker leads with the image (sweepLeaders): a leadership the
	// image has not shown for two sweeps in a row is reported again.
	leaderSweepInterval = time.Second
	// createLeaderWait bounds CreateTopics' wait for the new partitions'
	// groups to elect and report their leaders (Kafka answers once the
	// controller has chosen leaders; clients retry LEADER_NOT_AVAILABLE).
	createLeaderWait = 10 * time.Second
)

// observe is the one goroutine that turns the groups' raft observations
// into leader reports; it ends when the broker closes.
func (r *partitionReplicas) observe() {
	defer close(r.observerDone)
	for {
		select {
		case <-r.stop:
			return
		case o := <-r.obsCh:
			g := r.groupOf(o.Raft)
			if g == nil {
				continue
			}
			switch d := o.Data.(type) {
			case raft.RaftState:
				g.fitTiming(r.logger)
				if d == raft.Leader {
					// A new term: its heartbeat goroutines report failures
					// afresh, and only they report a follower resuming.
					g.clearFailed()
					// Leader moves are what clients see (NOT_LEADER_OR_FOLLOWER,
					// a metadata refresh): one line each, as Kafka logs them.
					r.logger.Info("partition leader elected here", "partition", g.tp.String(), "leader_epoch", o.Raft.CurrentTerm())
				}
			case raft.FailedHeartbeatObservation:
				g.setFailed(d.PeerID, true)
			case raft.ResumedHeartbeatObservation:
				g.setFailed(d.PeerID, false)
				// raft retries a follower it lost only on a new entry or
				// after CommitTimeout: send what it missed now.
				g.trans.Poke()
			}
			if o.Raft.State() == raft.Leader {
				r.queueReport(g)
			}
		}
	}
}

// queueReport asks the reporter to (re)send g's leadership.
func (r *partitionReplicas) queueReport(g *partitionGroup) {
	r.reportMu.Lock()
	r.reports[g.tp] = g
	r.reportMu.Unlock()
	select {
	case r.reportWake <- struct{}{}:
	default:
	}
}

// reportLeaders sends queued leader reports to the controller until the
// broker closes. A report is sent again until the controller takes it,
// whatever the controller answers: only this broker closing ends the
// loop. Every leaderSweepInterval it also sweeps the groups it leads
// against the image (sweepLeaders), so a leadership whose report was lost
// anyway is reported again rather than never.
func (r *partitionReplicas) reportLeaders() {
	defer close(r.reporterDone)
	sweep := time.NewTicker(leaderSweepInterval)
	defer sweep.Stop()
	var suspects map[log.TopicPartition]uint64
	for {
		select {
		case <-r.stop:
			return
		case <-r.reportWake:
		case <-sweep.C:
			suspects = r.sweepLeaders(suspects)
		}
		for {
			r.reportMu.Lock()
			batch := make([]*partitionGroup, 0, len(r.reports))
			for tp, g := range r.reports {
				if len(batch) == maxLeadersPerCommand {
					break
				}
				batch = append(batch, g)
				delete(r.reports, tp)
			}
			r.reportMu.Unlock()
			if len(batch) == 0 {
				break
			}
			var rs []LeaderReport
			for _, g := range batch {
				if rep, ok := g.report(r); ok {
					rs = append(rs, rep)
				}
			}
			if len(rs) == 0 {
				continue
			}
			if err := r.commitReports(rs); err != nil {
				// ErrShuttingDown here is usually the controller's, not
				// ours: a report forwarded to a controller that stops
				// comes back "shutting down" (its proposal may or may not
				// commit). The next controller takes it.
				if r.stopping() {
					return
				}
				r.logger.Warn("partition leaders not recorded in the metadata yet; retrying", "partitions", len(rs), "err", err)
				for _, g := range batch {
					r.queueReportQuiet(g)
				}
				select {
				case <-r.stop:
					return
				case <-time.After(leaderReportRetry):
				}
			}
		}
	}
}

// stopping reports whether this broker is closing.
func (r *partitionReplicas) stopping() bool {
	if r.closed.Load() {
		return true
	}
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// sweepLeaders queues a report for every group this broker leads whose
// leader and epoch the image has not shown at this sweep nor at the
// previous one (prev: the groups missing then, with their term), and
// returns the groups missing now. Two sweeps in a row leave a report just
// committed time to be applied here. The reporter runs it when its queue
// is empty, so a group it finds missing twice is not waiting for an
// answer: its report was lost (or never queued) and is sent again. The
// work is a few atomic loads per group led and a map lookup; the ISR is
// not compared (a change of it is reported on raft's heartbeat
// observations).
func (r *partitionReplicas) sweepLeaders(prev map[log.TopicPartition]uint64) map[log.TopicPartition]uint64 {
	img := r.meta.img.Load()
	var missing map[log.TopicPartition]uint64
	var again []*partitionGroup
	r.groupsMu.RLock()
	for tp, g := range r.groups {
		if g.raft.State() != raft.Leader {
			continue
		}
		term := g.raft.CurrentTerm()
		t, ok := img.byID[g.topicID]
		if !ok || int(tp.Partition) >= len(t.Partitions) || term > 1<<31-1 {
			continue // deleted, or not in this image yet: nothing to report
		}
		cur := t.Partitions[tp.Partition]
		if int64(cur.LeaderEpoch) > int64(term) {
			continue // a later leader is recorded: this one steps down
		}
		// Recorded, with the ISR this leader sees. An ISR change is
		// reported when raft observes it, but that report is dropped when
		// the image it is compared with still waits for an earlier report
		// in flight (report): the sweep sends it again.
		if cur.Leader == r.cfg.NodeID && int64(cur.LeaderEpoch) == int64(term) && equalNodes(cur.ISR, recordedISR(cur, g.isr(r.cfg.NodeID))) {
			continue
		}
		if !containsNode(cur.members(), r.cfg.NodeID) {
			continue // no longer a replica: applyLeaders would skip the report
		}
		if missing == nil {
			missing = map[log.TopicPartition]uint64{}
		}
		missing[tp] = term
		if p, ok := prev[tp]; ok && p == term {
			again = append(again, g)
		}
	}
	r.groupsMu.RUnlock()
	if len(again) > 0 {
		g := again[0]
		r.logger.Warn("partition leaders elected here are still not in the metadata; reporting them again",
			"partitions", len(again), "partition", g.tp.String(), "leader_epoch", missing[g.tp])
		for _, g := range again {
			r.queueReportQuiet(g)
		}
	}
	return missing
}

// recordedISR is isr as the metadata records it for cur's leader
// (applyLeaders): the leader and the members it names.
func recordedISR(cur PartitionInfo, isr []int32) []int32 {
	out := []int32{cur.Leader}
	for _, n := range cur.members() {
		if n != cur.Leader && containsNode(isr, n) {
			out = append(out, n)
		}
	}
	return out
}

func (r *partitionReplicas) queueReportQuiet(g *partitionGroup) {
	r.reportMu.Lock()
	if _, ok := r.reports[g.tp]; !ok {
		r.reports[g.tp] = g
	}
	r.reportMu.Unlock()
}

// report is g's leadership as this broker, its leader, sees it; false when
// this broker does not lead g (any more) or the image already says so.
func (g *partitionGroup) report(r *partitionReplicas) (LeaderReport, bool) {
	if g.raft.State() != raft.Leader {
		return LeaderReport{}, false
	}
	term := g.raft.CurrentTerm()
	if term > 1<<31-1 {
		return LeaderReport{}, false
	}
	rep := LeaderReport{TopicID: g.topicID, Partition: g.tp.Partition, Leader: r.cfg.NodeID, Epoch: int32(term), ISR: g.isr(r.cfg.NodeID)}
	if t, ok := r.meta.img.Load().byID[g.topicID]; ok && int(rep.Partition) < len(t.Partitions) {
		cur := t.Partitions[rep.Partition]
		if cur.Leader == rep.Leader && cur.LeaderEpoch == rep.Epoch && equalNodes(cur.ISR, rep.ISR) {
			return LeaderReport{}, false
		}
	}
	return rep, true
}

// commitReports has the controller record rs. It does not take the writer
// lock: reports are idempotent and ordered by epoch (applyLeaders), and a
// writer holding the lock may be waiting for them (CreateTopic).
func (r *partitionReplicas) commitReports(rs []LeaderReport) error {
	return r.meta.commitUnlocked(Command{Type: CmdPartitionLeaders, Leaders: rs})
}

// observationFilter keeps the observations observe acts on.
func observationFilter(o *raft.Observation) bool {
	switch o.Data.(type) {
	case raft.RaftState, raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation:
		return true
	}
	return false
}

// setFailed records whether the leader's heartbeats to peer fail.
func (g *partitionGroup) setFailed(peer raft.ServerID, failed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if failed {
		g.failed[peer] = true
	} else {
		delete(g.failed, peer)
	}
}

// clearFailed forgets the followers whose heartbeats failed. Called when
// g's raft becomes leader: hashicorp/raft reports a follower's heartbeats
// resuming only from the heartbeat goroutine that saw them fail, and that
// goroutine ends with its term, so a mark from an earlier term would keep
// the follower out of the ISR for good (TestISRFreshEachTerm).
func (g *partitionGroup) clearFailed() {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.failed)
}

// isr is the in-sync replicas as the leader sees them: itself and every
// voter its heartbeats reach (hashicorp/raft reports a follower whose
// heartbeats fail, and again when they resume).
func (g *partitionGroup) isr(self int32) []int32 {
	voters := g.voters
	if cf := g.raft.GetConfiguration(); cf.Error() == nil {
		voters = voters[:0:0]
		for _, s := range cf.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				voters = append(voters, parseServerID(s.ID))
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := []int32{self}
	for _, n := range voters {
		if n != self && !g.failed[serverID(n)] {
			out = append(out, n)
		}
	}
	return out
}
