package txncoord

import (
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/coord"
)

// Topic is the internal compacted topic holding transaction state.
const Topic = "__transaction_state"

// Config is the coordinator's configuration, with Kafka's broker settings
// as the names. Zero values mean Kafka's defaults.
type Config struct {
	// ClientOpts give the client that writes markers to other brokers
	// the broker's identity on the inter-broker listener (TLS, SASL;
	// protocol.Config.InterBrokerClient). nil: PLAINTEXT, anonymous.
	ClientOpts []kgo.Opt
	// NumPartitions is transaction.state.log.num.partitions (50).
	NumPartitions int32
	// ReplicationFactor is transaction.state.log.replication.factor (3),
	// capped at the number of brokers when the topic is created.
	ReplicationFactor int16
	// SegmentBytes is transaction.state.log.segment.bytes (100 MiB).
	SegmentBytes int64
	// MaxTimeout is transaction.max.timeout.ms (15 minutes): a longer
	// transaction timeout is INVALID_TRANSACTION_TIMEOUT.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms (7 days): an idle
	// transactional ID (no transaction open) is forgotten after it.
	IDExpiration time.Duration
	// AbortTimedOutInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s):
	// how often open transactions are checked against their timeout.
	AbortTimedOutInterval time.Duration
	// RemoveExpiredInterval is
	// transaction.remove.expired.transaction.cleanup.interval.ms (1 h).
	RemoveExpiredInterval time.Duration
	// LoadTimeout bounds a partition load's wait for its tail to commit.
	LoadTimeout time.Duration
	// MarkerTimeout bounds writing one transaction's markers before the
	// coordinator retries them (they are retried until written).
	MarkerTimeout time.Duration
	// TransactionVersion is the finalized level of Kafka's
	// transaction.version feature (KIP-890 part 2) that ApiVersions
	// advertises: 2 (the default, as a new Kafka 4 cluster) lets clients
	// add partitions implicitly with Produce v12+ and TxnOffsetCommit v5+
	// and bump the epoch on every EndTxn (v5); 1 keeps them on the
	// KIP-98 protocol. Both are served either way.
	TransactionVersion int16

	// Clock drives the coordinator's timers (ticks, load waits); nil =
	// the wall clock. Now, when set, overrides the clock's time only.
	Clock  coord.Clock
	Now    func() time.Time // nil = Clock.Now
	Logger *slog.Logger     // nil = slog.Default()
}

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
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = 15 * time.Minute
	}
	if c.IDExpiration <= 0 {
		c.IDExpiration = 7 * 24 * time.Hour
	}
	if c.AbortTimedOutInterval <= 0 {
		c.AbortTimedOutInterval = 10 * time.Second
	}
	if c.RemoveExpiredInterval <= 0 {
		c.RemoveExpiredInterval = time.Hour
	}
	if c.LoadTimeout <= 0 {
		c.LoadTimeout = 30 * time.Second
	}
	if c.TransactionVersion <= 0 || c.TransactionVersion > 2 {
		c.TransactionVersion = 2
	}
	if c.MarkerTimeout <= 0 {
		c.MarkerTimeout = 10 * time.Second
	}
	if c.Clock == nil {
		c.Clock = coord.Real()
	}
	if c.Now == nil {
		c.Now = c.Clock.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// PartitionFor is the __transaction_state partition of a transactional
// ID: abs(hashCode) % n, Kafka's formula (the same as for groups).
func PartitionFor(txnID string, n int32) int32 { return coord.PartitionFor(txnID, n) }
