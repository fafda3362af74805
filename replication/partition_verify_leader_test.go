package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
)

// TestVerifyLeaderCutOff: a leader cut off from its peers still believes
// it leads (its lease has not run out), but VerifyLeader refuses it; the
// healthy leader and followers answer as they are.
func TestVerifyLeaderCutOff(t *testing.T) {
	q := newShareQuorum(t, "vl", nil)
	ctx := context.Background()
	li, _, _ := q.shareLeaderOf("vl", 0)
	if err := q.brokers[li].VerifyLeader(ctx, "vl", 0); err != nil {
		t.Fatalf("the leader: %v", err)
	}
	for i, br := range q.brokers {
		if i != li {
			if err := br.VerifyLeader(ctx, "vl", 0); !errors.Is(err, ErrNotLeader) {
				t.Fatalf("follower %d: %v, want ErrNotLeader", i+1, err)
			}
		}
	}
	if err := q.brokers[li].VerifyLeader(ctx, "nope", 0); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown partition: %v", err)
	}
	iso := q.brokers[li]
	g := iso.group(log.TopicPartition{Topic: "vl", Partition: 0})
	g.trans.Close()
	q.brokers[li] = nil // its group no longer reaches the others
	defer iso.Close()
	vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := iso.VerifyLeader(vctx, "vl", 0)
	if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrShuttingDown) {
		t.Fatalf("a leader cut off from its peers: %v (raft state %v), want ErrNotLeader", err, g.raft.State())
	}
	if g.raft.State() == raft.Leader {
		t.Logf("raft still called itself leader when VerifyLeader refused it")
	}
}
