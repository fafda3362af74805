package replication

import (
	"context"
	"testing"

	"github.com/strata-io/strata/log"
)

// TestDropNonMemberWaitsForTheReassignment: a broker left out of a
// partition's replicas and of its current reassignment target keeps its
// log (and raft state) while the reassignment is in progress -- it may
// still be a voter, added for an earlier target -- and drops it once no
// reassignment is (the voters are then the replicas). The fault harness
// found what deleting it early does: a voter that restarted during a
// retargeted move lost its log and vote, was added back empty, and a
// leader was elected without the committed tail.
func TestDropNonMemberWaitsForTheReassignment(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()))
	defer b.Close()
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "moved", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	tp := log.TopicPartition{Topic: "moved", Partition: 0}
	if !b.hasLog(tp) {
		t.Fatal("no log for the new partition")
	}
	ti := *b.img.Load().topics["moved"]
	ti.Partitions = append([]PartitionInfo(nil), ti.Partitions...)

	// A move to brokers 2 and 3 retargeted to 2 and 5 before it finished:
	// broker 1 is in neither list but may still be a voter.
	ti.Partitions[0].Replicas, ti.Partitions[0].Target = []int32{2, 3}, []int32{2, 5}
	b.dropNonMember(&ti, 0)
	if !b.hasLog(tp) {
		t.Fatal("the log was deleted while the partition was being reassigned")
	}

	// The move done: broker 1 is not a replica, and not a voter.
	ti.Partitions[0].Replicas, ti.Partitions[0].Target = []int32{2, 5}, nil
	b.dropNonMember(&ti, 0)
	if b.hasLog(tp) {
		t.Fatal("the log of a partition moved away is still here once its reassignment is done")
	}
}
