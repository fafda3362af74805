package replication

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication/raftconf"
	"github.com/strata-io/strata/segment"
)

// checkBatches reads every batch of p and compares it with want (the
// producer's bytes): the CRC and everything it covers must be the
// producer's, and each batch carries the leader epoch stamped by the
// group (its term, at least 1).
func checkBatches(t *testing.T, p *log.Partition, want map[int64][]byte) {
	t.Helper()
	rr, err := p.Read(0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	spans, err := segment.SplitBatches(rr.Records, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != len(want) {
		t.Fatalf("%d batches, want %d", len(spans), len(want))
	}
	for _, sp := range spans {
		b := rr.Records[sp[0]:sp[1]]
		h, err := segment.ValidateBatch(b)
		if err != nil {
			t.Fatalf("batch at %d: %v", h.BaseOffset, err)
		}
		w, ok := want[h.BaseOffset]
		if !ok {
			t.Fatalf("unexpected batch at %d", h.BaseOffset)
		}
		if !bytes.Equal(b[17:], w[17:]) {
			t.Fatalf("batch at %d differs from what the producer sent", h.BaseOffset)
		}
		if h.LeaderEpoch < 1 {
			t.Fatalf("batch at %d has leader epoch %d, want the group's term", h.BaseOffset, h.LeaderEpoch)
		}
	}
}

// Protocol reuses a Produce body once Produce returns (pooled buffers):
// the broker's partition group must hold no reference to it. Producers
// overwrite their buffer right after each Produce; the log, read back
// and after a restart, holds what they sent.
func TestProduceThroughRaftKeepsNoBuffer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := startBroker(t, testConfig(dir))
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "r", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	want := map[int64][]byte{}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 4096)
			for i := 0; i < 25; i++ {
				orig := batch(1+i%4, -1, -1, -1)
				buf = append(buf[:0], orig...)
				res, err := b.Produce(ctx, "r", 0, buf)
				if err != nil {
					errs <- err
					return
				}
				for k := range buf {
					buf[k] = 0xA5 // the pool hands the buffer to the next request
				}
				mu.Lock()
				want[res.BaseOffset] = orig
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	p, err := b.Partition("r", 0)
	if err != nil {
		t.Fatal(err)
	}
	checkBatches(t, p, want)
	end := p.Offsets().LogEnd
	if hw := p.Offsets().HighWatermark; hw != end {
		t.Fatalf("high watermark %d, log end %d", hw, end)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// Restart: the group's log is rebuilt over the segments, offsets go
	// on, the term (leader epoch) grows.
	b = startBroker(t, testConfig(dir))
	defer b.Close()
	p, err = b.Partition("r", 0)
	if err != nil {
		t.Fatal(err)
	}
	checkBatches(t, p, want)
	first, _ := p.BatchAt(0)
	h0, _ := segment.ParseHeader(first)
	res, err := b.Produce(ctx, "r", 0, batch(2, -1, -1, -1))
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != end || res.LastOffset != end+1 {
		t.Fatalf("after restart: %+v, want base %d", res, end)
	}
	nb, _ := p.BatchAt(end)
	h1, _ := segment.ParseHeader(nb)
	if h1.LeaderEpoch <= h0.LeaderEpoch {
		t.Fatalf("leader epoch %d after restart, %d before", h1.LeaderEpoch, h0.LeaderEpoch)
	}
	if hw := p.Offsets().HighWatermark; hw != end+2 {
		t.Fatalf("high watermark %d, want %d", hw, end+2)
	}
}

// The same through a three-replica group: after producers reuse their
// buffers, every replica's segments hold the original bytes.
func TestPartitionGroupProduceKeepsNoBufferRF3(t *testing.T) {
	// It produces through one leader's raft, so a leader that steps down
	// under load (fastTiming's 200 ms lease at load 30) would fail it:
	// timing that a loaded machine keeps (what is tested is the buffer).
	pc := newPartitionClusterT(t, 3, raftconf.Timing{Heartbeat: time.Second, Election: time.Second, Commit: 10 * time.Millisecond, Lease: time.Second}, 4096)
	leader, err := pc.h.Leader(0, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	g := &partitionGroup{tp: log.TopicPartition{Topic: "t"}, raft: pc.h.Raft(leader, 0), voters: []int32{0, 1, 2}}
	want := map[int64][]byte{}
	buf := make([]byte, 0, 4096)
	var next int64
	for i := 0; i < 30; i++ {
		orig := batch(1+i%3, -1, -1, -1)
		buf = append(buf[:0], orig...)
		res, err := g.produce(context.Background(), buf)
		if err != nil {
			t.Fatal(err)
		}
		for k := range buf {
			buf[k] = 0x5A
		}
		want[res.BaseOffset] = orig
		next = res.LastOffset + 1
	}
	pc.waitConverged(t, next, 0, 1, 2)
	for i := range pc.parts {
		checkBatches(t, pc.parts[i], want)
	}
}
