package replication

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
)

// Partition reassignment (doc.go, "Reassignment"): AlterPartitionReassignments
// records a target replica list in the metadata (CmdReassign). The
// partition's leader then changes its Raft group's configuration one
// server at a time: new replicas join as non-voters (a broker that sees
// itself in a target opens the partition's log and an empty group, which
// the leader fills by AppendEntries or a snapshot install of its
// segments) and become voters once caught up (reassignStep),
// replicas not in the target are removed (the leader hands leadership to a
// target replica first if it is leaving itself). When the configuration
// equals the target, the leader records it (CmdReassignDone): the
// partition's replicas become the target, and brokers no longer among them
// stop the group and delete the log. Cancelling sets the target back to
// the replicas, and the same steps undo what was done.

// ErrNoReassignmentInProgress is a cancel of a partition that is not being
// reassigned (NO_REASSIGNMENT_IN_PROGRESS).
var ErrNoReassignmentInProgress = errors.New("replication: no reassignment in progress")

const (
	// reassignTick is how often a leader checks for reassignment work.
	reassignTick = 250 * time.Millisecond
	// configChangeTimeout bounds one raft configuration change.
	configChangeTimeout = 10 * time.Second
)

// ReassignChange is CmdReassign's and CmdReassignDone's payload. Field
// names are in the metadata log.
type ReassignChange struct {
	TopicID   [16]byte `json:"t"`
	Partition int32    `json:"p"`
	// Target: the new replica list (CmdReassign; nil = cancel), or the
	// list the group's configuration now equals (CmdReassignDone).
	Target []int32 `json:"target"`
}

// applyReassign applies CmdReassign/CmdReassignDone to the image.
func (im *image) applyReassign(typ CommandType, r *ReassignChange) error {
	if r == nil {
		return errors.New("no reassignment")
	}
	t, ok := im.byID[r.TopicID]
	if !ok || r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return fmt.Errorf("no partition %d of topic id %x", r.Partition, r.TopicID)
	}
	cur := t.Partitions[r.Partition]
	nt := *t
	nt.Partitions = append([]PartitionInfo(nil), t.Partitions...)
	p := &nt.Partitions[r.Partition]
	switch typ {
	case CmdReassign:
		switch {
		case r.Target == nil && cur.Target == nil:
			return fmt.Errorf("%w: %s-%d", ErrNoReassignmentInProgress, t.Name, r.Partition)
		case r.Target == nil:
			p.Target = append([]int32(nil), cur.Replicas...) // cancel: back to the replicas
		default:
			if err := checkAssignments([]Assignment{{Partition: r.Partition, Replicas: r.Target}}, r.Partition); err != nil {
				return err
			}
			for _, n := range r.Target {
				if _, ok := im.brokers[n]; !ok {
					return fmt.Errorf("broker %d is not registered", n)
				}
			}
			p.Target = append([]int32(nil), r.Target...)
		}
	case CmdReassignDone:
		if cur.Target == nil || !equalNodes(cur.Target, r.Target) {
			return fmt.Errorf("reassignment of %s-%d to %v is not the one in progress (%v)", t.Name, r.Partition, r.Target, cur.Target)
		}
		p.Replicas = append([]int32(nil), cur.Target...)
		p.Target = nil
		isr := []int32{}
		for _, n := range cur.ISR {
			if containsNode(p.Replicas, n) {
				isr = append(isr, n)
			}
		}
		p.ISR = isr
	}
	im.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
		topics[nt.Name] = &nt
		byID[nt.ID] = &nt
	})
	return nil
}

// members is every broker that holds or will hold a replica of p.
func (p PartitionInfo) members() []int32 {
	out := append([]int32(nil), p.Replicas...)
	for _, n := range p.Target {
		if !containsNode(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// AlterPartitionReassignment starts moving topic-partition to replicas, or
// cancels its ongoing reassignment (replicas nil). It returns once the
// target is recorded; the move itself runs in the background
// (ListPartitionReassignments shows it until it is done).
func (q *metadataQuorum) AlterPartitionReassignment(ctx context.Context, topic string, partition int32, replicas []int32) error {
	if err := q.lockWriter(ctx); err != nil {
		return err
	}
	defer q.mu.Unlock()
	t, ok := q.img.Load().topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, topic, partition)
	}
	if replicas != nil && len(replicas) == 0 {
		return fmt.Errorf("%w: an empty replica list", ErrInvalidReplicaAssignment)
	}
	if replicas != nil {
		// Replicas the move adds count against max.broker.partitions from
		// the start (they are created at once); a cancel only removes.
		img := q.img.Load()
		members := t.Partitions[partition].members()
		added := map[int32]int64{}
		for _, n := range replicas {
			if !containsNode(members, n) {
				added[n]++
			}
		}
		if err := checkPartitionLimits(img, q.brokerPropsOf(img), 0, added); err != nil {
			return err
		}
	}
	_, err := q.commitLocked(Command{Type: CmdReassign, Reassign: &ReassignChange{TopicID: t.ID, Partition: partition, Target: replicas}})
	if err != nil && errors.Is(err, errRejected) {
		if errors.Is(err, ErrNoReassignmentInProgress) || replicas == nil {
			return fmt.Errorf("%w: %s-%d", ErrNoReassignmentInProgress, topic, partition)
		}
		return fmt.Errorf("%w: %v", ErrInvalidReplicaAssignment, err)
	}
	if err == nil {
		q.logger.Info("partition reassignment recorded", "topic", topic, "partition", partition, "target", replicas)
	}
	return err
}

// Reassignment is one ongoing reassignment (ListPartitionReassignments).
type Reassignment struct {
	Topic     string
	Partition int32
	Replicas  []int32 // current replicas plus the ones being added
	Adding    []int32
	Removing  []int32
}

// Reassignments lists the ongoing reassignments, by topic and partition.
func (q *metadataQuorum) Reassignments() []Reassignment {
	img := q.img.Load()
	var out []Reassignment
	for _, name := range img.names {
		for _, p := range img.topics[name].Partitions {
			if p.Target == nil {
				continue
			}
			r := Reassignment{Topic: name, Partition: p.Partition, Replicas: p.members()}
			for _, n := range p.Target {
				if !containsNode(p.Replicas, n) {
					r.Adding = append(r.Adding, n)
				}
			}
			for _, n := range p.Replicas {
				if !containsNode(p.Target, n) {
					r.Removing = append(r.Removing, n)
				}
			}
			out = append(out, r)
		}
	}
	return out
}

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
