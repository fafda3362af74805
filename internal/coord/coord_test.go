package coord

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication"
)

// These tests run the core over a real single-node broker on disk with a
// small user of it: a key/value store whose entries expire after ttl of
// the (fake) clock's time, written with Write and replayed at load.

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openBroker(t *testing.T, dir string) *replication.Broker {
	t.Helper()
	m, err := log.OpenManager(log.ManagerOptions{Dir: dir, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := replication.NewBroker(replication.BrokerConfig{
		NodeID: 1, AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092, DataDir: dir,
		NumPartitions: 1, DefaultReplicationFactor: 1, DeleteTopicEnable: true, Logger: quiet(),
	}, m)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	return b
}

const ttl = 5 * time.Second

type kvState struct {
	sh      *Shard[*kvState]
	entries map[string]time.Time // key -> written at
	ticks   []time.Time
	mu      *sync.Mutex // guards ticks for the test's reads
	stopped bool
}

func (s *kvState) Replay(r Decoded, _ time.Time) error {
	if r.Value == nil {
		delete(s.entries, string(r.Key))
		return nil
	}
	ms, err := strconv.ParseInt(string(r.Value), 10, 64)
	if err != nil {
		return nil // skipped, as users do
	}
	s.entries[string(r.Key)] = time.UnixMilli(ms)
	return nil
}

func (s *kvState) Loaded() []any { return []any{"entries", len(s.entries)} }

func (s *kvState) Tick(now time.Time) {
	s.mu.Lock()
	s.ticks = append(s.ticks, now)
	s.mu.Unlock()
	var recs []Record
	for k, at := range s.entries {
		if now.Sub(at) >= ttl {
			recs = append(recs, Record{Key: []byte(k)})
			delete(s.entries, k)
		}
	}
	_ = s.sh.Write(recs)
}

func (s *kvState) Stopped() { s.stopped = true }

func newKV(b *replication.Broker, clk Clock, mu *sync.Mutex) *Coordinator[*kvState] {
	return New(Config[*kvState]{
		Topic: "__kv_state", NumPartitions: 3, ReplicationFactor: 1,
		TopicConfigs: map[string]string{"cleanup.policy": "compact"},
		NewState: func(sh *Shard[*kvState]) *kvState {
			return &kvState{sh: sh, entries: map[string]time.Time{}, mu: mu}
		},
		TickInterval: time.Second, RequireElectedEpoch: true, Clock: clk, Logger: quiet(),
	}, b)
}

// route polls (bounded) until key's shard is loaded.
func route(t *testing.T, c *Coordinator[*kvState], key string) *Shard[*kvState] {
	t.Helper()
	var sh *Shard[*kvState]
	var code int16
	if !testwait.Until(10*time.Second, func() bool {
		sh, code = c.Route(key)
		return code == 0
	}) {
		t.Fatalf("route %q: code %d", key, code)
	}
	return sh
}

func put(t *testing.T, c *Coordinator[*kvState], key string) {
	t.Helper()
	sh := route(t, c, key)
	got, code, err := Call(context.Background(), sh, 0, func(s *kvState, reply func(string)) {
		now := c.Clock().Now()
		if err := s.sh.Write([]Record{{Key: []byte(key), Value: []byte(strconv.FormatInt(now.UnixMilli(), 10))}}); err != nil {
			reply("write failed")
			return
		}
		s.entries[key] = now
		reply("ok")
	})
	if err != nil || code != 0 || got != "ok" {
		t.Fatalf("put %q: %q %d %v", key, got, code, err)
	}
}

func has(t *testing.T, c *Coordinator[*kvState], key string) bool {
	t.Helper()
	var ok bool
	if code, err := Do(context.Background(), route(t, c, key), 0, func(s *kvState) { _, ok = s.entries[key] }); err != nil || code != 0 {
		t.Fatalf("has %q: %d %v", key, code, err)
	}
	return ok
}

// waitFor polls cond (bounded).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, cond, "%s", what)
}

// TestFakeClockDrivesTicksAndTimeouts: ticks fire only when the fake clock
// passes a tick interval, the user's timeout (entry expiry) acts on fake
// time, and what it wrote is what a reload replays.
func TestFakeClockDrivesTicksAndTimeouts(t *testing.T) {
	dir := t.TempDir()
	b := openBroker(t, dir)
	defer b.Close()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := NewFake(start)
	var mu sync.Mutex
	c := newKV(b, clk, &mu)
	if co := c.Find(context.Background(), "a"); co.ErrorCode != 0 || co.NodeID != 1 {
		t.Fatalf("find: %+v", co)
	}
	put(t, c, "a")
	sh := route(t, c, "a")
	ticks := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(sh.State().ticks)
	}
	// The shard's ticker is armed once it has loaded; nothing else waits.
	waitFor(t, "the shard's ticker", func() bool { return clk.Waiters() >= 1 })

	clk.Advance(999 * time.Millisecond)
	if has(t, c, "a"); ticks() != 0 {
		t.Fatalf("ticked before the interval: %d", ticks())
	}
	clk.Advance(time.Millisecond)
	waitFor(t, "first tick", func() bool { return ticks() == 1 })
	mu.Lock()
	if got := sh.State().ticks[0]; !got.Equal(start.Add(time.Second)) {
		t.Errorf("tick at %v, want %v", got, start.Add(time.Second))
	}
	mu.Unlock()
	if !has(t, c, "a") {
		t.Fatal("a expired after 1 s of a 5 s ttl")
	}
	// 4 s more: the entry's ttl is reached on the 5th tick, which
	// tombstones it through Write.
	for i := 2; i <= 5; i++ {
		clk.Advance(time.Second)
		waitFor(t, "tick "+strconv.Itoa(i), func() bool { return ticks() == i })
	}
	if has(t, c, "a") {
		t.Fatal("a still there after its ttl of fake time")
	}
	put(t, c, "b")

	// A new coordinator over the same log replays it: a is gone, b is back.
	c.Close()
	if _, code := c.Route("b"); code != kerr.NotCoordinator.Code {
		t.Fatalf("route after Close: %d, want NOT_COORDINATOR", code)
	}
	if !sh.State().stopped {
		t.Error("Stopped not called")
	}
	c2 := newKV(b, clk, &mu)
	defer c2.Close()
	if has(t, c2, "a") || !has(t, c2, "b") {
		t.Fatal("reload did not replay the writes")
	}
}

