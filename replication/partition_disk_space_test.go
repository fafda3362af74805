package replication

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/log"
)

// Below strata.log.dir.min.free.bytes produce is refused with a storage
// error before anything is written, reads go on, LogDirError reports it,
// and produce works again once the space is back over the resume mark.
func TestProduceRefusedBelowFreeSpaceThreshold(t *testing.T) {
	ctx := context.Background()
	var free atomic.Int64
	free.Store(1 << 30)
	cfg := testConfig(t.TempDir())
	cfg.MinFreeBytes = 100 << 20
	var looks atomic.Int64 // how often the broker has read the free space
	cfg.FreeSpace = func(string) (int64, error) { looks.Add(1); return free.Load(), nil }
	b := startBroker(t, cfg)
	defer b.Close()
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "full", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(ctx, "full", 0, batch(2, -1, -1, -1)); err != nil {
		t.Fatal(err)
	}
	free.Store(50 << 20)
	testwait.For(t, 10*time.Second, func() bool { return b.LogDirError() != nil }, "the directory never became full")
	_, err := b.Produce(ctx, "full", 0, batch(1, -1, -1, -1))
	if !errors.Is(err, log.ErrStorage) {
		t.Fatalf("produce on a full directory: %v", err)
	}
	lp := b.LocalLog("full", 0)
	if lp == nil || lp.Offsets().LogEnd != 2 {
		t.Fatalf("refused produce wrote: %+v", lp.Offsets())
	}
	// Over the threshold but under the resume mark: still full.
	free.Store(105 << 20)
	// The state must not change: let the broker look at the new figure
	// three times, then check.
	seen := looks.Load()
	testwait.For(t, 10*time.Second, func() bool { return looks.Load() >= seen+3 }, "the broker stopped checking the free space")
	if b.LogDirError() == nil {
		t.Fatal("resumed below the resume mark (threshold + 10%)")
	}
	free.Store(200 << 20)
	testwait.For(t, 10*time.Second, func() bool { return b.LogDirError() == nil }, "the directory never resumed")
	res, err := b.Produce(ctx, "full", 0, batch(1, -1, -1, -1))
	if err != nil || res.BaseOffset != 2 {
		t.Fatalf("produce after space returned: %+v %v", res, err)
	}
}

// A lone controller below its threshold refuses CreateTopics and
// CreatePartitions with a metadata storage error (UNKNOWN_SERVER_ERROR
// with the reason, as Kafka answers a metadata log it cannot write), not
// KAFKA_STORAGE_ERROR; ValidateOnly and reads still work; once space
// returns both are accepted.
func TestCreateTopicRefusedOnFullController(t *testing.T) {
	ctx := context.Background()
	var free atomic.Int64
	free.Store(1 << 30)
	cfg := testConfig(t.TempDir())
	cfg.MinFreeBytes = 100 << 20
	cfg.FreeSpace = func(string) (int64, error) { return free.Load(), nil }
	b := startBroker(t, cfg)
	defer b.Close()
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "before", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	free.Store(0)
	testwait.For(t, 10*time.Second, func() bool { return b.LogDirError() != nil }, "the directory never became full")
	_, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "during", NumPartitions: 1, ReplicationFactor: 1})
	if !errors.Is(err, ErrMetadataStorage) || errors.Is(err, log.ErrStorage) {
		t.Fatalf("CreateTopic on a full controller: %v", err)
	}
	if err := b.CreatePartitions(ctx, "before", 2, nil, false); !errors.Is(err, ErrMetadataStorage) {
		t.Fatalf("CreatePartitions on a full controller: %v", err)
	}
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "during", NumPartitions: 1, ReplicationFactor: 1, ValidateOnly: true}); err != nil {
		t.Fatalf("ValidateOnly on a full controller: %v", err)
	}
	if _, ok := b.Topic("during"); ok {
		t.Fatal("a refused topic exists")
	}
	free.Store(1 << 30)
	testwait.For(t, 10*time.Second, func() bool { return b.LogDirError() == nil }, "the directory never resumed")
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "during", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatalf("CreateTopic once space returned: %v", err)
	}
	if err := b.CreatePartitions(ctx, "before", 2, nil, false); err != nil {
		t.Fatalf("CreatePartitions once space returned: %v", err)
	}
}
