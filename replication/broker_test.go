package replication

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication/raftstore"
	"github.com/strata-io/strata/replication/transport"
	"github.com/strata-io/strata/segment"
)

// openLogs opens a log manager on dir, skipping the test while the storage
// engine is still a stub (its methods panic).
func openLogs(t *testing.T, dir string) (m *log.Manager) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Skipf("log.Manager not implemented yet: %v", r)
		}
	}()
	m, err := log.OpenManager(log.ManagerOptions{Dir: dir, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func testConfig(dir string) BrokerConfig {
	return BrokerConfig{
		NodeID: 1, AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092, DataDir: dir,
		NumPartitions: 2, DefaultReplicationFactor: 1, AutoCreateTopics: true, DeleteTopicEnable: true,
		Logger: discardLogger(),
	}
}

func startBroker(t *testing.T, cfg BrokerConfig) *Broker {
	t.Helper()
	m := openLogs(t, cfg.DataDir)
	b, err := NewBroker(cfg, m)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	return b
}

// batch builds one uncompressed v2 record batch of n records (empty keys
// and values) with the given producer fields.
func batch(n int, producerID int64, epoch int16, seq int32) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		// length, attributes, timestampDelta, offsetDelta, keyLen(-1), valueLen(0), headers(0), all varints.
		body := []byte{0, 0, byte(i << 1), 1, 0, 0}
		recs = append(recs, byte(len(body)<<1))
		recs = append(recs, body...)
	}
	ts := time.Now().UnixMilli()
	return segment.AppendBatch(nil, segment.Header{LastOffsetDelta: int32(n - 1), BaseTimestamp: ts, MaxTimestamp: ts,
		ProducerID: producerID, ProducerEpoch: epoch, BaseSequence: seq, NumRecords: int32(n)}, recs)
}

func TestCreateDeleteRecreate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, testConfig(dir))
	defer b.Close()

	if b.ClusterID() == "" || b.ControllerID() != 1 || len(b.Brokers()) != 1 {
		t.Fatalf("identity: %q %d %v", b.ClusterID(), b.ControllerID(), b.Brokers())
	}
	ti, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "orders", NumPartitions: 3, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if ti.ID == ([16]byte{}) || len(ti.Partitions) != 3 || ti.Partitions[2].Leader != 1 || ti.Configs["retention.ms"] != "1000" {
		t.Fatalf("%+v", ti)
	}
	if got, ok := b.TopicByID(ti.ID); !ok || got.Name != "orders" {
		t.Fatal("TopicByID")
	}
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "orders", NumPartitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate: %v", err)
	}
	res, err := b.Produce(ctx, "orders", 1, batch(3, -1, -1, -1))
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != 0 || res.LastOffset != 2 {
		t.Fatalf("%+v", res)
	}
	p, _ := b.Partition("orders", 1)
	if hw := p.Offsets().HighWatermark; hw != 3 {
		t.Fatalf("hw %d", hw)
	}
	if err := b.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Topic("orders"); ok {
		t.Fatal("still there")
	}
	if _, err := b.Produce(ctx, "orders", 1, batch(1, -1, -1, -1)); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("produce to deleted: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "orders-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("partition dir left: %v", err)
	}
	ti2, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "orders", NumPartitions: 1, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	if ti2.ID == ti.ID {
		t.Fatal("topic id reused")
	}
	p, _ = b.Partition("orders", 0)
	if off := p.Offsets(); off.LogEnd != 0 {
		t.Fatalf("recreated topic not empty: %+v", off)
	}
	if err := b.DeleteTopic(ctx, "nope"); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatal(err)
	}
}

