package groupconfig

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidConfig marks a group config Kafka would refuse with
// INVALID_CONFIG. The errors that match it (errors.Is) carry Kafka's
// message alone, naming the key, fit for the response's ErrorMessage.
var ErrInvalidConfig = errors.New("groupconfig: invalid group config")

// invalid is an error matching ErrInvalidConfig with a bare message.
type invalid struct{ msg string }

func (e invalid) Error() string        { return e.msg }
func (e invalid) Is(target error) bool { return target == ErrInvalidConfig }

// Broker is the broker settings behind group configs: each group config's
// default and its bounds, with Kafka 4.4's names. Zero values take Kafka's
// defaults (WithDefaults). Kafka's own lower bounds on the settings
// themselves (group.share.min.record.lock.duration.ms >= 1000, ...) are
// the caller's (cmd/strata checks them as Kafka's ConfigDef does); Check
// is Kafka's cross-checks between them.
type Broker struct {
	// Share-partition leader (ShareGroupConfig).
	ShareRecordLockDuration    time.Duration // group.share.record.lock.duration.ms (30 s; 1 s..1 h)
	ShareMinRecordLockDuration time.Duration // group.share.min.record.lock.duration.ms (15 s; 1 s..30 s)
	ShareMaxRecordLockDuration time.Duration // group.share.max.record.lock.duration.ms (60 s; 30 s..1 h)
	ShareDeliveryCountLimit    int           // group.share.delivery.count.limit (5; 2..10)
	ShareMinDeliveryCountLimit int           // group.share.min.delivery.count.limit (2; 2..5)
	ShareMaxDeliveryCountLimit int           // group.share.max.delivery.count.limit (10; 5..25)
	// SharePartitionMaxRecordLocks is group.share.partition.max.record.locks
	// (2000; 100..10000), bounded by group.share.min.partition.max.record.locks
	// (100; 100..2000) and group.share.max.partition.max.record.locks (4000;
	// 2000..10000).
	SharePartitionMaxRecordLocks    int
	ShareMinPartitionMaxRecordLocks int
	ShareMaxPartitionMaxRecordLocks int
	ShareMaxShareSessions           int // group.share.max.share.sessions (2000; 1..)

	// Share-group membership (GroupCoordinatorConfig).
	ShareMaxSize              int           // group.share.max.size (200; 1..1000)
	ShareSessionTimeout       time.Duration // group.share.session.timeout.ms (45 s)
	ShareMinSessionTimeout    time.Duration // group.share.min.session.timeout.ms (45 s)
	ShareMaxSessionTimeout    time.Duration // group.share.max.session.timeout.ms (60 s)
	ShareHeartbeatInterval    time.Duration // group.share.heartbeat.interval.ms (5 s)
	ShareMinHeartbeatInterval time.Duration // group.share.min.heartbeat.interval.ms (5 s)
	ShareMaxHeartbeatInterval time.Duration // group.share.max.heartbeat.interval.ms (15 s)

	// KIP-848 consumer groups (GroupCoordinatorConfig).
	ConsumerSessionTimeout       time.Duration // group.consumer.session.timeout.ms (45 s)
	ConsumerMinSessionTimeout    time.Duration // group.consumer.min.session.timeout.ms (45 s)
	ConsumerMaxSessionTimeout    time.Duration // group.consumer.max.session.timeout.ms (60 s)
	ConsumerHeartbeatInterval    time.Duration // group.consumer.heartbeat.interval.ms (5 s)
	ConsumerMinHeartbeatInterval time.Duration // group.consumer.min.heartbeat.interval.ms (5 s)
	ConsumerMaxHeartbeatInterval time.Duration // group.consumer.max.heartbeat.interval.ms (15 s)

	// Dead-letter topics of share groups (KIP-1191, GroupCoordinatorConfig).
	// DLQAutoCreateTopics is errors.deadletterqueue.auto.create.topics.enable
	// (false): a group's dead-letter topic that does not exist is created
	// (with errors.deadletterqueue.group.enable=true). DLQTopicNamePrefix
	// is errors.deadletterqueue.topic.name.prefix ("dlq."): the prefix a
	// dead-letter topic's name must have ("" = any name). DLQTopicNamePrefixSet
	// tells an explicit "" from the default.
	DLQAutoCreateTopics   bool
	DLQTopicNamePrefix    string
	DLQTopicNamePrefixSet bool
	// The dead-letter flood guard (Strata's): when a share group's dead
	// letters reach FloodRatio of its deliveries across the cluster
	// (summed by the controller) within FloodWindow (at least FloodMinDeliveries deliveries),
	// the group is paused (its config strata.share.dlq.flood.paused set)
	// until an operator resumes it. FloodRatio 0 = off (the default):
	// strata.share.dlq.flood.ratio, .window.ms (60000),
	// .min.deliveries (100).
	FloodRatio         float64
	FloodWindow        time.Duration
	FloodMinDeliveries int
	// DLQDepthInterval is strata.share.dlq.depth.interval.ms (30 s): how
	// often the broker leading a dead-letter topic's partition 0 counts
	// the letters waiting in it per share group (its depth and oldest
	// age metrics).
	DLQDepthInterval time.Duration

	// Explicit names the settings above that were given explicitly
	// (server.properties, environment, flags): DescribeConfigs reports
	// them as STATIC_BROKER_CONFIG synonyms, the rest as DEFAULT_CONFIG.
	Explicit map[string]bool
}

