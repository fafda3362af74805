package replication

import (
	"context"
	"errors"
	"fmt"
)

// ElectionType is ElectLeaders' election type (KIP-460).
type ElectionType int8

const (
	// ElectPreferred makes each partition's preferred replica (the first
	// of its replicas) its leader, if it is in the ISR.
	ElectPreferred ElectionType = 0
	// ElectUnclean elects a leader for a partition that has none, from
	// any live replica.
	ElectUnclean ElectionType = 1
)

var (
	ErrElectionNotNeeded           = errors.New("replication: election not needed")            // ELECTION_NOT_NEEDED
	ErrPreferredLeaderNotAvailable = errors.New("replication: preferred leader not available") // PREFERRED_LEADER_NOT_AVAILABLE
	ErrEligibleLeadersNotAvailable = errors.New("replication: eligible leaders not available") // ELIGIBLE_LEADERS_NOT_AVAILABLE
	ErrInvalidElectionType         = errors.New("replication: unknown election type")          // INVALID_REQUEST
)

// ElectLeader runs one partition's leader election of the given type, as
// Kafka's controller does for ElectLeaders, from the replicated metadata
// image (any broker may answer; Kafka's brokers forward to the
// controller):
//
//   - preferred: ErrElectionNotNeeded when the leader is already the
//     first replica (always so with one replica);
//   - unclean: ErrElectionNotNeeded when the partition has a leader.
//
// Otherwise the preferred replica takes over through a raft leadership
// transfer run by the current leader (forwarded to it over the Mux), once
// it has caught up; ErrPreferredLeaderNotAvailable if it cannot (down,
// not in the ISR). Unclean elections are raft's own business: a
// partition without a leader elects one as soon as a majority of its
// replicas are up, and never from a replica that lacks committed data.
func (r *partitionReplicas) ElectLeader(ctx context.Context, topic string, partition int32, typ ElectionType) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.closed.Load() {
		return ErrShuttingDown
	}
	if typ != ElectPreferred && typ != ElectUnclean {
		return fmt.Errorf("%w %d", ErrInvalidElectionType, typ)
	}
	t, ok := r.meta.img.Load().topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, topic, partition)
	}
	pi := t.Partitions[partition]
	switch typ {
	case ElectPreferred:
		if len(pi.Replicas) > 0 && pi.Leader == pi.Replicas[0] {
			return fmt.Errorf("%w: %s-%d is led by its preferred replica %d", ErrElectionNotNeeded, topic, partition, pi.Leader)
		}
		if !containsNode(pi.ISR, pi.Replicas[0]) {
			return fmt.Errorf("%w: %s-%d: preferred replica %d is not in the ISR %v", ErrPreferredLeaderNotAvailable, topic, partition, pi.Replicas[0], pi.ISR)
		}
		return r.transfer(ctx, t, partition, pi.Replicas[0])
	default:
		if pi.Leader >= 0 {
			return fmt.Errorf("%w: %s-%d has leader %d", ErrElectionNotNeeded, topic, partition, pi.Leader)
		}
		return fmt.Errorf("%w: %s-%d has no leader: a majority of its replicas must be up to elect one (raft never elects a replica that lacks committed data)", ErrEligibleLeadersNotAvailable, topic, partition)
	}
}
