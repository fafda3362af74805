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
// Otherwise a leader would have to move. Partition leadership does not
// move yet (a partition's leader is the one the metadata image names at
// creation, until the per-partition Raft groups can hand leadership
// over), so such an election fails honestly with
// ErrPreferredLeaderNotAvailable / ErrEligibleLeadersNotAvailable instead
// of claiming success.
func (b *Broker) ElectLeader(ctx context.Context, topic string, partition int32, typ ElectionType) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.closed.Load() {
		return ErrShuttingDown
	}
	if typ != ElectPreferred && typ != ElectUnclean {
		return fmt.Errorf("%w %d", ErrInvalidElectionType, typ)
	}
	t, ok := b.img.Load().topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, topic, partition)
	}
	pi := t.Partitions[partition]
	switch typ {
	case ElectPreferred:
		if len(pi.Replicas) > 0 && pi.Leader == pi.Replicas[0] {
			return fmt.Errorf("%w: %s-%d is led by its preferred replica %d", ErrElectionNotNeeded, topic, partition, pi.Leader)
		}
		return fmt.Errorf("%w: %s-%d is led by %d, not its preferred replica; partition leadership cannot move yet", ErrPreferredLeaderNotAvailable, topic, partition, pi.Leader)
	default:
		if pi.Leader >= 0 {
			return fmt.Errorf("%w: %s-%d has leader %d", ErrElectionNotNeeded, topic, partition, pi.Leader)
		}
		return fmt.Errorf("%w: %s-%d has no leader and partition leadership cannot move yet", ErrEligibleLeadersNotAvailable, topic, partition)
	}
}
