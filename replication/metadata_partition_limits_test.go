package replication

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testwait"
)

func TestCheckPartitionLimits(t *testing.T) {
	im := newImage()
	im.brokers = map[int32]BrokerInfo{1: {NodeID: 1}, 2: {NodeID: 2}}
	im.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
		topics["t"] = &TopicInfo{Name: "t", Partitions: []PartitionInfo{
			{Partition: 0, Replicas: []int32{1, 2}},
			{Partition: 1, Replicas: []int32{1}, Target: []int32{2}}, // 2 being added
		}}
	})
	props := map[string]string{"max.broker.partitions": "3", "max.partitions": "3"}
	if err := checkPartitionLimits(im, props, 1, map[int32]int64{1: 1}); err != nil {
		t.Fatal(err)
	}
	// Broker 2 hosts 2 (one replica, one being added): one more fits.
	if err := checkPartitionLimits(im, props, 0, map[int32]int64{2: 1}); err != nil {
		t.Fatal(err)
	}
	err := checkPartitionLimits(im, props, 0, map[int32]int64{2: 2})
	if !errors.Is(err, ErrPolicyViolation) || !strings.Contains(err.Error(), "broker 2") || !strings.Contains(err.Error(), "max.broker.partitions=3") {
		t.Fatalf("over the broker limit: %v", err)
	}
	err = checkPartitionLimits(im, props, 2, nil)
	if !errors.Is(err, ErrPolicyViolation) || !strings.Contains(err.Error(), "max.partitions=3") {
		t.Fatalf("over the cluster limit: %v", err)
	}
	// Defaults: 10,000 replicas per broker.
	if err := checkPartitionLimits(im, nil, 1, map[int32]int64{1: 9998}); err != nil {
		t.Fatal(err)
	}
	if err := checkPartitionLimits(im, nil, 1, map[int32]int64{1: 9999}); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("10,001 replicas on a broker: %v", err)
	}
}

// KIP-578's placement: an automatic assignment that would put one
// replica too many on a full broker goes to the brokers with room
// instead; when they have too little, POLICY_VIOLATION. Explicit
// assignments are never moved.
func TestAutoPlacementAvoidsFullBrokers(t *testing.T) {
	im := newImage()
	im.brokers = map[int32]BrokerInfo{1: {NodeID: 1}, 2: {NodeID: 2}, 3: {NodeID: 3}}
	im.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
		topics["t"] = &TopicInfo{Name: "t", Partitions: []PartitionInfo{
			{Partition: 0, Replicas: []int32{1, 2}},
			{Partition: 1, Replicas: []int32{1, 3}},
		}}
	})
	props := map[string]string{"max.broker.partitions": "2"}
	// Round-robin would start partition 0 on broker 1, which is full.
	auto, err := autoAssign(im, 0, 2, 1)
	if err != nil || auto[0].Replicas[0] != 1 {
		t.Fatalf("round-robin: %v %+v", err, auto)
	}
	got, err := checkOrPlace(im, props, auto, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range got {
		if a.Replicas[0] == 1 {
			t.Fatalf("a replica placed on full broker 1: %+v", got)
		}
	}
	if got[0].Replicas[0] == got[1].Replicas[0] {
		t.Fatalf("both on one broker: %+v", got)
	}
	if _, err := checkOrPlace(im, props, auto, false, 0); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("an explicit assignment on a full broker: %v", err)
	}
	// A broker whose open-file limit allows fewer replicas has less room.
	capped := newImage()
	capped.brokers = map[int32]BrokerInfo{1: {NodeID: 1}, 2: {NodeID: 2, ReplicaCapacity: 1}, 3: {NodeID: 3}}
	capped.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
		topics["t"] = &TopicInfo{Name: "t", Partitions: []PartitionInfo{{Partition: 0, Replicas: []int32{1, 2}}, {Partition: 1, Replicas: []int32{1}}}}
	})
	two, _ := autoAssign(capped, 0, 2, 1)
	got, err = checkOrPlace(capped, props, two, true, 0)
	if err != nil || got[0].Replicas[0] != 3 || got[1].Replicas[0] != 3 {
		t.Fatalf("brokers 1 (max.broker.partitions) and 2 (open files) full: %v %+v", err, got)
	}
	three, _ := autoAssign(im, 0, 3, 1)
	if _, err := checkOrPlace(im, props, three, true, 0); !errors.Is(err, ErrPolicyViolation) || !strings.Contains(err.Error(), "max.broker.partitions=2") {
		t.Fatalf("more than the room of brokers 2 and 3: %v", err)
	}
}