// Kafka 4.4's defaults (ShareGroupConfig, GroupCoordinatorConfig).
const (
	DefaultShareRecordLockDuration         = 30 * time.Second
	DefaultShareMinRecordLockDuration      = 15 * time.Second
	DefaultShareMaxRecordLockDuration      = 60 * time.Second
	DefaultShareDeliveryCountLimit         = 5
	DefaultShareMinDeliveryCountLimit      = 2
	DefaultShareMaxDeliveryCountLimit      = 10
	DefaultSharePartitionMaxRecordLocks    = 2000
	DefaultShareMinPartitionMaxRecordLocks = 100
	DefaultShareMaxPartitionMaxRecordLocks = 4000
	DefaultShareMaxShareSessions           = 2000
	DefaultShareMaxSize                    = 200
	DefaultSessionTimeout                  = 45 * time.Second // share and consumer
	DefaultMinSessionTimeout               = 45 * time.Second
	DefaultMaxSessionTimeout               = 60 * time.Second
	DefaultHeartbeatInterval               = 5 * time.Second
	DefaultMinHeartbeatInterval            = 5 * time.Second
	DefaultMaxHeartbeatInterval            = 15 * time.Second
	DefaultDLQTopicNamePrefix              = "dlq."
	DefaultFloodWindow                     = time.Minute
	DefaultFloodMinDeliveries              = 100
	DefaultDLQDepthInterval                = 30 * time.Second
)

// WithDefaults returns b with every zero field set to Kafka's default.
func (b Broker) WithDefaults() Broker {
	dur := func(p *time.Duration, d time.Duration) {
		if *p <= 0 {
			*p = d
		}
	}
	num := func(p *int, d int) {
		if *p <= 0 {
			*p = d
		}
	}
	dur(&b.ShareRecordLockDuration, DefaultShareRecordLockDuration)
	dur(&b.ShareMinRecordLockDuration, DefaultShareMinRecordLockDuration)
	dur(&b.ShareMaxRecordLockDuration, DefaultShareMaxRecordLockDuration)
	num(&b.ShareDeliveryCountLimit, DefaultShareDeliveryCountLimit)
	num(&b.ShareMinDeliveryCountLimit, DefaultShareMinDeliveryCountLimit)
	num(&b.ShareMaxDeliveryCountLimit, DefaultShareMaxDeliveryCountLimit)
	num(&b.SharePartitionMaxRecordLocks, DefaultSharePartitionMaxRecordLocks)
	num(&b.ShareMinPartitionMaxRecordLocks, DefaultShareMinPartitionMaxRecordLocks)
	num(&b.ShareMaxPartitionMaxRecordLocks, DefaultShareMaxPartitionMaxRecordLocks)
	num(&b.ShareMaxShareSessions, DefaultShareMaxShareSessions)
	num(&b.ShareMaxSize, DefaultShareMaxSize)
	dur(&b.ShareSessionTimeout, DefaultSessionTimeout)
	dur(&b.ShareMinSessionTimeout, DefaultMinSessionTimeout)
	dur(&b.ShareMaxSessionTimeout, DefaultMaxSessionTimeout)
	dur(&b.ShareHeartbeatInterval, DefaultHeartbeatInterval)
	dur(&b.ShareMinHeartbeatInterval, DefaultMinHeartbeatInterval)
	dur(&b.ShareMaxHeartbeatInterval, DefaultMaxHeartbeatInterval)
	dur(&b.ConsumerSessionTimeout, DefaultSessionTimeout)
	dur(&b.ConsumerMinSessionTimeout, DefaultMinSessionTimeout)
	dur(&b.ConsumerMaxSessionTimeout, DefaultMaxSessionTimeout)
	dur(&b.ConsumerHeartbeatInterval, DefaultHeartbeatInterval)
	dur(&b.ConsumerMinHeartbeatInterval, DefaultMinHeartbeatInterval)
	dur(&b.ConsumerMaxHeartbeatInterval, DefaultMaxHeartbeatInterval)
	dur(&b.FloodWindow, DefaultFloodWindow)
	num(&b.FloodMinDeliveries, DefaultFloodMinDeliveries)
	dur(&b.DLQDepthInterval, DefaultDLQDepthInterval)
	if !b.DLQTopicNamePrefixSet {
		b.DLQTopicNamePrefix, b.DLQTopicNamePrefixSet = DefaultDLQTopicNamePrefix, true
	}
	return b
}