func TestCreateTopicValidation(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, testConfig(t.TempDir()))
	defer b.Close()
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "a.b", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		req  CreateTopicRequest
		want error
	}{
		{CreateTopicRequest{Name: "bad name", NumPartitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
		{CreateTopicRequest{Name: "..", NumPartitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
		{CreateTopicRequest{Name: "a_b", NumPartitions: 1, ReplicationFactor: 1}, ErrInvalidTopic},
		{CreateTopicRequest{Name: "t", NumPartitions: 0, ReplicationFactor: 1}, ErrInvalidPartitions},
		{CreateTopicRequest{Name: "t", NumPartitions: -5, ReplicationFactor: 1}, ErrInvalidPartitions},
		{CreateTopicRequest{Name: "t", NumPartitions: maxPartitionsPerTopic + 1, ReplicationFactor: 1}, ErrInvalidPartitions},
		{CreateTopicRequest{Name: "t", NumPartitions: 1, ReplicationFactor: 2}, ErrInvalidReplicationFactor},
		{CreateTopicRequest{Name: "t", NumPartitions: 1, ReplicationFactor: 0}, ErrInvalidReplicationFactor},
		{CreateTopicRequest{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "x"}}, ErrInvalidConfig},
		{CreateTopicRequest{Name: "t", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]string{"nope": "1"}}, ErrInvalidConfig},
		{CreateTopicRequest{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignment: map[int32][]int32{0: {2}}}, ErrInvalidReplicaAssignment},
		{CreateTopicRequest{Name: "t", NumPartitions: -1, ReplicationFactor: -1, Assignment: map[int32][]int32{0: {1}, 5: {1}}}, ErrInvalidReplicaAssignment},
	}
	for _, tt := range tests {
		if _, err := b.CreateTopic(ctx, tt.req); !errors.Is(err, tt.want) {
			t.Errorf("%+v: err = %v, want %v", tt.req, err, tt.want)
		}
	}
	// Defaults and validate-only.
	ti, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "v", NumPartitions: -1, ReplicationFactor: -1, ValidateOnly: true})
	if err != nil || len(ti.Partitions) != 2 {
		t.Fatalf("validate only: %+v %v", ti, err)
	}
	if _, ok := b.Topic("v"); ok {
		t.Fatal("validate-only created the topic")
	}
	ti, err = b.CreateTopic(ctx, CreateTopicRequest{Name: "__internal", NumPartitions: -1, ReplicationFactor: -1, Assignment: map[int32][]int32{0: {1}}})
	if err != nil || !ti.Internal || len(ti.Partitions) != 1 {
		t.Fatalf("%+v %v", ti, err)
	}
}

func TestRestartReplaysMetadata(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(dir)
	b := startBroker(t, cfg)
	t1, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "t1", NumPartitions: 2, ReplicationFactor: 1, Configs: map[string]string{"segment.bytes": "2048"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "t2", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreatePartitions(ctx, "t1", 4, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := b.CreatePartitions(ctx, "t1", 3, nil, false); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("shrink: %v", err)
	}
	if err := b.CreatePartitions(ctx, "t1", 5, [][]int32{{9}}, false); !errors.Is(err, ErrInvalidReplicaAssignment) {
		t.Fatalf("bad assignment: %v", err)
	}
	if err := b.DeleteTopic(ctx, "t2"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if _, err := b.Produce(ctx, "t1", 3, batch(2, -1, -1, -1)); err != nil {
			t.Fatal(err)
		}
	}
	cluster := b.ClusterID()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = startBroker(t, cfg)
	defer b.Close()
	if b.ClusterID() != cluster {
		t.Fatal("cluster id changed")
	}
	got, ok := b.Topic("t1")
	if !ok || got.ID != t1.ID || len(got.Partitions) != 4 || got.Configs["segment.bytes"] != "2048" {
		t.Fatalf("%+v", got)
	}
	if _, ok := b.Topic("t2"); ok {
		t.Fatal("deleted topic came back")
	}
	p, err := b.Partition("t1", 3)
	if err != nil {
		t.Fatal(err)
	}
	if off := p.Offsets(); off.LogEnd != 8 || off.HighWatermark != 8 {
		t.Fatalf("offsets after restart: %+v", off)
	}
	entries, err := b.TopicConfig("t1")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		if e.Name == "segment.bytes" {
			found = true
			if e.Value == nil || *e.Value != "2048" || e.Source != 1 {
				t.Fatalf("%+v", e)
			}
		}
	}
	if !found {
		t.Fatal("segment.bytes not described")
	}
}

func TestNodeIDMismatch(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, testConfig(dir))
	b.Close()
	cfg := testConfig(dir)
	cfg.NodeID = 2
	m := openLogs(t, dir)
	defer m.Close()
	if _, err := NewBroker(cfg, m); !errors.Is(err, ErrMetaProperties) {
		t.Fatalf("err = %v", err)
	}
}

