package coord

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/replication"
)

// State is what a user keeps per loaded partition: one value per shard,
// touched only on that shard's goroutine (calls, Replay, Loaded, Tick,
// Stopped all run there, one at a time).
type State interface {
	// Replay applies one record of the partition, in log order, while
	// the shard loads; now is the clock's time when the load started.
	// A record that does not decode should be logged and skipped (one
	// bad record must not make the partition unavailable); an error
	// fails the load.
	Replay(r Decoded, now time.Time) error
	// Loaded runs once the partition is replayed, before any call, and
	// returns extra slog attributes for the "loaded" log line.
	Loaded() []any
	// Tick runs every Config.TickInterval while the shard is loaded and
	// this broker still leads the partition at the shard's epoch.
	Tick(now time.Time)
	// Stopped runs as the shard's goroutine ends (load failure, failed
	// write, lost leadership, newer epoch, Close): answer whatever waits
	// on state outside the core's calls.
	Stopped()
}

// Config configures a Coordinator.
type Config[S State] struct {
	// Name names the coordinator in log lines ("group coordinator").
	Name string
	// Topic is the internal topic; its partition count is read from the
	// topic, so it is fixed at creation as Kafka's is.
	Topic string
	// NumPartitions, ReplicationFactor (capped at the broker count) and
	// TopicConfigs create Topic on first use (EnsureTopic).
	NumPartitions     int32
	ReplicationFactor int16
	TopicConfigs      map[string]string
	// NewState returns the user's state of a shard being created (not
	// loaded yet); sh gives the partition, epoch and Write.
	NewState func(sh *Shard[S]) S
	// TickInterval is the period of State.Tick and of the leadership
	// check (100 ms when zero).
	TickInterval time.Duration
	// LoadTimeout bounds a load's wait for the partition's tail to
	// commit (30 s when zero).
	LoadTimeout time.Duration
	// LoadWait is how long Route waits for a load before answering
	// COORDINATOR_LOAD_IN_PROGRESS (2 s when zero).
	LoadWait time.Duration
	// RequireElectedEpoch refuses a shard at leader epoch 0, the
	// placeholder of a partition whose first leader is not recorded yet
	// (COORDINATOR_LOAD_IN_PROGRESS): a shard started there is replaced
	// at the elected epoch, and whatever it held only in memory is lost.
	RequireElectedEpoch bool
	Clock               Clock        // nil = Real()
	Logger              *slog.Logger // nil = slog.Default()
}

// Coordinator owns the shards of one internal topic's partitions that
// this broker leads. Methods are safe for concurrent use.
type Coordinator[S State] struct {
	cfg    Config[S]
	broker *replication.Broker

	createMu sync.Mutex // serializes creation of the topic

	mu     sync.Mutex
	shards map[int32]*Shard[S] // protected by mu
	closed bool                // protected by mu
}

// New returns a coordinator of cfg.Topic over broker. Nothing is loaded
// until a request routes to a partition.
func New[S State](cfg Config[S], broker *replication.Broker) *Coordinator[S] {
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 100 * time.Millisecond
	}
	if cfg.LoadTimeout <= 0 {
		cfg.LoadTimeout = 30 * time.Second
	}
	if cfg.LoadWait <= 0 {
		cfg.LoadWait = 2 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Topic + " coordinator"
	}
	return &Coordinator[S]{cfg: cfg, broker: broker, shards: map[int32]*Shard[S]{}}
}

// Clock is the coordinator's clock.
func (c *Coordinator[S]) Clock() Clock { return c.cfg.Clock }

// LoadWait is how long a request waits for a load (Config.LoadWait).
func (c *Coordinator[S]) LoadWait() time.Duration { return c.cfg.LoadWait }

