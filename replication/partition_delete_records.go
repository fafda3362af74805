package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

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
// The new log start is an entry of the partition's Raft group, so it
// reaches every replica.
func (r *partitionReplicas) DeleteRecords(ctx context.Context, topic string, partition int32, offset int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	lp, err := r.Partition(topic, partition)
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
	// Through the partition's group, so every replica moves its log start
	// (partitionFSM.applyDeleteRecords) in log order.
	g := r.group(lp.TopicPartition())
	if g == nil {
		return -1, fmt.Errorf("%w: %s-%d has no raft group", log.ErrStorage, topic, partition)
	}
	f := g.raft.ApplyLog(raft.Log{Data: binary.BigEndian.AppendUint64(nil, uint64(offset)), Extensions: []byte{extDeleteRecords}}, produceApplyTimeout)
	if err := waitFutureOr(f, g.stopped); err != nil {
		return -1, raftErr(g, err)
	}
	pr, ok := f.Response().(partitionResult)
	if !ok {
		return -1, fmt.Errorf("%w: %s-%d: unexpected raft response %T", log.ErrStorage, topic, partition, f.Response())
	}
	if pr.err != nil {
		return -1, pr.err
	}
	start := pr.res.LogStartOffset
	// Followers apply the entry when they learn it is committed, with the
	// leader's next AppendEntries -- on an idle partition only after
	// CommitTimeout (6-12 s, raftconf/config.go). A barrier is such an entry
	// now: every replica moves its log start within a round trip. Not
	// waited for: the leader has applied it, which is what is answered.
	g.raft.Barrier(produceApplyTimeout)
	// Segments wholly below the new start go at once here (Kafka does),
	// once a snapshot covers them (log/removal.go); followers remove
	// theirs at their cleaner's next check.
	if err := g.snapshotNow(); err != nil {
		r.logger.Warn("snapshot after DeleteRecords failed; segments go at the next retention check", "topic", topic, "partition", partition, "err", err)
	} else if err := lp.RemoveBelowLogStart(); err != nil {
		r.logger.Warn("removing segments below the new log start failed", "topic", topic, "partition", partition, "err", err)
	}
	r.logger.Info("records deleted", "topic", topic, "partition", partition, "log_start", start)
	return start, nil
}
