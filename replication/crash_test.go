package replication

import (
	"context"
	"errors"
	"testing"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

// startMem starts a broker whose data dir lives in mem.
func startMem(t *testing.T, mem *segment.MemFS) (*Broker, *log.Manager) {
	t.Helper()
	var m *log.Manager
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Skipf("log.Manager not implemented yet: %v", r)
			}
		}()
		var err error
		m, err = log.OpenManager(log.ManagerOptions{Dir: "/data", FS: mem, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
	}()
	cfg := testConfig("/data")
	cfg.FS = mem
	b, err := NewBroker(cfg, m)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	return b, m
}

// Everything a metadata call acknowledged survives a crash that loses every
// write not yet fsync'd (segment.MemFS strict semantics).
func TestCrashKeepsAcknowledgedMetadata(t *testing.T) {
	ctx := context.Background()
	mem := segment.NewMemFS()
	b, _ := startMem(t, mem)
	cluster := b.ClusterID()
	a, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "a", NumPartitions: 2, ReplicationFactor: 1, Configs: map[string]string{"flush.messages": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(ctx, "a", 1, batch(3, -1, -1, -1)); err != nil {
		t.Fatal(err)
	}
	var lastPID int64
	for i := 0; i < 5; i++ {
		if lastPID, err = b.AllocateProducerID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "gone", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteTopic(ctx, "gone"); err != nil {
		t.Fatal(err)
	}

	// Crash: the restarted broker sees only what was durable. The old
	// broker is not closed first (that would flush); its raft goroutines
	// keep running against the old FS until the end of the test.
	b2, _ := startMem(t, mem.Crash())
	defer b.Close()
	defer b2.Close()
	if b2.ClusterID() != cluster {
		t.Fatalf("cluster id %q after crash, was %q", b2.ClusterID(), cluster)
	}
	got, ok := b2.Topic("a")
	if !ok || got.ID != a.ID || len(got.Partitions) != 2 || got.Configs["flush.messages"] != "1" {
		t.Fatalf("topic a after crash: %+v", got)
	}
	if _, ok := b2.Topic("gone"); ok {
		t.Fatal("deleted topic back after crash")
	}
	p, err := b2.Partition("a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if off := p.Offsets(); off.LogEnd != 3 {
		t.Fatalf("records with flush.messages=1 lost in crash: %+v", off)
	}
	pid, err := b2.AllocateProducerID(ctx)
	if err != nil || pid <= lastPID {
		t.Fatalf("producer id %d after crash, last before %d (%v)", pid, lastPID, err)
	}
}

// A failed fsync of the metadata log fails the call, sticks, and the
// command is not there after a crash.
func TestMetadataSyncFailure(t *testing.T) {
	ctx := context.Background()
	mem := segment.NewMemFS()
	b, _ := startMem(t, mem)
	mem.FailNext(segment.OpSync)
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "x", NumPartitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrMetadataStorage) {
		t.Fatalf("err = %v", err)
	}
	if _, ok := b.Topic("x"); ok {
		t.Fatal("topic visible after a failed metadata write")
	}
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "y", NumPartitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrMetadataStorage) {
		t.Fatalf("write after failed fsync: %v", err)
	}
	b2, _ := startMem(t, mem.Crash()) // see TestCrashKeepsAcknowledgedMetadata
	defer b.Close()
	defer b2.Close()
	if len(b2.Topics()) != 0 {
		t.Fatalf("topics after crash: %v", b2.Topics())
	}
	if _, err := b2.CreateTopic(ctx, CreateTopicRequest{Name: "x", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
}