// On three brokers, max.broker.partitions set for the cluster through one
// broker (the dynamic default) binds CreateTopics with an explicit
// assignment, and reassignments: a move that would put one replica too
// many on broker 3 is refused with ErrPolicyViolation naming the broker
// and the limit, while one that fits completes.
func TestPartitionLimitsAcrossQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("three-broker quorum")
	}
	q := newTestQuorum(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q.controller()
	testwait.For(t, 30*time.Second, func() bool { return len(q.brokers[0].Brokers()) == 3 }, "three brokers registered")
	if err := q.brokers[1].SetBrokerConfigs(ctx, "", map[string]string{"max.broker.partitions": "2"}, false); err != nil {
		t.Fatal(err)
	}
	for i := range q.brokers {
		testwait.For(t, 10*time.Second, func() bool {
			return q.brokers[i].DynamicBrokerConfigs("")["max.broker.partitions"] == "2"
		}, "broker %d never saw the limit", i+1)
	}
	if _, err := q.brokers[0].CreateTopic(ctx, CreateTopicRequest{Name: "a", NumPartitions: -1, ReplicationFactor: -1,
		Assignment: map[int32][]int32{0: {1, 2}, 1: {1, 2}}}); err != nil {
		t.Fatal(err)
	}
	_, err := q.brokers[2].CreateTopic(ctx, CreateTopicRequest{Name: "b", NumPartitions: -1, ReplicationFactor: -1,
		Assignment: map[int32][]int32{0: {1, 3}}})
	if !errors.Is(err, ErrPolicyViolation) || !strings.Contains(err.Error(), "broker 1") {
		t.Fatalf("a third replica on broker 1: %v", err)
	}
	if _, err := q.brokers[2].CreateTopic(ctx, CreateTopicRequest{Name: "b", NumPartitions: -1, ReplicationFactor: -1,
		Assignment: map[int32][]int32{0: {3}}}); err != nil {
		t.Fatal(err)
	}
	q.waitTopic(2, "a")
	if err := q.brokers[2].AlterPartitionReassignment(ctx, "a", 0, []int32{2, 3}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, func() bool {
		for _, br := range q.brokers {
			ti, _ := br.Topic("a")
			if len(ti.Partitions) != 2 || ti.Partitions[0].Target != nil || !equalNodes(ti.Partitions[0].Replicas, []int32{2, 3}) {
				return false
			}
		}
		return true
	}, "the reassignment within the limit never finished")
	err = q.brokers[0].AlterPartitionReassignment(ctx, "a", 1, []int32{3, 2})
	if !errors.Is(err, ErrPolicyViolation) || !strings.Contains(err.Error(), "broker 3") || !strings.Contains(err.Error(), "max.broker.partitions=2") {
		t.Fatalf("a third replica on broker 3 by reassignment: %v", err)
	}
	if rs := q.brokers[0].Reassignments(); len(rs) != 0 {
		t.Fatalf("a refused reassignment was recorded: %+v", rs)
	}
}

// TestOpenFileLimitBoundsReplicas: a broker whose open-file limit allows
// fewer replicas than max.broker.partitions (its registered
// ReplicaCapacity) is not given more: a request past it is refused with
// POLICY_VIOLATION naming the open-file limit, not accepted to make the
// broker fail to open partitions and stop on storage errors ("too many
// open files" at 10,000 partitions under a limit of 20,000).
func TestOpenFileLimitBoundsReplicas(t *testing.T) {
	if c := ReplicaCapacity(0); c != 0 {
		t.Fatalf("ReplicaCapacity(0) = %d, want 0 (unknown)", c)
	}
	capacity := ReplicaCapacity(openFileReserve + 3*FDsPerReplica)
	if capacity != 3 {
		t.Fatalf("ReplicaCapacity = %d, want 3", capacity)
	}
	im := newImage()
	im.brokers = map[int32]BrokerInfo{1: {NodeID: 1, ReplicaCapacity: capacity}, 2: {NodeID: 2}}
	im.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
		topics["t"] = &TopicInfo{Name: "t", Partitions: []PartitionInfo{{Partition: 0, Replicas: []int32{1, 2}}}}
	})
	if err := checkPartitionLimits(im, nil, 2, map[int32]int64{1: 2, 2: 2}); err != nil {
		t.Fatalf("3 replicas on broker 1 (its capacity): %v", err)
	}
	err := checkPartitionLimits(im, nil, 3, map[int32]int64{1: 3, 2: 3})
	if !errors.Is(err, ErrPolicyViolation) || !strings.Contains(err.Error(), "broker 1") || !strings.Contains(err.Error(), "open-file limit") {
		t.Fatalf("4 replicas on broker 1: %v", err)
	}
	// Broker 2 registered no capacity (unknown): only max.broker.partitions binds it.
	if err := checkPartitionLimits(im, nil, 0, map[int32]int64{2: 100}); err != nil {
		t.Fatal(err)
	}
}