// Check applies Kafka's cross-checks between the settings (after
// WithDefaults), with Kafka's messages: each default lies within its min
// and max, each min is at most its max, each heartbeat interval is below
// its session timeout. Tests that need shorter locks or sessions lower the
// min.* settings too, as on Kafka.
func (b Broker) Check() error {
	type rule struct {
		ok  bool
		msg string
	}
	ge := func(a, c string) string { return a + " must be greater than or equal to " + c }
	le := func(a, c string) string { return a + " must be less than or equal to " + c }
	rules := []rule{
		{b.ShareMaxRecordLockDuration >= b.ShareMinRecordLockDuration, ge("group.share.max.record.lock.duration.ms", "group.share.min.record.lock.duration.ms")},
		{b.ShareRecordLockDuration >= b.ShareMinRecordLockDuration, ge("group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms")},
		{b.ShareMaxRecordLockDuration >= b.ShareRecordLockDuration, ge("group.share.max.record.lock.duration.ms", "group.share.record.lock.duration.ms")},
		{b.ShareMaxDeliveryCountLimit >= b.ShareMinDeliveryCountLimit, ge("group.share.max.delivery.count.limit", "group.share.min.delivery.count.limit")},
		{b.ShareDeliveryCountLimit >= b.ShareMinDeliveryCountLimit, ge("group.share.delivery.count.limit", "group.share.min.delivery.count.limit")},
		{b.ShareMaxDeliveryCountLimit >= b.ShareDeliveryCountLimit, ge("group.share.max.delivery.count.limit", "group.share.delivery.count.limit")},
		{b.ShareMaxPartitionMaxRecordLocks >= b.ShareMinPartitionMaxRecordLocks, ge("group.share.max.partition.max.record.locks", "group.share.min.partition.max.record.locks")},
		{b.SharePartitionMaxRecordLocks >= b.ShareMinPartitionMaxRecordLocks, ge("group.share.partition.max.record.locks", "group.share.min.partition.max.record.locks")},
		{b.ShareMaxPartitionMaxRecordLocks >= b.SharePartitionMaxRecordLocks, ge("group.share.max.partition.max.record.locks", "group.share.partition.max.record.locks")},
	}
	for _, kind := range []struct {
		name                  string
		session, minS, maxS   time.Duration
		heartbeat, minH, maxH time.Duration
	}{
		{"consumer", b.ConsumerSessionTimeout, b.ConsumerMinSessionTimeout, b.ConsumerMaxSessionTimeout, b.ConsumerHeartbeatInterval, b.ConsumerMinHeartbeatInterval, b.ConsumerMaxHeartbeatInterval},
		{"share", b.ShareSessionTimeout, b.ShareMinSessionTimeout, b.ShareMaxSessionTimeout, b.ShareHeartbeatInterval, b.ShareMinHeartbeatInterval, b.ShareMaxHeartbeatInterval},
	} {
		p := "group." + kind.name + "."
		rules = append(rules,
			rule{kind.maxS >= kind.minS, ge(p+"max.session.timeout.ms", p+"min.session.timeout.ms")},
			rule{kind.session >= kind.minS, ge(p+"session.timeout.ms", p+"min.session.timeout.ms")},
			rule{kind.session <= kind.maxS, le(p+"session.timeout.ms", p+"max.session.timeout.ms")},
			rule{kind.maxH >= kind.minH, ge(p+"max.heartbeat.interval.ms", p+"min.heartbeat.interval.ms")},
			rule{kind.heartbeat >= kind.minH, ge(p+"heartbeat.interval.ms", p+"min.heartbeat.interval.ms")},
			rule{kind.heartbeat <= kind.maxH, le(p+"heartbeat.interval.ms", p+"max.heartbeat.interval.ms")},
			rule{kind.heartbeat < kind.session, p + "heartbeat.interval.ms must be less than " + p + "session.timeout.ms"},
		)
	}
	for _, r := range rules {
		if !r.ok {
			return invalid{r.msg}
		}
	}
	return nil
}

// Type is a group config's type as DescribeConfigs reports it (Kafka's
// ConfigType; the numbers are on the wire).
type Type int8

const (
	TypeBoolean Type = 1
	TypeString  Type = 2
	TypeInt     Type = 3
	TypeDouble  Type = 6
)