// Close stops every shard and waits for them. Later requests are answered
// NOT_COORDINATOR.
func (c *Coordinator[S]) Close() {
	c.mu.Lock()
	c.closed = true
	shards := make([]*Shard[S], 0, len(c.shards))
	for _, s := range c.shards {
		shards = append(shards, s)
	}
	c.mu.Unlock()
	for _, s := range shards {
		s.Halt()
		<-s.done
	}
}

func (c *Coordinator[S]) forget(s *Shard[S]) {
	c.mu.Lock()
	if c.shards[s.partition] == s {
		delete(c.shards, s.partition)
	}
	c.mu.Unlock()
}

// Leads reports whether this broker leads partition p at epoch.
func (c *Coordinator[S]) Leads(p, epoch int32) bool {
	t, ok := c.broker.Topic(c.cfg.Topic)
	if !ok || int(p) >= len(t.Partitions) {
		return false
	}
	pi := t.Partitions[p]
	return pi.Leader == c.broker.NodeID() && pi.LeaderEpoch == epoch
}

// PartitionOf is the partition of key in the topic as it exists (false
// when the topic does not).
func (c *Coordinator[S]) PartitionOf(key string) (replication.PartitionInfo, bool) {
	t, ok := c.broker.Topic(c.cfg.Topic)
	if !ok || len(t.Partitions) == 0 {
		return replication.PartitionInfo{}, false
	}
	return t.Partitions[PartitionFor(key, int32(len(t.Partitions)))], true
}

// Route finds (starting a load if needed) the shard of key and waits for
// it to load: the shard, or NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator[S]) Route(key string) (*Shard[S], int16) {
	pi, ok := c.PartitionOf(key)
	if !ok {
		return nil, kerr.NotCoordinator.Code
	}
	return c.RoutePartition(pi)
}

// RoutePartition is Route for a known partition of the topic: it waits
// (up to LoadWait) for the shard to load. A shard that stops before it
// loaded because the partition moved to a newer leader epoch here (a
// re-election, as after a restart) is followed once to the new epoch's
// shard.
func (c *Coordinator[S]) RoutePartition(pi replication.PartitionInfo) (*Shard[S], int16) {
	var t Timer
	for attempt := 0; ; attempt++ {
		s, code := c.ShardFor(pi)
		if code != 0 {
			return nil, code
		}
		if s.loaded.Load() {
			return s, 0
		}
		if t == nil {
			t = c.cfg.Clock.NewTimer(c.cfg.LoadWait)
			defer t.Stop()
		}
		select {
		case <-s.loadedCh:
			return s, 0
		case <-s.done:
			if npi, ok := c.movedHere(s); ok && attempt == 0 {
				pi = npi
				continue
			}
			return nil, kerr.NotCoordinator.Code
		case <-t.C():
			return nil, kerr.CoordinatorLoadInProgress.Code
		}
	}
}

// movedHere reports whether s's partition is now led by this broker at
// another leader epoch than s's, with its current info.
func (c *Coordinator[S]) movedHere(s *Shard[S]) (replication.PartitionInfo, bool) {
	t, ok := c.broker.Topic(c.cfg.Topic)
	if !ok || int(s.partition) >= len(t.Partitions) {
		return replication.PartitionInfo{}, false
	}
	pi := t.Partitions[s.partition]
	return pi, pi.Leader == c.broker.NodeID() && pi.LeaderEpoch != s.epoch
}

// ShardFor returns the shard of a partition this broker leads, starting
// its load (or a reload at a new leader epoch, after the old epoch's
// shard has stopped) without waiting for it.
func (c *Coordinator[S]) ShardFor(pi replication.PartitionInfo) (*Shard[S], int16) {
	p := pi.Partition
	if pi.Leader != c.broker.NodeID() {
		return nil, kerr.NotCoordinator.Code
	}
	if c.cfg.RequireElectedEpoch && pi.LeaderEpoch <= 0 {
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, kerr.NotCoordinator.Code
	}
	s := c.shards[p]
	switch {
	case s != nil && s.epoch != pi.LeaderEpoch:
		s.Halt()
		prev := s
		s = c.newShard(p, pi.LeaderEpoch)
		c.shards[p] = s
		go func() {
			<-prev.done // the old epoch's writes finish before the replay
			s.run()
		}()
	case s == nil:
		s = c.newShard(p, pi.LeaderEpoch)
		c.shards[p] = s
		go s.run()
	}
	return s, 0
}

