package replication

import (
	"context"
	"errors"
	"fmt"

	"github.com/strata-io/strata/log"
)

// ErrPolicyViolation is returned by DeleteRecords on a topic whose
// cleanup.policy does not contain delete (POLICY_VIOLATION, as Kafka).
var ErrPolicyViolation = errors.New("replication: policy violation")

// DeleteRecords moves the log start offset of a partition this broker
// leads to offset (-1 = the high watermark), as Kafka's DeleteRecords, and
// returns the new log start offset (the low watermark). Segments wholly
// below it are deleted at once; reads below it fail with
// ErrOffsetOutOfRange. An offset above the high watermark, or negative
// other than -1, is ErrOffsetOutOfRange.
//
// With one voter the leader's log is the only replica. (With replicated
// partitions the new log start must reach every replica; the Raft
// partition groups carry it.)
func (b *Broker) DeleteRecords(ctx context.Context, topic string, partition int32, offset int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	lp, err := b.Partition(topic, partition)
	if err != nil {
		return -1, err
	}
	if !lp.Config().Cleanup.Delete {
		return -1, fmt.Errorf("%w: records of %s-%d cannot be deleted: cleanup.policy does not contain delete", ErrPolicyViolation, topic, partition)
	}
	offs := lp.Offsets()
	switch {
	case offset == -1:
		offset = offs.HighWatermark
	case offset < 0 || offset > offs.HighWatermark:
		return -1, fmt.Errorf("%w: cannot delete records of %s-%d before %d: not in [0, %d]", log.ErrOffsetOutOfRange, topic, partition, offset, offs.HighWatermark)
	}
	start, err := lp.AdvanceLogStart(offset)
	if err != nil {
		return -1, err
	}
	b.logger.Info("records deleted", "topic", topic, "partition", partition, "log_start", start)
	return start, nil
}
