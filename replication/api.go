package replication

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication/transport"
	"github.com/strata-io/strata/segment"
)

// This file is the contract protocol codes against: the Broker's
// configuration, its errors (each mapped to a Kafka code in
// protocol/errors.go) and the types its methods take and return. Behind
// it, the metadata is a Raft group (metadata_raft.go) and every partition a
// Raft group of its replicas whose LogStore is the partition's segments
// (partition_group.go); a single-broker cluster is the one-voter case of
// both (doc.go).

var (
	ErrUnknownTopicOrPartition  = errors.New("replication: unknown topic or partition")   // UNKNOWN_TOPIC_OR_PARTITION
	ErrUnknownTopicID           = errors.New("replication: unknown topic id")             // UNKNOWN_TOPIC_ID
	ErrTopicExists              = errors.New("replication: topic already exists")         // TOPIC_ALREADY_EXISTS
	ErrInvalidTopic             = errors.New("replication: invalid topic name")           // INVALID_TOPIC_EXCEPTION
	ErrInvalidPartitions        = errors.New("replication: invalid number of partitions") // INVALID_PARTITIONS
	ErrInvalidReplicationFactor = errors.New("replication: invalid replication factor")   // INVALID_REPLICATION_FACTOR
	ErrInvalidReplicaAssignment = errors.New("replication: invalid replica assignment")   // INVALID_REPLICA_ASSIGNMENT
	ErrInvalidConfig            = errors.New("replication: invalid config")               // INVALID_CONFIG
	ErrNotLeader                = errors.New("replication: not leader for partition")     // NOT_LEADER_OR_FOLLOWER
	ErrNotController            = errors.New("replication: not controller")               // NOT_CONTROLLER
	ErrTopicDeletionDisabled    = errors.New("replication: topic deletion disabled")      // TOPIC_DELETION_DISABLED
	ErrShuttingDown             = errors.New("replication: broker shutting down")         // NOT_LEADER_OR_FOLLOWER (this broker, the partition's group or the controller stopping)
)

// BrokerInfo is one registered broker.
type BrokerInfo struct {
	NodeID int32
	// Fenced is set by the controller when it has not heard from the
	// broker for broker.session.timeout.ms (metadata_fencing.go): Metadata leaves
	// it out until it is heard from again.
	Fenced bool `json:",omitempty"`
	Host   string
	Port   int32
	Rack   string // "" = none
	// Endpoints are the broker's advertised listeners besides the one in
	// Host and Port, "NAME://host:port" comma-separated (advertised.listeners;
	// "" = that one only): a client on listener NAME is told this
	// broker's address on NAME. A string keeps BrokerInfo comparable.
	Endpoints string `json:",omitempty"`
	// ReplicationAddr is the replication listener of a broker that is not
	// a metadata voter (process.roles=broker; metadata_roles.go): peers dial it for
	// partition groups. "" for a voter, whose address is its
	// controller.quorum.voters entry.
	ReplicationAddr string `json:",omitempty"`
	// ReplicaCapacity is how many partition replicas the broker's
	// open-file limit allows (OpenFileLimit, metadata_partition_limits.go); 0 =
	// unknown. The partition limits use it beside max.broker.partitions.
	ReplicaCapacity int64 `json:",omitempty"`
}

// PartitionInfo is one partition's placement.
type PartitionInfo struct {
	Partition   int32
	Leader      int32 // -1 when leaderless
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	// Target is the replica list an ongoing reassignment moves the
	// partition to (AlterPartitionReassignments); nil when none.
	Target []int32 `json:",omitempty"`
}

// TopicInfo is an immutable snapshot of one topic's metadata.
type TopicInfo struct {
	Name       string
	ID         [16]byte // the topic ID (a random UUID, never all zero)
	Internal   bool
	Partitions []PartitionInfo
	// Configs holds only the topic-level overrides, by Kafka name.
	Configs map[string]string
}