// A torn record at the end of the metadata raft log loses only that
// command.
func TestTornMetadataTail(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, testConfig(dir))
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "kept", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	path := filepath.Join(dir, raftstore.LogFileName)
	fi, _ := os.Stat(path)
	data, _ := encodeCommandEntry(Command{Type: CmdCreateTopic, Topic: "torn", TopicID: [16]byte{1}, Partitions: []Assignment{{Partition: 0, Replicas: []int32{1}}}})
	rec, _ := raftstore.FrameRecord(nil, transport.EncodeLog(nil, &raft.Log{Index: 1 << 30, Term: 1 << 20, Type: raft.LogCommand, Data: data}))
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(rec[:len(rec)-1])
	f.Close()

	b = startBroker(t, testConfig(dir))
	defer b.Close()
	if _, ok := b.Topic("kept"); !ok {
		t.Fatal("lost a whole command")
	}
	if _, ok := b.Topic("torn"); ok {
		t.Fatal("applied a torn command")
	}
	if fi2, _ := os.Stat(path); fi2.Size() < fi.Size() {
		t.Fatalf("truncated too far: %d vs %d", fi2.Size(), fi.Size())
	}
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "after", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
}

// A foundation-era metadata.log is carried into the raft log once.
func TestMetadataLogMigrated(t *testing.T) {
	dir := t.TempDir()
	ml, _, err := openMetadataLog(segment.OSFS{}, dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Command{
		{Type: CmdRegisterBroker, Broker: &BrokerInfo{NodeID: 1, Host: "127.0.0.1", Port: 9092}},
		{Type: CmdCreateTopic, Topic: "old", TopicID: [16]byte{7}, Partitions: []Assignment{{Partition: 0, Replicas: []int32{1}}}},
	} {
		if err := ml.Append(c); err != nil {
			t.Fatal(err)
		}
	}
	ml.Close()
	for i := 0; i < 2; i++ {
		b := startBroker(t, testConfig(dir))
		if got, ok := b.Topic("old"); !ok || got.ID != [16]byte{7} {
			t.Fatalf("start %d: topic not migrated: %+v", i, got)
		}
		if _, err := b.Partition("old", 0); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	if _, err := os.Stat(filepath.Join(dir, metadataLogName+".migrated")); err != nil {
		t.Fatal(err)
	}
}

// An interrupted deletion (DeleteTopic persisted, logs still on disk) is
// finished at start.
func TestInterruptedDeleteFinishedAtStart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, testConfig(dir))
	ti, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "gone", NumPartitions: 2, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Simulate a crash after the DeleteTopic command, before its effects:
	// commit it while local effects are off (as during replay at start).
	b.ready.Store(false)
	b.mu.Lock()
	_, err = b.commitLocked(Command{Type: CmdDeleteTopic, Topic: "gone", TopicID: ti.ID})
	b.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := os.Stat(filepath.Join(dir, "gone-0")); err != nil {
		t.Fatalf("setup: %v", err)
	}
	b = startBroker(t, testConfig(dir))
	defer b.Close()
	if _, ok := b.Topic("gone"); ok {
		t.Fatal("topic back")
	}
	for _, p := range []string{"gone-0", "gone-1"} {
		if _, err := os.Stat(filepath.Join(dir, p)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left: %v", p, err)
		}
	}
	if len(b.img.Load().pending) != 0 {
		t.Fatal("pending deletion not recorded as done")
	}
}

func TestProducerIDsMonotonicAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	last := int64(-1)
	for round := 0; round < 3; round++ {
		b := startBroker(t, testConfig(dir))
		for i := 0; i < producerIDBlockSize+5; i++ {
			id, err := b.AllocateProducerID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if id <= last {
				t.Fatalf("round %d: id %d after %d", round, id, last)
			}
			last = id
		}
		b.Close()
	}
}

func TestAutoCreateAndDisabledDeletion(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir())
	cfg.DeleteTopicEnable = false
	b := startBroker(t, cfg)
	ti, err := b.AutoCreate(ctx, "auto")
	if err != nil || len(ti.Partitions) != 2 {
		t.Fatalf("%+v %v", ti, err)
	}
	if again, err := b.AutoCreate(ctx, "auto"); err != nil || again.ID != ti.ID {
		t.Fatal("auto-create of an existing topic")
	}
	if _, err := b.AutoCreate(ctx, "bad/name"); !errors.Is(err, ErrInvalidTopic) {
		t.Fatal(err)
	}
	if err := b.DeleteTopic(ctx, "auto"); !errors.Is(err, ErrTopicDeletionDisabled) {
		t.Fatal(err)
	}
	b.Close()
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "x", NumPartitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrShuttingDown) {
		t.Fatalf("after close: %v", err)
	}

	cfg = testConfig(t.TempDir())
	cfg.AutoCreateTopics = false
	b = startBroker(t, cfg)
	defer b.Close()
	if _, err := b.AutoCreate(ctx, "auto"); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatal(err)
	}
}

