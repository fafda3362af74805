package replication

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"
	"github.com/strata-io/strata/log"
)

// A reassignment's steps, run by the partition's leader
// (metadata_reassign.go records the target): non-voters join, catch up
// and become voters, leaving replicas are removed, and the result is
// recorded; brokers no longer among the replicas drop their copy.

// reassignLoop drives the reassignments of partitions led here until the
// broker closes.
func (r *partitionReplicas) reassignLoop() {
	defer close(r.reassignDone)
	t := time.NewTicker(reassignTick)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		img := r.meta.img.Load()
		for _, name := range img.names {
			ti := img.topics[name]
			for _, p := range ti.Partitions {
				if p.Target == nil {
					continue
				}
				g := r.group(log.TopicPartition{Topic: name, Partition: p.Partition})
				if g == nil || g.raft.State() != raft.Leader {
					continue
				}
				if err := r.reassignStep(ti, p, g); err != nil && !r.closed.Load() {
					r.logger.Warn("partition reassignment step failed; retried", "topic", name, "partition", p.Partition, "err", err)
				}
			}
		}
	}
}

// reassignStep makes one change towards p.Target in g's configuration, or
// records the reassignment done.
//
// A replica joins as a non-voter and is promoted once its log has caught
// up with the leader's commit index (as Kafka adds a replica outside the
// ISR): while it catches up, the quorum is the replicas that hold the
// log, so losing one of them then does not stop the partition, and the
// joining replica's vote is never needed (it holds its votes back until
// caught up anyway: transport/join_gate.go).
func (r *partitionReplicas) reassignStep(t *TopicInfo, p PartitionInfo, g *partitionGroup) error {
	cf := g.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	var voters []int32
	suffrage := map[int32]raft.ServerSuffrage{}
	for _, s := range cf.Configuration().Servers {
		n := parseServerID(s.ID)
		suffrage[n] = s.Suffrage
		if s.Suffrage == raft.Voter {
			voters = append(voters, n)
		}
	}
	for _, n := range p.Target {
		su, in := suffrage[n]
		if in && su == raft.Voter {
			continue
		}
		addr, err := r.meta.peerAddr(n)
		if err != nil {
			return err
		}
		if !in {
			r.logger.Info("reassignment: adding a replica (a non-voter until it catches up)", "topic", t.Name, "partition", p.Partition, "broker", n)
			return g.raft.AddNonvoter(serverID(n), addr, 0, configChangeTimeout).Error()
		}
		if !g.caughtUp(n, addr) {
			return nil // the next tick looks again
		}
		r.logger.Info("reassignment: the new replica caught up; it votes", "topic", t.Name, "partition", p.Partition, "broker", n)
		if err := g.raft.AddVoter(serverID(n), addr, 0, configChangeTimeout).Error(); err != nil {
			return err
		}
		// The ISR counts voters (partitionGroup.isr): report it now, or
		// the metadata would keep the replica out of sync until some
		// other change made this leader report again.
		r.queueReport(g)
		return nil
	}
	for _, s := range cf.Configuration().Servers {
		n := parseServerID(s.ID)
		if containsNode(p.Target, n) {
			continue
		}
		if n == r.cfg.NodeID {
			// Leaving: a target replica takes over and finishes.
			to := p.Target[0]
			addr, err := r.meta.peerAddr(to)
			if err != nil {
				return err
			}
			r.logger.Info("reassignment: leader leaves; handing over", "topic", t.Name, "partition", p.Partition, "to", to)
			return g.raft.LeadershipTransferToServer(serverID(to), addr).Error()
		}
		r.logger.Info("reassignment: removing a replica", "topic", t.Name, "partition", p.Partition, "broker", n)
		if err := g.raft.RemoveServer(serverID(n), 0, configChangeTimeout).Error(); err != nil {
			return err
		}
		r.queueReport(g)
		return nil
	}
	// The configuration equals the target; it may still be uncommitted (a
	// leader elected since holds its predecessor's last change in its log,
	// and another leader could still replace it). A barrier of this term
	// commits it first: brokers outside the target delete their copies
	// once the metadata says the move is done, and a voter of a
	// configuration that can still win must not.
	if err := g.raft.Barrier(configChangeTimeout).Error(); err != nil {
		return fmt.Errorf("configuration %v not committed yet: %w", voters, err)
	}
	if cf := g.raft.GetConfiguration(); cf.Error() != nil || !sameVoters(cf.Configuration(), voters) || g.raft.State() != raft.Leader {
		return errors.New("configuration or leadership changed while committing the reassignment")
	}
	sort.Slice(voters, func(i, j int) bool { return voters[i] < voters[j] })
	r.logger.Info("reassignment done", "topic", t.Name, "partition", p.Partition, "replicas", p.Target)
	return r.meta.commitUnlocked(Command{Type: CmdReassignDone, Reassign: &ReassignChange{TopicID: t.ID, Partition: p.Partition, Target: p.Target}})
}

// caughtUp reports whether replica n (at addr), a non-voter of g, has
// caught up: its last append matched at or past the commit index the
// leader had at the previous look (so a steady stream of writes does not
// keep it from ever counting as caught up).
func (g *partitionGroup) caughtUp(n int32, addr raft.ServerAddress) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.promoteMark == nil {
		g.promoteMark = map[int32]uint64{}
	}
	mark, seen := g.promoteMark[n]
	g.promoteMark[n] = g.raft.CommitIndex()
	return seen && mark > 0 && g.trans.Matched(addr) >= mark
}

// sameVoters reports whether c's voters are exactly voters.
func sameVoters(c raft.Configuration, voters []int32) bool {
	n := 0
	for _, s := range c.Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		if !containsNode(voters, parseServerID(s.ID)) {
			return false
		}
		n++
	}
	return n == len(voters)
}

// dropNonMember stops the group and deletes the log of t's partition if
// this broker is no longer among its replicas (a reassignment moved it).
//
// Never while the partition is being reassigned: a broker added as a
// voter for one target and left out of the next (targets can change
// before a move finishes) is in neither Replicas nor Target, yet still a
// voter of the group until the leader removes it. Deleting its log and
// vote then (at a restart), and a later target adding it back empty,
// made a voter that forgot what it had acknowledged: the fault harness's
// reassignments every few seconds elected leaders without the committed
// tail (docs/RELIABILITY.md, seed 11). Its state waits for the
// reassignment's end (CmdReassignDone: the voters are then exactly the
// replicas), or for the next start after it.
func (r *partitionReplicas) dropNonMember(t *TopicInfo, partition int32) {
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return
	}
	if p := t.Partitions[partition]; p.Target != nil || containsNode(p.members(), r.cfg.NodeID) {
		return
	}
	tp := log.TopicPartition{Topic: t.Name, Partition: partition}
	if !r.hasLog(tp) {
		return
	}
	if err := r.deleteGuarded(tp); err != nil {
		r.logger.Error("could not delete the log of a partition moved away", "partition", tp.String(), "err", err)
		return
	}
	r.logger.Info("partition moved away; its log is deleted", "partition", tp.String())
}
