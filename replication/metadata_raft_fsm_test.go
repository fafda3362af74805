package replication

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/replication/internal/raftharness"
	"github.com/strata-io/strata/replication/raftstore"
	"github.com/strata-io/strata/segment"
)

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// sampleCommands is a metadata history touching every command type.
func sampleCommands() []Command {
	one := []Assignment{{Partition: 0, Replicas: []int32{1, 2, 3}}}
	return []Command{
		{Type: CmdRegisterBroker, Broker: &BrokerInfo{NodeID: 1, Host: "127.0.0.1", Port: 9092}},
		{Type: CmdRegisterBroker, Broker: &BrokerInfo{NodeID: 2, Host: "127.0.0.1", Port: 9093, Rack: "r2"}},
		{Type: CmdRegisterBroker, Broker: &BrokerInfo{NodeID: 3, Host: "127.0.0.1", Port: 9094}},
		{Type: CmdCreateTopic, Topic: "orders", TopicID: [16]byte{1}, Partitions: one, Configs: map[string]string{"retention.ms": "1000"}},
		{Type: CmdCreateTopic, Topic: "gone", TopicID: [16]byte{2}, Partitions: one},
		{Type: CmdCreatePartitions, Topic: "orders", Partitions: []Assignment{{Partition: 1, Replicas: []int32{2, 3, 1}}}},
		{Type: CmdSetTopicConfigs, Topic: "orders", Configs: map[string]string{"cleanup.policy": "compact"}},
		{Type: CmdDeleteTopic, Topic: "gone", TopicID: [16]byte{2}},
		{Type: CmdAllocateProducerIDs, ProducerIDStart: firstProducerID, ProducerIDCount: 1000},
		{Type: CmdSetBrokerConfigs, ConfigResource: "", Configs: map[string]string{"log.retention.ms": "1000"}},
		{Type: CmdSetBrokerConfigs, ConfigResource: "2", Configs: map[string]string{"message.max.bytes": "5000"}},
	}
}

