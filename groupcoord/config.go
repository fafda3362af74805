package groupcoord

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/strata-io/strata/internal/coord"
)

// OffsetsTopic is the internal compacted topic that holds every group's
// metadata and committed offsets (Kafka's name, so tools find it).
const OffsetsTopic = "__consumer_offsets"

// Config holds the coordinator settings, with Kafka's broker setting names.
// Zero values take the defaults documented on each field.
type Config struct {
	NumPartitions     int32         // offsets.topic.num.partitions (50); used when the topic is created
	ReplicationFactor int16         // offsets.topic.replication.factor (3), capped at the broker count
	SegmentBytes      int64         // offsets.topic.segment.bytes (100 MiB)
	MinSessionTimeout time.Duration // group.min.session.timeout.ms (6 s)
	MaxSessionTimeout time.Duration // group.max.session.timeout.ms (30 min)
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms (3 s):
	// how long the first rebalance of an empty group waits for more
	// members. Negative means 0.
	InitialRebalanceDelay time.Duration
	MaxGroupSize          int           // group.max.size (Kafka: unbounded; here 100000)
	MaxMetadataBytes      int           // offset.metadata.max.bytes (4096)
	TickInterval          time.Duration // how often timers are checked (100 ms)
	// OffsetsRetention is offsets.retention.minutes (7 days): how long an
	// empty group's offsets are kept; OffsetsRetentionCheckInterval is
	// offsets.retention.check.interval.ms (10 min).
	OffsetsRetention              time.Duration
	OffsetsRetentionCheckInterval time.Duration
	// KIP-848 groups: group.consumer.session.timeout.ms (45 s) and
	// group.consumer.heartbeat.interval.ms (5 s).
	ConsumerSessionTimeout    time.Duration
	ConsumerHeartbeatInterval time.Duration
	// Share groups (KIP-932): group.share.session.timeout.ms (45 s),
	// group.share.heartbeat.interval.ms (5 s), group.share.max.size (200).
	ShareSessionTimeout    time.Duration
	ShareHeartbeatInterval time.Duration
	ShareMaxSize           int
	// ShareGroupTimeouts, when set, gives a group's own session timeout
	// and heartbeat interval (the group configs share.session.timeout.ms
	// and share.heartbeat.interval.ms); a zero result keeps the value
	// above. Called on the shard goroutine: it must not block.
	ShareGroupTimeouts func(group string) (session, heartbeat time.Duration)
	// ShareMemberGone, when set, is told on the shard goroutine when a
	// share-group member leaves or its session expires (so the share
	// partitions can release its records). It must not block.
	ShareMemberGone func(group, member string)
	// LoadTimeout bounds how long loading waits for the partition's tail
	// to commit before giving up (and trying again on the next request).
	LoadTimeout time.Duration
	Logger      *slog.Logger
	// Clock drives the coordinator's timers (ticks, load waits); nil =
	// the wall clock. Now, when set, overrides the clock's time only.
	Clock coord.Clock
	Now   func() time.Time // nil = Clock.Now
	// LagWindow is strata.metrics.lag.window.ms (5 min): the sliding
	// window of the lag growth, consumption and time-to-drain series
	// (metrics.go).
	LagWindow time.Duration
	// NewMemberID makes a member ID for a client ID; nil = Kafka's form,
	// "<client.id>-<random UUID>".
	NewMemberID func(clientID string) string
}

// DefaultLagWindow is LagWindow's default.
const DefaultLagWindow = 5 * time.Minute

func (c Config) withDefaults() Config {
	if c.NumPartitions <= 0 {
		c.NumPartitions = 50
	}
	if c.ReplicationFactor <= 0 {
		c.ReplicationFactor = 3
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = 100 << 20
	}
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.InitialRebalanceDelay < 0 {
		c.InitialRebalanceDelay = 0
	}
	if c.MaxGroupSize <= 0 {
		c.MaxGroupSize = 100000
	}
	if c.MaxMetadataBytes <= 0 {
		c.MaxMetadataBytes = 4096
	}
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.OffsetsRetention <= 0 {
		c.OffsetsRetention = 7 * 24 * time.Hour
	}
	if c.OffsetsRetentionCheckInterval <= 0 {
		c.OffsetsRetentionCheckInterval = 10 * time.Minute
	}
	if c.ConsumerSessionTimeout <= 0 {
		c.ConsumerSessionTimeout = 45 * time.Second
	}
	if c.ConsumerHeartbeatInterval <= 0 {
		c.ConsumerHeartbeatInterval = 5 * time.Second
	}
	if c.ShareSessionTimeout <= 0 {
		c.ShareSessionTimeout = 45 * time.Second
	}
	if c.ShareHeartbeatInterval <= 0 {
		c.ShareHeartbeatInterval = 5 * time.Second
	}
	if c.ShareMaxSize <= 0 {
		c.ShareMaxSize = 200
	}
	if c.LoadTimeout <= 0 {
		c.LoadTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = coord.Real()
	}
	if c.Now == nil {
		c.Now = c.Clock.Now
	}
	if c.LagWindow <= 0 {
		c.LagWindow = DefaultLagWindow
	}
	if c.NewMemberID == nil {
		c.NewMemberID = randomMemberID
	}
	return c
}

// randomMemberID is Kafka's member ID form: client ID, '-', a UUID.
func randomMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return clientID + "-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// PartitionFor is the __consumer_offsets partition of a group:
// abs(hashCode) % n, with Kafka's Utils.abs (MinInt32 maps to 0).
func PartitionFor(groupID string, n int32) int32 { return coord.PartitionFor(groupID, n) }
