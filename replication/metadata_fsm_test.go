package replication

import (
	"errors"
	"testing"
)

func mustApply(t *testing.T, im *image, c Command) *image {
	t.Helper()
	next, err := im.Apply(c)
	if err != nil {
		t.Fatalf("apply %s: %v", c.Type, err)
	}
	return next
}

func TestImageApply(t *testing.T) {
	id1 := [16]byte{1}
	id2 := [16]byte{2}
	one := []Assignment{{Partition: 0, Replicas: []int32{1}}}
	im := newImage()
	im = mustApply(t, im, Command{Type: CmdRegisterBroker, Broker: &BrokerInfo{NodeID: 1, Host: "h", Port: 9092}})
	before := im
	im = mustApply(t, im, Command{Type: CmdCreateTopic, Topic: "b", TopicID: id1, Partitions: one, Configs: map[string]string{"retention.ms": "1"}})
	if len(before.topics) != 0 {
		t.Fatal("Apply modified the previous image")
	}
	im = mustApply(t, im, Command{Type: CmdCreateTopic, Topic: "__a", TopicID: id2, Partitions: one})
	if len(im.names) != 2 || im.names[0] != "__a" || im.names[1] != "b" {
		t.Fatalf("names %v", im.names)
	}
	if !im.topics["__a"].Internal || im.topics["b"].Internal {
		t.Fatal("internal flag")
	}
	if im.byID[id1].Name != "b" {
		t.Fatal("byID")
	}

	tests := []struct {
		name string
		c    Command
	}{
		{"duplicate name", Command{Type: CmdCreateTopic, Topic: "b", TopicID: [16]byte{9}, Partitions: one}},
		{"duplicate id", Command{Type: CmdCreateTopic, Topic: "c", TopicID: id1, Partitions: one}},
		{"zero id", Command{Type: CmdCreateTopic, Topic: "c", Partitions: one}},
		{"no partitions", Command{Type: CmdCreateTopic, Topic: "c", TopicID: [16]byte{9}}},
		{"gap", Command{Type: CmdCreateTopic, Topic: "c", TopicID: [16]byte{9}, Partitions: []Assignment{{Partition: 1, Replicas: []int32{1}}}}},
		{"dup replica", Command{Type: CmdCreateTopic, Topic: "c", TopicID: [16]byte{9}, Partitions: []Assignment{{Partition: 0, Replicas: []int32{1, 1}}}}},
		{"delete wrong id", Command{Type: CmdDeleteTopic, Topic: "b", TopicID: id2}},
		{"done without delete", Command{Type: CmdDeleteTopicDone, TopicID: id1}},
		{"partitions wrong start", Command{Type: CmdCreatePartitions, Topic: "b", Partitions: one}},
		{"pid block wrong start", Command{Type: CmdAllocateProducerIDs, ProducerIDStart: 5, ProducerIDCount: 10}},
		{"unknown type", Command{Type: 99}},
	}
	for _, tt := range tests {
		next, err := im.Apply(tt.c)
		if !errors.Is(err, errRejected) {
			t.Errorf("%s: err = %v", tt.name, err)
		}
		if len(next.topics) != len(im.topics) || len(next.pending) != len(im.pending) || next.nextProducerID != im.nextProducerID {
			t.Errorf("%s: rejected command changed the image", tt.name)
		}
	}

	im = mustApply(t, im, Command{Type: CmdCreatePartitions, Topic: "b", Partitions: []Assignment{{Partition: 1, Replicas: []int32{1}}, {Partition: 2, Replicas: []int32{1}}}})
	if n := len(im.topics["b"].Partitions); n != 3 || len(im.byID[id1].Partitions) != 3 {
		t.Fatalf("partitions %d", n)
	}
	im = mustApply(t, im, Command{Type: CmdSetTopicConfigs, Topic: "b", Configs: map[string]string{"segment.ms": "5"}})
	if c := im.topics["b"].Configs; len(c) != 1 || c["segment.ms"] != "5" {
		t.Fatalf("configs %v", c)
	}
	im = mustApply(t, im, Command{Type: CmdAllocateProducerIDs, ProducerIDStart: firstProducerID, ProducerIDCount: 10})
	if im.nextProducerID != firstProducerID+10 {
		t.Fatal("pid")
	}
	im = mustApply(t, im, Command{Type: CmdDeleteTopic, Topic: "b", TopicID: id1})
	if _, ok := im.topics["b"]; ok || im.pending[id1].Partitions != 3 {
		t.Fatal("delete")
	}
	if _, err := im.Apply(Command{Type: CmdCreateTopic, Topic: "x", TopicID: id1, Partitions: one}); !errors.Is(err, errRejected) {
		t.Fatal("id of a pending deletion reused")
	}
	im = mustApply(t, im, Command{Type: CmdDeleteTopicDone, TopicID: id1})
	if len(im.pending) != 0 || len(im.names) != 1 {
		t.Fatal("done")
	}
}

// Replaying the same commands gives the same image: the determinism Raft
// will rely on.
func TestImageDeterministic(t *testing.T) {
	cmds := []Command{
		{Type: CmdRegisterBroker, Broker: &BrokerInfo{NodeID: 1}},
		{Type: CmdCreateTopic, Topic: "t", TopicID: [16]byte{7}, Partitions: []Assignment{{Partition: 0, Replicas: []int32{1}}}},
		{Type: CmdAllocateProducerIDs, ProducerIDStart: firstProducerID, ProducerIDCount: 1000},
		{Type: CmdCreateTopic, Topic: "t", TopicID: [16]byte{8}, Partitions: []Assignment{{Partition: 0, Replicas: []int32{1}}}}, // rejected
	}
	run := func() *image {
		im := newImage()
		for _, c := range cmds {
			im, _ = im.Apply(c)
		}
		return im
	}
	a, b := run(), run()
	if a.applied != 4 || b.applied != 4 || a.nextProducerID != b.nextProducerID || len(a.topics) != len(b.topics) ||
		a.topics["t"].ID != b.topics["t"].ID {
		t.Fatal("replay differs")
	}
}