// Def is one group config Strata serves.
type Def struct {
	Name string
	Type Type
	Doc  string
	// Synonym is the broker setting that gives the default ("" = none:
	// Default is the default).
	Synonym string
	// Default is Kafka's default (of the broker setting, if any).
	Default string
	// Min is Kafka's own lower bound of an INT (its ConfigDef validator),
	// checked before the broker's range.
	Min int64
	// bounds returns the broker's [min, max] for an INT and the broker
	// default (ms for durations).
	bounds func(b Broker) (lo, hi, def int64)
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// Names of the group configs Strata serves.
const (
	ConsumerSessionTimeoutMs     = "consumer.session.timeout.ms"
	ConsumerHeartbeatIntervalMs  = "consumer.heartbeat.interval.ms"
	ShareSessionTimeoutMs        = "share.session.timeout.ms"
	ShareHeartbeatIntervalMs     = "share.heartbeat.interval.ms"
	ShareRecordLockDurationMs    = "share.record.lock.duration.ms"
	ShareDeliveryCountLimit      = "share.delivery.count.limit"
	SharePartitionMaxRecordLocks = "share.partition.max.record.locks"
	ShareAutoOffsetReset         = "share.auto.offset.reset"
	ShareIsolationLevel          = "share.isolation.level"
	ShareRenewAcknowledgeEnable  = "share.renew.acknowledge.enable"
	DLQTopicName                 = "errors.deadletterqueue.topic.name"
	DLQCopyRecordEnable          = "errors.deadletterqueue.copy.record.enable"
	// FloodPaused is Strata's: set by the dead-letter flood guard.
	FloodPaused = "strata.share.dlq.flood.paused"
	// Strata's delayed redelivery.
	BackoffInitialMs  = "strata.share.redelivery.backoff.initial.ms"
	BackoffMaxMs      = "strata.share.redelivery.backoff.max.ms"
	BackoffMultiplier = "strata.share.redelivery.backoff.multiplier"
	BackoffJitter     = "strata.share.redelivery.backoff.jitter"
	// RecordTTLMs is Strata's time-to-live of undelivered records.
	RecordTTLMs = "strata.share.record.ttl.ms"
	// RecordHeadersEnable is Strata's: records' own strata.ttl.ms and
	// strata.deliver.after.ms headers are honoured.
	RecordHeadersEnable = "strata.share.record.headers.enable"
	// RedriveLimit is Strata's: a record redriven this many times that is
	// dead-lettered again says so (reason redrive-limit).
	RedriveLimit = "strata.share.dlq.redrive.limit"
)

// Defs are the group configs Strata serves, in DescribeConfigs' order.
// Docs are Kafka's.
var Defs = []Def{
	{Name: ConsumerHeartbeatIntervalMs, Type: TypeInt, Min: 1, Synonym: "group.consumer.heartbeat.interval.ms", Default: "5000",
		Doc: "The heartbeat interval given to the members of a consumer group.",
		bounds: func(b Broker) (int64, int64, int64) {
			return ms(b.ConsumerMinHeartbeatInterval), ms(b.ConsumerMaxHeartbeatInterval), ms(b.ConsumerHeartbeatInterval)
		}},
	{Name: ConsumerSessionTimeoutMs, Type: TypeInt, Min: 1, Synonym: "group.consumer.session.timeout.ms", Default: "45000",
		Doc: "The timeout to detect client failures when using the consumer group protocol.",
		bounds: func(b Broker) (int64, int64, int64) {
			return ms(b.ConsumerMinSessionTimeout), ms(b.ConsumerMaxSessionTimeout), ms(b.ConsumerSessionTimeout)
		}},
	{Name: DLQCopyRecordEnable, Type: TypeBoolean, Default: "false",
		Doc: "When writing onto the dead-letter queue topic, whether to copy the original record onto the DLQ topic, or just write a record containing the context information headers."},
	{Name: DLQTopicName, Type: TypeString, Default: "",
		Doc: "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank (the default), the group does not have a DLQ topic."},
	{Name: BackoffInitialMs, Type: TypeInt, Min: 0, Default: "0",
		Doc:    "Strata's: how long a record released, or whose acquisition lock lapsed, waits before it is delivered again after its first delivery; each further delivery multiplies it by strata.share.redelivery.backoff.multiplier, up to strata.share.redelivery.backoff.max.ms. 0 (the default) = at once, as Kafka.",
		bounds: func(Broker) (int64, int64, int64) { return 0, 86400000, 0 }},
	{Name: BackoffMaxMs, Type: TypeInt, Min: 1, Default: "60000",
		Doc:    "Strata's: the longest a redelivery is delayed (strata.share.redelivery.backoff.initial.ms).",
		bounds: func(Broker) (int64, int64, int64) { return 1, 86400000, 60000 }},
	{Name: BackoffMultiplier, Type: TypeDouble, Default: "2.0",
		Doc: "Strata's: the factor the redelivery delay grows by with each delivery (at least 1)."},
	{Name: BackoffJitter, Type: TypeDouble, Default: "0.0",
		Doc: "Strata's: the share of each redelivery delay drawn at random, 0 to 1: a delay d becomes one between d*(1-jitter) and d, so records released together do not all come back at once. 0 (the default) = exactly d."},
	{Name: RecordTTLMs, Type: TypeInt, Min: 0, Default: "0",
		Doc:    "Strata's: a record never delivered to the share group whose batch's newest timestamp is older than this is not delivered: it is archived and, with a dead-letter topic, dead-lettered with reason ttl-expired. 0 (the default) = no limit.",
		bounds: func(Broker) (int64, int64, int64) { return 0, 2147483647, 0 }},
	{Name: RecordHeadersEnable, Type: TypeBoolean, Default: "true",
		Doc: "Strata's: a record's own headers strata.ttl.ms (a time-to-live from its timestamp, overriding strata.share.record.ttl.ms; 0 = none) and strata.deliver.after.ms (epoch milliseconds: not delivered before) are honoured. The share-partition leader then reads the records of each batch it delivers for the first time (a scan of an uncompressed batch, a decompression of a compressed one); false delivers batches without looking inside."},
	{Name: RedriveLimit, Type: TypeInt, Min: 0, Default: "3",
		Doc:    "Strata's: a record whose strata.redrive.count header (set by strata dlq redrive) is at least this when it is dead-lettered again gets the reason redrive-limit instead of its own (max-deliveries, rejected, ...): the redrive loop guard's limit (strata dlq redrive --limit has the same default, 3: set both alike). 0 = never.",
		bounds: func(Broker) (int64, int64, int64) { return 0, 1000, 3 }},
	{Name: FloodPaused, Type: TypeBoolean, Default: "false",
		Doc: "Strata's: true while the share group is paused by the dead-letter flood guard (its dead letters exceeded strata.share.dlq.flood.ratio of its deliveries): no records are delivered to it. Delete it (strata share-group resume GROUP) to resume."},
	{Name: ShareAutoOffsetReset, Type: TypeString, Default: "latest",
		Doc: "The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically reset the offset to the earliest offset</li><li>latest: automatically reset the offset to the latest offset</li><li>by_duration:&lt;duration&gt;: automatically reset the offset to a configured duration from the current timestamp. &lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). Negative duration is not allowed.</li><li>anything else: throw exception to the share consumer.</li></ul>"},
	{Name: ShareDeliveryCountLimit, Type: TypeInt, Min: 2, Synonym: "group.share.delivery.count.limit", Default: "5",
		Doc: "The maximum number of delivery attempts for a record delivered to a share group.",
		bounds: func(b Broker) (int64, int64, int64) {
			return int64(b.ShareMinDeliveryCountLimit), int64(b.ShareMaxDeliveryCountLimit), int64(b.ShareDeliveryCountLimit)
		}},
	{Name: ShareHeartbeatIntervalMs, Type: TypeInt, Min: 1, Synonym: "group.share.heartbeat.interval.ms", Default: "5000",
		Doc: "The heartbeat interval given to the members of a share group.",
		bounds: func(b Broker) (int64, int64, int64) {
			return ms(b.ShareMinHeartbeatInterval), ms(b.ShareMaxHeartbeatInterval), ms(b.ShareHeartbeatInterval)
		}},
	{Name: ShareIsolationLevel, Type: TypeString, Default: "read_uncommitted",
		Doc: "Controls how to read records written transactionally. If set to \"read_committed\", the share group will only deliver transactional records which have been committed. If set to \"read_uncommitted\", the share group will return all messages, even transactional messages which have been aborted. Non-transactional records will be returned unconditionally in either mode."},
	{Name: SharePartitionMaxRecordLocks, Type: TypeInt, Min: 100, Synonym: "group.share.partition.max.record.locks", Default: "2000",
		Doc: "Share-group record lock limit per share-partition.",
		bounds: func(b Broker) (int64, int64, int64) {
			return int64(b.ShareMinPartitionMaxRecordLocks), int64(b.ShareMaxPartitionMaxRecordLocks), int64(b.SharePartitionMaxRecordLocks)
		}},
	{Name: ShareRecordLockDurationMs, Type: TypeInt, Min: 1000, Synonym: "group.share.record.lock.duration.ms", Default: "30000",
		Doc: "The record acquisition lock duration in milliseconds for share groups.",
		bounds: func(b Broker) (int64, int64, int64) {
			return ms(b.ShareMinRecordLockDuration), ms(b.ShareMaxRecordLockDuration), ms(b.ShareRecordLockDuration)
		}},
	{Name: ShareRenewAcknowledgeEnable, Type: TypeBoolean, Default: "true",
		Doc: "Whether the renew acknowledge type is enabled for the share group."},
	{Name: ShareSessionTimeoutMs, Type: TypeInt, Min: 1, Synonym: "group.share.session.timeout.ms", Default: "45000",
		Doc: "The timeout to detect client failures when using the share group protocol.",
		bounds: func(b Broker) (int64, int64, int64) {
			return ms(b.ShareMinSessionTimeout), ms(b.ShareMaxSessionTimeout), ms(b.ShareSessionTimeout)
		}},
}

// unsupported are the group configs of Kafka 4.4 Strata does not serve.
var unsupported = map[string]bool{
	"consumer.assignment.interval.ms": true, "consumer.assignor.offload.enable": true,
	"share.assignment.interval.ms": true, "share.assignor.offload.enable": true,
	"streams.session.timeout.ms": true, "streams.heartbeat.interval.ms": true, "streams.num.standby.replicas": true,
	"streams.initial.rebalance.delay.ms": true, "streams.assignment.interval.ms": true, "streams.rack.aware.assignment.tags": true,
	"streams.assignor.offload.enable": true, "streams.task.offset.interval.ms": true, "streams.num.warmup.replicas": true,
	"streams.acceptable.recovery.lag": true, "streams.assignor.name": true,
}

var defByName = func() map[string]*Def {
	m := make(map[string]*Def, len(Defs))
	for i := range Defs {
		m[Defs[i].Name] = &Defs[i]
	}
	return m
}()

// Lookup returns the definition of a group config Strata serves.
func Lookup(name string) (Def, bool) {
	d, ok := defByName[name]
	if !ok {
		return Def{}, false
	}
	return *d, true
}

// MaxValueBytes bounds one group config value (the longest valid one is a
// by_duration with nine-digit fractions, far below).
const MaxValueBytes = 1024

// Validate checks a group's complete override set against b (with
// defaults filled) as Kafka's GroupConfig.validate does: every key a group
// config, every value of its type and above Kafka's lower bound, then
// within the broker's [min, max]. The first problem, in key order, is
// returned (matching ErrInvalidConfig) with Kafka's message.
func Validate(overrides map[string]string, b Broker) error {
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := validateOne(k, overrides[k], b); err != nil {
			return invalid{err.Error()}
		}
	}
	return nil
}