func TestImageSnapshotRoundTrip(t *testing.T) {
	im := newImage()
	for _, c := range sampleCommands() {
		im = mustApply(t, im, c)
	}
	b, err := encodeImage(im)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeImage(b)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := encodeImage(back)
	if !bytes.Equal(b, again) {
		t.Fatalf("round trip differs:\n%s\n%s", b, again)
	}
	if len(back.names) != 1 || back.partitions != 2 || len(back.pending) != 1 || back.nextProducerID != firstProducerID+1000 ||
		back.brokerConfigs["2"]["message.max.bytes"] != "5000" || back.brokerConfigs[""]["log.retention.ms"] != "1000" {
		t.Fatalf("derived fields: names %v partitions %d pending %d", back.names, back.partitions, len(back.pending))
	}
	// Bad snapshots are refused, never half-applied.
	for _, bad := range []string{"", "{", `{"v":2}`, `{"v":1,"topics":[{"Name":"a","ID":[1]},{"Name":"a","ID":[2]}]}`, `{"v":1,"topics":[{"Name":"a"}]}`} {
		if _, err := decodeImage([]byte(bad)); !errors.Is(err, errBadSnapshot) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// fileStores gives every harness node durable raft stores under dir: the
// metadata log and state files (over segment.OSFS) and hashicorp's file
// snapshot store.
func fileStores(t *testing.T, dir string) func(node, group int) (raft.LogStore, raft.StableStore, raft.SnapshotStore, error) {
	return func(node, group int) (raft.LogStore, raft.StableStore, raft.SnapshotStore, error) {
		d := filepath.Join(dir, fmt.Sprintf("n%d-g%d", node, group))
		fsys := segment.OSFS{}
		if err := fsys.MkdirAll(d); err != nil {
			return nil, nil, nil, err
		}
		logs, err := raftstore.OpenLogFile(fsys, d, quietLogger())
		if err != nil {
			return nil, nil, nil, err
		}
		stable, err := raftstore.OpenStableFile(fsys, d)
		if err != nil {
			return nil, nil, nil, err
		}
		snaps, err := raft.NewFileSnapshotStore(d, 2, io.Discard)
		if err != nil {
			return nil, nil, nil, err
		}
		return logs, stable, snaps, nil
	}
}

func proposeAll(t *testing.T, r *raft.Raft, cmds []Command) {
	t.Helper()
	for _, c := range cmds {
		data, err := encodeCommandEntry(c)
		if err != nil {
			t.Fatal(err)
		}
		f := r.Apply(data, 2*time.Second)
		if err := f.Error(); err != nil {
			t.Fatalf("%s: %v", c.Type, err)
		}
		if res := f.Response().(fsmResult); res.err != nil {
			t.Fatalf("%s rejected: %v", c.Type, res.err)
		}
	}
}

func imageBytes(t *testing.T, f *metadataFSM) string {
	t.Helper()
	b, err := encodeImage(f.Image())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitSameImages waits until every node's metadata image encodes the same
// and has applied want commands.
func waitSameImages(t *testing.T, h *raftharness.Harness, want int64) {
	t.Helper()
	if !testwait.Until(5*time.Second, func() bool {
		first := imageBytes(t, h.FSM(0, 0).(*metadataFSM))
		for i := range h.Nodes() {
			f := h.FSM(i, 0).(*metadataFSM)
			if f.Image().applied != want || imageBytes(t, f) != first {
				return false
			}
		}
		return true
	}) {
		for i := range h.Nodes() {
			f := h.FSM(i, 0).(*metadataFSM)
			t.Logf("node %d applied %d: %s", i, f.Image().applied, imageBytes(t, f))
		}
		t.Fatalf("images differ or not all %d commands applied", want)
	}
}

// The metadata quorum: commands proposed on whichever node leads reach
// every broker's image in the same order, through a leader isolation, a
// heal, a snapshot and restarts (Raft §5.3, §7).
func TestMetadataGroupReplicatesTheImage(t *testing.T) {
	dir := t.TempDir()
	h := raftharness.Start(t, raftharness.Config{
		Nodes:  3,
		FSM:    func(node, group int) raft.FSM { return newMetadataFSM(quietLogger(), nil, nil) },
		Stores: fileStores(t, dir),
	})
	cmds := sampleCommands()
	leader, err := h.Leader(0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	proposeAll(t, h.Raft(leader, 0), cmds[:4])
	waitSameImages(t, h, 4)

	h.Disconnect(leader)
	var rest []int
	for i := 0; i < 3; i++ {
		if i != leader {
			rest = append(rest, i)
		}
	}
	next, err := h.Leader(0, 5*time.Second, rest...)
	if err != nil {
		t.Fatal(err)
	}
	proposeAll(t, h.Raft(next, 0), cmds[4:7])
	h.Heal()
	waitSameImages(t, h, 7)

	// A snapshot, then a restart of that node: the image comes back from
	// snapshot + log.
	if err := h.Raft(next, 0).Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if err := h.Restart(next); err != nil {
		t.Fatal(err)
	}
	leader, err = h.Leader(0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	proposeAll(t, h.Raft(leader, 0), cmds[7:])
	waitSameImages(t, h, int64(len(cmds)))
	// And a restart of everyone at once (all from their files).
	for i := range h.Nodes() {
		if err := h.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.Leader(0, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	waitSameImages(t, h, int64(len(cmds)))
	im := h.FSM(0, 0).(*metadataFSM).Image()
	if len(im.brokers) != 3 || len(im.topics["orders"].Partitions) != 2 || len(im.pending) != 1 {
		t.Fatalf("final image: %d brokers, topics %v, %d pending", len(im.brokers), im.names, len(im.pending))
	}
}

// A rejected command is rejected on every replica alike and changes
// nothing (but is counted, so images stay comparable).
func TestMetadataGroupRejectsDeterministically(t *testing.T) {
	h := raftharness.Start(t, raftharness.Config{Nodes: 3, FSM: func(node, group int) raft.FSM { return newMetadataFSM(quietLogger(), nil, nil) }})
	leader, err := h.Leader(0, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cmds := sampleCommands()
	proposeAll(t, h.Raft(leader, 0), cmds[:4])
	data, _ := encodeCommandEntry(cmds[3]) // the same topic again
	f := h.Raft(leader, 0).Apply(data, 2*time.Second)
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	if res := f.Response().(fsmResult); !errors.Is(res.err, errRejected) {
		t.Fatalf("duplicate topic: %v", res.err)
	}
	if f := h.Raft(leader, 0).Apply([]byte{9, 9}, 2*time.Second); f.Error() != nil || f.Response().(fsmResult).err == nil {
		t.Fatal("garbage entry not refused")
	}
	waitSameImages(t, h, 5)
}
