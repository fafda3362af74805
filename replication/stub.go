package replication

import (
	"context"

	"github.com/strata-io/strata/log"
)

// STUB: fixes the method set so protocol compiles while the broker is
// written; the implementation replaces this file.

// Broker is this node's view of the cluster: replicated metadata, and the
// partitions it hosts. Safe for concurrent use.
type Broker struct{}

// NewBroker opens the metadata store and every local partition under
// cfg.DataDir.
func NewBroker(cfg BrokerConfig, logs *log.Manager) (*Broker, error) { panic("stub") }

func (b *Broker) NodeID() int32         { panic("stub") }
func (b *Broker) ClusterID() string     { panic("stub") }
func (b *Broker) ControllerID() int32   { panic("stub") }
func (b *Broker) Brokers() []BrokerInfo { panic("stub") }
func (b *Broker) Config() BrokerConfig  { panic("stub") }

// Topics returns every topic, sorted by name.
func (b *Broker) Topics() []TopicInfo { panic("stub") }

// Topic looks a topic up by name.
func (b *Broker) Topic(name string) (TopicInfo, bool) { panic("stub") }

// TopicByID looks a topic up by ID.
func (b *Broker) TopicByID(id [16]byte) (TopicInfo, bool) { panic("stub") }

// CreateTopic validates and (unless ValidateOnly) creates a topic,
// creating its partition logs. Returns the topic as created (or as it
// would be).
func (b *Broker) CreateTopic(ctx context.Context, req CreateTopicRequest) (TopicInfo, error) {
	panic("stub")
}

// AutoCreate creates name with the broker defaults if auto.create.topics.enable
// is set and the name is valid; it returns the topic either way if it exists.
func (b *Broker) AutoCreate(ctx context.Context, name string) (TopicInfo, error) { panic("stub") }

// DeleteTopic removes a topic and its partition files.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error { panic("stub") }

// CreatePartitions grows a topic to count partitions.
func (b *Broker) CreatePartitions(ctx context.Context, name string, count int32, assignment [][]int32, validateOnly bool) error {
	panic("stub")
}

// Partition returns the local log of a partition this broker leads.
// ErrUnknownTopicOrPartition or ErrNotLeader otherwise.
func (b *Broker) Partition(topic string, partition int32) (*log.Partition, error) { panic("stub") }

// Produce appends records to a partition this broker leads and returns once
// they are committed (the high watermark has passed them). acks=0 callers
// simply ignore the result.
func (b *Broker) Produce(ctx context.Context, topic string, partition int32, records []byte) (log.AppendResult, error) {
	panic("stub")
}

// AllocateProducerID returns a new, never before used producer ID
// (persisted so it survives restarts).
func (b *Broker) AllocateProducerID(ctx context.Context) (int64, error) { panic("stub") }

// TopicConfig returns every config of a topic with its value and source, for
// DescribeConfigs.
func (b *Broker) TopicConfig(name string) ([]ConfigEntry, error) { panic("stub") }

// BrokerConfigEntries returns the broker's configs for DescribeConfigs.
func (b *Broker) BrokerConfigEntries() []ConfigEntry { panic("stub") }

// Close flushes and closes everything.
func (b *Broker) Close() error { panic("stub") }

// ConfigEntry is one config as DescribeConfigs reports it.
type ConfigEntry struct {
	Name      string
	Value     *string // nil for sensitive or unset
	Source    int8    // Kafka's ConfigSource: 1 DYNAMIC_TOPIC, 4 STATIC_BROKER, 5 DEFAULT, ...
	ReadOnly  bool
	Sensitive bool
	Type      int8 // Kafka's ConfigType (v3+): 1 BOOLEAN, 2 STRING, 3 INT, 4 SHORT, 5 LONG, 6 DOUBLE, 7 LIST, 8 CLASS, 9 PASSWORD
	Doc       string
	Synonyms  []ConfigSynonym
}

// ConfigSynonym is one synonym of a config (the broker default behind a
// topic setting, for instance).
type ConfigSynonym struct {
	Name   string
	Value  *string
	Source int8
}