// TestNewEpochReloads: a partition info at a newer leader epoch stops the
// old shard and loads a new one, which replays the old one's writes.
func TestNewEpochReloads(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	var mu sync.Mutex
	c := newKV(b, NewFake(time.Unix(1000, 0)), &mu)
	defer c.Close()
	if _, err := c.EnsureTopic(context.Background()); err != nil {
		t.Fatal(err)
	}
	put(t, c, "k")
	old := route(t, c, "k")
	pi, _ := c.PartitionOf("k")
	if _, code := c.ShardFor(replicationInfo(pi.Partition, 1, 0)); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("placeholder epoch 0: code %d", code)
	}
	if _, code := c.ShardFor(replicationInfo(pi.Partition, 2, pi.LeaderEpoch)); code != kerr.NotCoordinator.Code {
		t.Fatalf("not leader: code %d", code)
	}
	pi.LeaderEpoch++
	sh, code := c.RoutePartition(pi)
	if code != 0 || sh == old || sh.Epoch() != pi.LeaderEpoch {
		t.Fatalf("reload at epoch %d: %v %d", pi.LeaderEpoch, sh, code)
	}
	<-old.Done()
	var ok bool
	if code, err := Do(context.Background(), sh, 0, func(s *kvState) { _, ok = s.entries["k"] }); code != 0 || err != nil || !ok {
		t.Fatalf("new epoch's shard lacks k: %d %v %v", code, err, ok)
	}
}

func replicationInfo(p, leader, epoch int32) replication.PartitionInfo {
	return replication.PartitionInfo{Partition: p, Leader: leader, LeaderEpoch: epoch}
}

func TestPartitionFor(t *testing.T) {
	// Kafka's placement: abs(String.hashCode) % n.
	for _, c := range []struct {
		key  string
		n    int32
		want int32
	}{{"", 50, 0}, {"group", 50, 47}, {"polygenelubricants", 50, 0}} {
		if got := PartitionFor(c.key, c.n); got != c.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", c.key, c.n, got, c.want)
		}
	}
}

// TestShardPanicUnloadsOnlyTheShard: a call that panics (a bug some input
// triggers) fails its request with NOT_COORDINATOR and unloads its shard;
// the process goes on, and the next request reloads the shard from the
// log with everything written before.
func TestShardPanicUnloadsOnlyTheShard(t *testing.T) {
	b := openBroker(t, t.TempDir())
	defer b.Close()
	var mu sync.Mutex
	c := newKV(b, NewFake(time.Unix(1000, 0)), &mu)
	defer c.Close()
	if _, err := c.EnsureTopic(context.Background()); err != nil {
		t.Fatal(err)
	}
	put(t, c, "k")
	sh := route(t, c, "k")
	before := Panics.Load()
	_, code, err := Call(context.Background(), sh, 0, func(s *kvState, reply func(string)) {
		var m map[string]int
		m["boom"]++ // nil map: panics
		reply("unreachable")
	})
	if err != nil || code != kerr.NotCoordinator.Code {
		t.Fatalf("panicking call: code %d err %v, want NOT_COORDINATOR", code, err)
	}
	<-sh.Done()
	if Panics.Load() != before+1 {
		t.Fatalf("panics counted: %d, want %d", Panics.Load(), before+1)
	}
	if !has(t, c, "k") {
		t.Fatal("the reloaded shard lost k")
	}
	put(t, c, "k2")
}