// Lookup returns the shard of partition p if one exists (loaded or not),
// without starting one.
func (c *Coordinator[S]) Lookup(p int32) *Shard[S] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shards[p]
}

// Shards returns the current shards (loading or loaded), by partition.
func (c *Coordinator[S]) Shards() []*Shard[S] {
	c.mu.Lock()
	out := make([]*Shard[S], 0, len(c.shards))
	for _, s := range c.shards {
		out = append(out, s)
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].partition < out[j].partition })
	return out
}

// LoadLeading starts loading every partition of the topic this broker
// leads (a listing must cover them all).
func (c *Coordinator[S]) LoadLeading() {
	t, ok := c.broker.Topic(c.cfg.Topic)
	if !ok {
		return
	}
	for _, pi := range t.Partitions {
		if pi.Leader == c.broker.NodeID() {
			c.ShardFor(pi)
		}
	}
}

// EnsureTopic returns the topic, creating it on first use.
func (c *Coordinator[S]) EnsureTopic(ctx context.Context) (replication.TopicInfo, error) {
	if t, ok := c.broker.Topic(c.cfg.Topic); ok {
		return t, nil
	}
	c.createMu.Lock()
	defer c.createMu.Unlock()
	if t, ok := c.broker.Topic(c.cfg.Topic); ok {
		return t, nil
	}
	rf := c.cfg.ReplicationFactor
	if n := len(c.broker.Brokers()); int(rf) > n {
		rf = int16(n)
	}
	t, err := c.broker.CreateTopic(ctx, replication.CreateTopicRequest{
		Name:              c.cfg.Topic,
		NumPartitions:     c.cfg.NumPartitions,
		ReplicationFactor: rf,
		Configs:           c.cfg.TopicConfigs,
	})
	if errors.Is(err, replication.ErrTopicExists) {
		if t, ok := c.broker.Topic(c.cfg.Topic); ok {
			return t, nil
		}
	}
	return t, err
}

// Find answers one key of FindCoordinator: the leader of the key's
// partition (the topic is created on first use), starting the shard's
// load when that is this broker -- the client's next request is for it.
func (c *Coordinator[S]) Find(ctx context.Context, key string) kmsg.FindCoordinatorResponseCoordinator {
	co := kmsg.NewFindCoordinatorResponseCoordinator()
	co.Key, co.NodeID, co.Port = key, -1, -1
	fail := func(e *kerr.Error) kmsg.FindCoordinatorResponseCoordinator {
		co.ErrorCode = e.Code
		msg := e.Message
		co.ErrorMessage = &msg
		return co
	}
	if key == "" {
		return fail(kerr.InvalidRequest)
	}
	t, err := c.EnsureTopic(ctx)
	if err != nil || len(t.Partitions) == 0 {
		c.cfg.Logger.Warn(c.cfg.Topic+" topic unavailable", "err", err)
		return fail(kerr.CoordinatorNotAvailable)
	}
	pi := t.Partitions[PartitionFor(key, int32(len(t.Partitions)))]
	if pi.Leader < 0 {
		return fail(kerr.CoordinatorNotAvailable)
	}
	for _, b := range c.broker.Brokers() {
		if b.NodeID == pi.Leader {
			co.NodeID, co.Host, co.Port = b.NodeID, b.Host, b.Port
			if b.NodeID == c.broker.NodeID() {
				c.ShardFor(pi)
			}
			return co
		}
	}
	return fail(kerr.CoordinatorNotAvailable)
}
