package replication

import (
	"context"
	"testing"

	"github.com/strata-io/strata/log"
)

// movedAway publishes an image in which partition 0 of topic name is on
// broker 2 only (as the FSM publishes a reassignment done before its
// effect), and returns that topic.
func movedAway(b *Broker, name string) *TopicInfo {
	next := b.img.Load().clone()
	var moved TopicInfo
	next.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
		moved = *topics[name]
		moved.Partitions = append([]PartitionInfo(nil), moved.Partitions...)
		moved.Partitions[0].Replicas, moved.Partitions[0].Target = []int32{2}, nil
		topics[name], byID[moved.ID] = &moved, &moved
	})
	b.img.Store(next)
	return &moved
}

// TestStartOpenAndRemovalDoNotInterleave: start's pass that opens every
// partition runs outside effMu, beside the metadata FSM. A partition the
// FSM removes meanwhile (a reassignment done that moves it off this
// broker, a deletion) was closed and deleted while start opened its
// group, and raft panicked reading the closed log (the 30-minute fault
// run, seed 11). Each partition's open and removal now take its guard,
// and start's open re-checks the published image under it.
func TestStartOpenAndRemovalDoNotInterleave(t *testing.T) {
	b := startBroker(t, testConfig(t.TempDir()))
	defer b.Close()
	ctx := context.Background()
	for _, name := range []string{"open-first", "removed-first"} {
		if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: name, NumPartitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}

	// The open first: start holds the partition (its log open, its group
	// not yet started) when the FSM removes it. The removal waits, and
	// finds and stops the group the open started.
	tp := log.TopicPartition{Topic: "open-first", Partition: 0}
	before := *b.img.Load().topics[tp.Topic]
	b.closeGroup(tp)
	entered, release := make(chan struct{}), make(chan struct{})
	b.testHookOpening = func(got log.TopicPartition) {
		if got == tp {
			close(entered)
			<-release
		}
	}
	opened := make(chan error, 1)
	go func() { opened <- b.openLogsChecked(&before, 0, true) }()
	<-entered
	moved := movedAway(b, tp.Topic)
	removed := make(chan struct{})
	go func() {
		defer close(removed)
		b.dropNonMember(moved, 0)
	}()
	close(release)
	if err := <-opened; err != nil {
		t.Fatalf("start's open: %v", err)
	}
	<-removed
	b.testHookOpening = nil
	if b.group(tp) != nil || b.hasLog(tp) {
		t.Fatalf("after the open and the removal: group running %v, log present %v; want neither", b.group(tp) != nil, b.hasLog(tp))
	}

	// The removal first: start's open, iterating an image older than the
	// removal, must not bring the partition back.
	tp = log.TopicPartition{Topic: "removed-first", Partition: 0}
	before = *b.img.Load().topics[tp.Topic]
	b.closeGroup(tp)
	moved = movedAway(b, tp.Topic)
	b.dropNonMember(moved, 0)
	if b.hasLog(tp) {
		t.Fatal("the removal left the log")
	}
	if err := b.openLogsChecked(&before, 0, true); err != nil {
		t.Fatalf("start's open: %v", err)
	}
	if b.group(tp) != nil || b.hasLog(tp) {
		t.Fatalf("start's open brought back a partition moved away: group running %v, log present %v", b.group(tp) != nil, b.hasLog(tp))
	}
}
