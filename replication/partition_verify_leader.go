package replication

import "context"

// VerifyLeader confirms with a round of heartbeats to a quorum (raft's
// VerifyLeader) that this broker still leads topic-partition. A read
// served from a leader's memory needs it before it answers: a leader cut
// off from its peers keeps its leadership until its lease runs out, while
// the others may already have elected a new leader that took writes (the
// fault harness saw OffsetFetch answer an offset older than an
// acknowledged commit that way). A single voter answers at once, once
// elected.
// ErrNotLeader when this broker does not lead; ErrUnknownTopicOrPartition
// for an unknown partition; ctx's error when it ends first.
func (r *partitionReplicas) VerifyLeader(ctx context.Context, topic string, partition int32) error {
	g, err := r.shareGroup(topic, partition)
	if err != nil {
		return err
	}
	// A group still electing (a broker just restarted: its coordinator
	// shards load from the log while raft elects) is waited for, as a
	// write would be, rather than refused.
	if err := g.awaitLeader(ctx); err != nil {
		return err
	}
	if err := waitFutureCtx(ctx, g.raft.VerifyLeader(), g.stopped); err != nil {
		if err == ctx.Err() {
			return err
		}
		return raftErr(g, err)
	}
	return nil
}
