package replication

import (
	"context"
	"errors"
	"fmt"
	"time"
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