func TestDuplicateIdempotentBatch(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, testConfig(t.TempDir()))
	defer b.Close()
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "idem", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	pid, _ := b.AllocateProducerID(ctx)
	first, err := b.Produce(ctx, "idem", 0, batch(2, pid, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(ctx, "idem", 0, batch(1, -1, -1, -1)); err != nil {
		t.Fatal(err)
	}
	dup, err := b.Produce(ctx, "idem", 0, batch(2, pid, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !dup.Duplicate || dup.BaseOffset != first.BaseOffset || dup.LastOffset != first.LastOffset {
		t.Fatalf("dup %+v, first %+v", dup, first)
	}
}

func TestDescribeConfigs(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.BrokerProps = map[string]string{"log.retention.hours": "1", "listeners": "PLAINTEXT://127.0.0.1:9092"}
	b := startBroker(t, cfg)
	defer b.Close()
	if _, err := b.CreateTopic(context.Background(), CreateTopicRequest{Name: "c", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	entries, err := b.TopicConfig("c")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name == "retention.ms" && (e.Value == nil || *e.Value != "3600000" || e.Source != 4 || len(e.Synonyms) != 2) {
			t.Fatalf("%+v", e)
		}
	}
	if _, err := b.TopicConfig("missing"); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatal(err)
	}
	names := map[string]ConfigEntry{}
	for _, e := range b.BrokerConfigEntries() {
		names[e.Name] = e
	}
	for _, n := range []string{"node.id", "log.dirs", "num.partitions", "log.retention.hours", "listeners", "message.max.bytes"} {
		if _, ok := names[n]; !ok {
			t.Errorf("broker config %s missing", n)
		}
	}
	if e := names["log.retention.hours"]; e.Source != 4 || *e.Value != "1" {
		t.Errorf("%+v", e)
	}
}

// Many goroutines create, produce, read metadata and delete at once; run
// with -race.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, testConfig(t.TempDir()))
	defer b.Close()
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "shared", NumPartitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 4; g++ {
		wg.Add(3)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				name := fmt.Sprintf("t%d-%d", g, i)
				if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: name, NumPartitions: 1, ReplicationFactor: 1}); err != nil {
					errs <- err
					return
				}
				if i%2 == 0 {
					if err := b.DeleteTopic(ctx, name); err != nil {
						errs <- err
						return
					}
				}
			}
		}(g)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if _, err := b.Produce(ctx, "shared", int32(i%2), batch(1, -1, -1, -1)); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				for _, ti := range b.Topics() {
					_ = len(ti.Partitions)
				}
				if _, err := b.AllocateProducerID(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(b.Topics()); n != 1+4*5 {
		t.Fatalf("%d topics", n)
	}
	var total int64
	for p := int32(0); p < 2; p++ {
		lp, _ := b.Partition("shared", p)
		total += lp.Offsets().HighWatermark
	}
	if total != 4*50 {
		t.Fatalf("%d records committed, want 200", total)
	}
}