func validateOne(name, value string, b Broker) error {
	d, ok := defByName[name]
	if !ok {
		if unsupported[name] {
			return fmt.Errorf("group config %s is not supported by Strata", name)
		}
		return fmt.Errorf("Unknown group config name: %s", name)
	}
	invalid := func(why string) error {
		return fmt.Errorf("Invalid value %s for configuration %s: %s", value, name, why)
	}
	if len(value) > MaxValueBytes {
		return fmt.Errorf("Invalid value for configuration %s: longer than %d bytes", name, MaxValueBytes)
	}
	switch d.Type {
	case TypeInt:
		n, err := parseInt(value)
		if err != nil {
			return invalid("Not a number of type INT")
		}
		if n < d.Min {
			return invalid(fmt.Sprintf("Value must be at least %d", d.Min))
		}
		lo, hi, _ := d.bounds(b)
		if n < lo || n > hi {
			return fmt.Errorf("%s must be in the range %d to %d inclusive.", name, lo, hi)
		}
	case TypeBoolean:
		if _, ok := parseBool(value); !ok {
			return invalid("Expected value to be either true or false")
		}
	case TypeDouble:
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return invalid("Not a number of type DOUBLE")
		}
		if name == BackoffJitter {
			if !(f >= 0 && f <= 1) {
				return invalid("Value must be between 0 and 1")
			}
		} else if !(f >= 1 && f <= 1000) {
			return invalid("Value must be between 1 and 1000")
		}
	case TypeString:
		switch name {
		case ShareIsolationLevel:
			if _, ok := parseIsolation(value); !ok {
				return invalid("String must be one of: read_committed, read_uncommitted")
			}
		case DLQTopicName:
			// Kafka 4.4 refuses internal names here; the prefix
			// (errors.deadletterqueue.topic.name.prefix) is checked when a
			// dead letter is written, as Kafka does.
			if strings.HasPrefix(strings.TrimSpace(value), "__") {
				return fmt.Errorf("%s: DLQ topic name must not start with '__'", name)
			}
		case ShareAutoOffsetReset:
			if _, ok := ParseAutoOffsetReset(value); !ok {
				return invalid(fmt.Sprintf("Invalid value `%s` for configuration %s. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.", value, name))
			}
		}
	}
	return nil
}