// BrokerConfig is this broker's static configuration, filled by cmd from
// flags, environment and server.properties.
type BrokerConfig struct {
	NodeID                   int32
	AdvertisedHost           string
	AdvertisedPort           int32
	Rack                     string
	DataDir                  string
	NumPartitions            int32 // num.partitions, for auto-created topics and CreateTopics with -1
	DefaultReplicationFactor int16 // default.replication.factor
	AutoCreateTopics         bool  // auto.create.topics.enable
	DeleteTopicEnable        bool  // delete.topic.enable
	// BrokerProps are the broker-level settings that give topic config
	// defaults (log.segment.bytes, log.roll.ms, message.max.bytes, ...), by
	// Kafka name, as given (only those set explicitly).
	BrokerProps map[string]string
	Logger      *slog.Logger
	Now         func() time.Time
	// FS is the filesystem for the broker's own files (meta.properties,
	// metadata.log); nil = the operating system's. Tests pass the same
	// segment.MemFS as the log manager's to simulate crashes.
	FS segment.FS
	// MinFreeBytes is strata.log.dir.min.free.bytes: while the file
	// system holding DataDir has fewer usable bytes, produce is refused
	// with KAFKA_STORAGE_ERROR and leaderships move to other replicas
	// (partition_disk_space.go). 0 = no check.
	MinFreeBytes int64
	// FreeSpace returns the usable bytes of the file system holding dir;
	// nil = statfs (tests and the fault injection pass their own).
	FreeSpace func(dir string) (int64, error)
	// OnStorageFatal, when set, is called when raft's own state cannot be
	// saved (its current term: hashicorp/raft panics on that error):
	// strata serve logs it and exits. nil = raft's panic.
	OnStorageFatal func(error)
	// OpenFileLimit is the process's open-file limit (RLIMIT_NOFILE);
	// each partition replica keeps FDsPerReplica files open, so it bounds
	// the replicas this broker can host (registered as
	// BrokerInfo.ReplicaCapacity). 0 = unknown, no bound.
	OpenFileLimit uint64
	// OnBrokerProps, when set, is called with this broker's effective
	// settings (BrokerProps under the dynamic broker configs) each time a
	// dynamic broker config change concerns this broker, on raft's FSM
	// goroutine: it must be quick and must not call into the broker. cmd
	// uses it for settings that live outside partitions
	// (log.cleaner.backoff.ms); see also EffectiveBrokerProps.
	OnBrokerProps func(props map[string]string)

	// Voters is the metadata quorum (controller.quorum.voters). Empty =
	// this broker alone: one voter, the same code path.
	Voters []Voter
	// BrokerOnly is process.roles=broker: this node is not among Voters;
	// it follows the metadata group as a Raft non-voter, added by the
	// controller when it asks to join (metadata_roles.go), and registers its
	// replication address (BrokerInfo.ReplicationAddr). It never becomes
	// the controller.
	BrokerOnly bool
	// ControllerOnly is process.roles=controller: a voter that never
	// registers as a broker, so it is in no Metadata broker list and no
	// replica placement (strata serve opens no Kafka listener for it).
	ControllerOnly bool
	// JoinOffLoopback lets a plaintext replication listener admit a node
	// that is neither a voter nor registered yet (a broker-only node
	// asking to join) from an address other than loopback
	// (replication.plaintext.allow.nonloopback). Such a node is always
	// admitted from loopback; with ReplicationTLS its node certificate
	// admits it.
	JoinOffLoopback bool
	// ReplicationListener carries every Raft group's traffic (doc.go,
	// "Raft design"); the broker owns it once NewBroker is called. nil is
	// allowed only when this broker is the only voter.
	ReplicationListener net.Listener
	// ReplicationAdvertise is the address other brokers dial to reach
	// ReplicationListener; empty = its address.
	ReplicationAdvertise string
	// ReplicationDial, when set, opens this broker's connections to its
	// peers' replication listeners instead of TCP (internal/sim runs a
	// whole cluster in one process over an in-memory network with it);
	// nil = TCP.
	ReplicationDial func(ctx context.Context, addr string) (net.Conn, error)
	// ReplicationTLS, when set, is mutual TLS with node certificates on
	// the replication listener and every connection to a peer
	// (transport/tls.go); nil = plaintext.
	ReplicationTLS *transport.TLS
	// PartitionHeartbeat is the raft HeartbeatTimeout of partition groups
	// with several voters (a follower that hears nothing from its leader
	// for this long to twice it starts an election): the time a dead
	// leader is replaced in, against the cost of idle partitions. 0 = 2s.
	PartitionHeartbeat time.Duration
	// AdvertisedEndpoints is every advertised listener (BrokerInfo.Endpoints).
	AdvertisedEndpoints string
	// StartTimeout bounds NewBroker's wait for the metadata quorum to have
	// a leader and for this broker to catch up (default 2 minutes).
	StartTimeout time.Duration
	// LeaderRebalance gives leaderships back to preferred replicas
	// (auto.leader.rebalance.enable; partition_rebalance.go). Off when zero.
	LeaderRebalance LeaderRebalanceConfig
	// BrokerSessionTimeout is broker.session.timeout.ms: the controller
	// fences a broker it has not heard from for this long (metadata_fencing.go).
	// 0 = no fencing.
	BrokerSessionTimeout time.Duration
}

// Voter is one member of the metadata quorum: controller.quorum.voters'
// id@host:port, where host:port is that broker's replication listener.
type Voter struct {
	NodeID int32
	Addr   string
}

// CreateTopicRequest is one topic of a CreateTopics request.
type CreateTopicRequest struct {
	Name              string
	NumPartitions     int32 // -1 = num.partitions
	ReplicationFactor int16 // -1 = default.replication.factor
	// Assignment, when non-nil, gives the replicas per partition explicitly.
	Assignment   map[int32][]int32
	Configs      map[string]string
	ValidateOnly bool
}

var _ = context.Background
var _ log.Offsets