func TestSetTopicConfigsTakesEffect(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, testConfig(dir))
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "cfg", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	big := batch(20, -1, -1, -1)
	if err := b.SetTopicConfigs(ctx, "cfg", map[string]string{"max.message.bytes": "64"}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(ctx, "cfg", 0, batch(20, -1, -1, -1)); err != nil {
		t.Fatalf("validate-only changed the config: %v", err)
	}
	if err := b.SetTopicConfigs(ctx, "cfg", map[string]string{"max.message.bytes": "x"}, false); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal(err)
	}
	if err := b.SetTopicConfigs(ctx, "nope", nil, false); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatal(err)
	}
	if err := b.SetTopicConfigs(ctx, "cfg", map[string]string{"max.message.bytes": "64"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(ctx, "cfg", 0, big); !errors.Is(err, log.ErrBatchTooLarge) {
		t.Fatalf("big batch after max.message.bytes=64: %v", err)
	}
	b.Close()
	// The override survives a restart and is applied at open.
	b = startBroker(t, testConfig(dir))
	defer b.Close()
	if ti, _ := b.Topic("cfg"); ti.Configs["max.message.bytes"] != "64" {
		t.Fatalf("%v", ti.Configs)
	}
	if _, err := b.Produce(ctx, "cfg", 0, batch(20, -1, -1, -1)); !errors.Is(err, log.ErrBatchTooLarge) {
		t.Fatalf("after restart: %v", err)
	}
}

// Partition directories of no topic are not adopted by a new topic of the
// same name.
func TestStrayDirectoryNotAdopted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := openLogs(t, dir)
	p, err := m.Open(log.TopicPartition{Topic: "stray", Partition: 0}, log.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(batch(5, -1, -1, -1), 0); err != nil {
		t.Fatal(err)
	}
	m.Close()
	b := startBroker(t, testConfig(dir))
	defer b.Close()
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "stray", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	lp, _ := b.Partition("stray", 0)
	if off := lp.Offsets(); off.LogEnd != 0 {
		t.Fatalf("new topic adopted stray data: %+v", off)
	}
}

func TestCreatePartitionsAssignmentAndValidateOnly(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, testConfig(t.TempDir()))
	defer b.Close()
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "grow", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreatePartitions(ctx, "grow", 3, [][]int32{{1}, {1}}, true); err != nil {
		t.Fatal(err)
	}
	if ti, _ := b.Topic("grow"); len(ti.Partitions) != 1 {
		t.Fatal("validate-only grew the topic")
	}
	if err := b.CreatePartitions(ctx, "grow", 3, [][]int32{{1}}, false); !errors.Is(err, ErrInvalidReplicaAssignment) {
		t.Fatal(err)
	}
	if err := b.CreatePartitions(ctx, "grow", 3, [][]int32{{1}, {1, 1}}, false); !errors.Is(err, ErrInvalidReplicaAssignment) {
		t.Fatal(err)
	}
	if err := b.CreatePartitions(ctx, "missing", 3, nil, false); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatal(err)
	}
	if err := b.CreatePartitions(ctx, "grow", 3, [][]int32{{1}, {1}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(ctx, "grow", 2, batch(1, -1, -1, -1)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Partition("grow", 3); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatal(err)
	}
}

func TestPartitionBudget(t *testing.T) {
	im := newImage()
	im.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
		topics["big"] = &TopicInfo{Name: "big", Partitions: make([]PartitionInfo, maxPartitionsPerBroker-1)}
	})
	if err := checkPartitionBudget(im, 1); err != nil {
		t.Fatal(err)
	}
	if err := checkPartitionBudget(im, 2); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatal(err)
	}
}

// Producers racing a topic deletion all get an answer: an entry left in
// the apply queue of a partition group that shuts down is never answered
// by raft, and its producer must not wait for it forever (the connection
// would stall and the broker's Close hang). Several cycles, 4 producers
// each, every Produce call bounded.
func TestProduceRacingDeletionAlwaysAnswers(t *testing.T) {
	ctx := context.Background()
	b := startBroker(t, testConfig(t.TempDir()))
	defer b.Close()
	for cycle := 0; cycle < 5; cycle++ {
		if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "racy", NumPartitions: 2, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var acked atomic.Int64
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					start := time.Now()
					_, err := b.Produce(pctx, "racy", int32(w%2), batch(2, -1, -1, -1))
					cancel()
					if took := time.Since(start); took > 20*time.Second {
						t.Errorf("cycle %d: a produce took %v (%v)", cycle, took, err)
						return
					}
					if err == nil {
						acked.Add(1)
					} else if errors.Is(err, ErrUnknownTopicOrPartition) {
						return // deleted
					}
				}
			}(w)
		}
		time.Sleep(time.Duration(20+10*cycle) * time.Millisecond)
		if err := b.DeleteTopic(ctx, "racy"); err != nil {
			t.Fatal(err)
		}
		close(stop)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			t.Fatalf("cycle %d: producers still waiting 40s after the deletion", cycle)
		}
		t.Logf("cycle %d: %d produces acknowledged before the deletion", cycle, acked.Load())
	}
}