// parseInt parses an INT value as Kafka's ConfigDef does: trimmed,
// decimal, an optional sign, within int32.
func parseInt(s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	return n, err
}

// parseBool is ConfigDef's BOOLEAN: true or false, any case, trimmed.
func parseBool(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

func parseIsolation(s string) (readCommitted bool, ok bool) {
	switch strings.TrimSpace(s) {
	case "read_committed":
		return true, true
	case "read_uncommitted":
		return false, true
	}
	return false, false
}

// ResetKind is how a share partition without state picks its start offset
// (share.auto.offset.reset).
type ResetKind int8

const (
	ResetLatest     ResetKind = iota // the high watermark (Kafka's default)
	ResetEarliest                    // the log start offset
	ResetByDuration                  // the first record at or after now minus Duration (by timestamp)
)

func (k ResetKind) String() string {
	switch k {
	case ResetEarliest:
		return "earliest"
	case ResetByDuration:
		return "by_duration"
	}
	return "latest"
}

// AutoOffsetReset is a parsed share.auto.offset.reset.
type AutoOffsetReset struct {
	Kind ResetKind
	// DurationMs is by_duration's duration in milliseconds (never
	// negative).
	DurationMs int64
}

// Timestamp is the timestamp (unix ms) that ResetByDuration looks up:
// nowMs minus the duration, not below 0.
func (r AutoOffsetReset) Timestamp(nowMs int64) int64 {
	return max(nowMs-r.DurationMs, 0)
}

// ParseAutoOffsetReset parses latest, earliest or
// by_duration:<ISO-8601 duration> (Java's Duration.parse form, not
// negative), as Kafka 4.4 does: the value is trimmed, the keywords are
// lower case, the duration's letters may be either case.
func ParseAutoOffsetReset(s string) (AutoOffsetReset, bool) {
	s = strings.TrimSpace(s)
	switch s {
	case "latest":
		return AutoOffsetReset{Kind: ResetLatest}, true
	case "earliest":
		return AutoOffsetReset{Kind: ResetEarliest}, true
	}
	const prefix = "by_duration:"
	if !strings.HasPrefix(s, prefix) {
		return AutoOffsetReset{}, false
	}
	d, ok := ParseISODuration(s[len(prefix):])
	if !ok || d < 0 {
		return AutoOffsetReset{}, false
	}
	return AutoOffsetReset{Kind: ResetByDuration, DurationMs: d}, true
}

// Effective is a group's effective settings: its overrides over the
// broker's defaults.
type Effective struct {
	// Share-partition leader.
	RecordLockDuration      time.Duration   // share.record.lock.duration.ms
	DeliveryCountLimit      int             // share.delivery.count.limit
	PartitionMaxRecordLocks int             // share.partition.max.record.locks
	AutoOffsetReset         AutoOffsetReset // share.auto.offset.reset
	ReadCommitted           bool            // share.isolation.level=read_committed
	RenewAcknowledgeEnable  bool            // share.renew.acknowledge.enable
	// Dead-letter topic (KIP-1191): "" = none.
	DLQTopicName        string // errors.deadletterqueue.topic.name
	DLQCopyRecordEnable bool   // errors.deadletterqueue.copy.record.enable
	FloodPaused         bool   // strata.share.dlq.flood.paused
	// Delayed redelivery (Strata's): initial 0 = off.
	BackoffInitial    time.Duration // strata.share.redelivery.backoff.initial.ms
	BackoffMax        time.Duration // strata.share.redelivery.backoff.max.ms
	BackoffMultiplier float64       // strata.share.redelivery.backoff.multiplier
	BackoffJitter     float64       // strata.share.redelivery.backoff.jitter
	RecordTTL         time.Duration // strata.share.record.ttl.ms (0 = none)
	RecordHeaders     bool          // strata.share.record.headers.enable
	RedriveLimit      int           // strata.share.dlq.redrive.limit (0 = none)
	// Share-group membership.
	ShareSessionTimeout    time.Duration // share.session.timeout.ms
	ShareHeartbeatInterval time.Duration // share.heartbeat.interval.ms
	// KIP-848 consumer-group membership.
	ConsumerSessionTimeout    time.Duration // consumer.session.timeout.ms
	ConsumerHeartbeatInterval time.Duration // consumer.heartbeat.interval.ms
}

// Defaults is the effective settings of a group without overrides.
func Defaults(b Broker) Effective {
	return Effective{
		RecordLockDuration:        b.ShareRecordLockDuration,
		DeliveryCountLimit:        b.ShareDeliveryCountLimit,
		PartitionMaxRecordLocks:   b.SharePartitionMaxRecordLocks,
		RenewAcknowledgeEnable:    true,
		RecordHeaders:             true,
		RedriveLimit:              3,
		BackoffMax:                time.Minute,
		BackoffMultiplier:         2,
		ShareSessionTimeout:       b.ShareSessionTimeout,
		ShareHeartbeatInterval:    b.ShareHeartbeatInterval,
		ConsumerSessionTimeout:    b.ConsumerSessionTimeout,
		ConsumerHeartbeatInterval: b.ConsumerHeartbeatInterval,
	}
}

// Resolve returns the effective settings of a group with these overrides
// (validated when they were set) over b (with defaults filled). A value
// that no longer fits -- the broker restarted with narrower bounds -- is
// clamped into the broker's current [min, max]; one that does not parse
// (never stored by Strata) leaves the broker default. No allocation.
func Resolve(overrides map[string]string, b Broker) Effective {
	e := Defaults(b)
	if len(overrides) == 0 {
		return e
	}
	intOf := func(name string) (int64, bool) {
		v, ok := overrides[name]
		if !ok {
			return 0, false
		}
		n, err := parseInt(v)
		if err != nil {
			return 0, false
		}
		lo, hi, _ := defByName[name].bounds(b)
		return min(max(n, lo), hi), true
	}
	msOf := func(name string, p *time.Duration) {
		if n, ok := intOf(name); ok {
			*p = time.Duration(n) * time.Millisecond
		}
	}
	msOf(ShareRecordLockDurationMs, &e.RecordLockDuration)
	msOf(ShareSessionTimeoutMs, &e.ShareSessionTimeout)
	msOf(ShareHeartbeatIntervalMs, &e.ShareHeartbeatInterval)
	msOf(ConsumerSessionTimeoutMs, &e.ConsumerSessionTimeout)
	msOf(ConsumerHeartbeatIntervalMs, &e.ConsumerHeartbeatInterval)
	if n, ok := intOf(ShareDeliveryCountLimit); ok {
		e.DeliveryCountLimit = int(n)
	}
	if n, ok := intOf(SharePartitionMaxRecordLocks); ok {
		e.PartitionMaxRecordLocks = int(n)
	}
	if v, ok := overrides[ShareAutoOffsetReset]; ok {
		if r, ok := ParseAutoOffsetReset(v); ok {
			e.AutoOffsetReset = r
		}
	}
	if v, ok := overrides[ShareIsolationLevel]; ok {
		if rc, ok := parseIsolation(v); ok {
			e.ReadCommitted = rc
		}
	}
	if v, ok := overrides[ShareRenewAcknowledgeEnable]; ok {
		if on, ok := parseBool(v); ok {
			e.RenewAcknowledgeEnable = on
		}
	}
	if v, ok := overrides[DLQTopicName]; ok {
		e.DLQTopicName = strings.TrimSpace(v)
	}
	if v, ok := overrides[DLQCopyRecordEnable]; ok {
		if on, ok := parseBool(v); ok {
			e.DLQCopyRecordEnable = on
		}
	}
	msOf(BackoffInitialMs, &e.BackoffInitial)
	msOf(BackoffMaxMs, &e.BackoffMax)
	msOf(RecordTTLMs, &e.RecordTTL)
	if v, ok := overrides[BackoffMultiplier]; ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 1 && f <= 1000 {
			e.BackoffMultiplier = f
		}
	}
	if v, ok := overrides[BackoffJitter]; ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 0 && f <= 1 {
			e.BackoffJitter = f
		}
	}
	if v, ok := overrides[RecordHeadersEnable]; ok {
		if on, ok := parseBool(v); ok {
			e.RecordHeaders = on
		}
	}
	if n, ok := intOf(RedriveLimit); ok {
		e.RedriveLimit = int(n)
	}
	if v, ok := overrides[FloodPaused]; ok {
		if on, ok := parseBool(v); ok {
			e.FloodPaused = on
		}
	}
	return e
}

// Config sources of DescribeConfigs (Kafka's ConfigSource; on the wire).
const (
	SourceStaticBroker = 4 // STATIC_BROKER_CONFIG
	SourceDefault      = 5 // DEFAULT_CONFIG
	SourceGroup        = 8 // GROUP_CONFIG
)

// Entry is one group config as DescribeConfigs reports it.
type Entry struct {
	Name     string
	Value    string
	Source   int8
	Type     Type
	Doc      string
	Synonyms []Synonym
}

// Synonym is one layer behind an Entry, highest priority first.
type Synonym struct {
	Name   string
	Value  string
	Source int8
}

// Describe lists every group config with its effective value as Kafka
// 4.4 describes a GROUP resource. Synonyms, highest priority first: the
// group's override (GROUP_CONFIG) when set; the broker setting behind the
// config when given explicitly (STATIC_BROKER_CONFIG); Kafka's default
// under the broker setting's name (DEFAULT_CONFIG; under the config's own
// name for configs without a broker setting). The entry's source is its
// first synonym's.
func Describe(overrides map[string]string, b Broker) []Entry {
	out := make([]Entry, 0, len(Defs))
	for _, d := range Defs {
		e := Entry{Name: d.Name, Type: d.Type, Doc: d.Doc}
		if v, ok := overrides[d.Name]; ok {
			e.Synonyms = append(e.Synonyms, Synonym{Name: d.Name, Value: v, Source: SourceGroup})
		}
		if d.bounds == nil || d.Synonym == "" {
			e.Synonyms = append(e.Synonyms, Synonym{Name: d.Name, Value: d.Default, Source: SourceDefault})
		} else {
			if b.Explicit[d.Synonym] {
				_, _, n := d.bounds(b)
				e.Synonyms = append(e.Synonyms, Synonym{Name: d.Synonym, Value: strconv.FormatInt(n, 10), Source: SourceStaticBroker})
			}
			e.Synonyms = append(e.Synonyms, Synonym{Name: d.Synonym, Value: d.Default, Source: SourceDefault})
		}
		e.Value, e.Source = e.Synonyms[0].Value, e.Synonyms[0].Source
		out = append(out, e)
	}
	return out
}
