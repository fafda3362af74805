package replication

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/auth"
	"github.com/strata-io/strata/internal/quota"
)

// The cluster metadata state machine. Apply is a pure function from (image,
// command) to a new image: no clock, no randomness, no I/O, so that every
// replica that applies the same commands in the same order holds the same
// image. The commands come through the metadata Raft group: the controller
// proposes them and every broker applies them in log order
// (metadata_raft_fsm.go); a foundation-era metadata.log (metadata_log.go)
// goes through the same Apply once, when it is migrated into a new group
// (migrateMetadataLog, metadata_raft.go).

// errRejected marks a command that Apply refused; the image is unchanged.
// The controller applies a command to its image before it proposes it, so
// a rejected command in the Raft log is one that an earlier entry made
// invalid on the way (or a bug); every replica rejects it alike and skips
// it (metadata_raft_fsm_test.go).
var errRejected = errors.New("replication: metadata command rejected")

// CommandType names a metadata command. The numbers are persisted in the
// metadata log and must not change.
type CommandType uint8

const (
	CmdRegisterBroker      CommandType = 1
	CmdCreateTopic         CommandType = 2
	CmdDeleteTopic         CommandType = 3 // topic gone from metadata; its logs still to remove
	CmdDeleteTopicDone     CommandType = 4 // its logs are removed
	CmdCreatePartitions    CommandType = 5
	CmdSetTopicConfigs     CommandType = 6
	CmdAllocateProducerIDs CommandType = 7
	// CmdPartitionLeaders records partition leaders as their Raft groups
	// elected them (partition_leaders.go). 20: numbers below are left for
	// other commands in flight.
	CmdPartitionLeaders CommandType = 20
	// CmdReassign starts (or cancels) a partition reassignment;
	// CmdReassignDone finishes it (metadata_reassign.go).
	CmdReassign     CommandType = 21
	CmdReassignDone CommandType = 22
)

func (t CommandType) String() string {
	switch t {
	case CmdRegisterBroker:
		return "RegisterBroker"
	case CmdCreateTopic:
		return "CreateTopic"
	case CmdDeleteTopic:
		return "DeleteTopic"
	case CmdDeleteTopicDone:
		return "DeleteTopicDone"
	case CmdCreatePartitions:
		return "CreatePartitions"
	case CmdSetTopicConfigs:
		return "SetTopicConfigs"
	case CmdSetBrokerConfigs:
		return "SetBrokerConfigs"
	case CmdSetGroupConfigs:
		return "SetGroupConfigs"
	case CmdSetFeatures:
		return "SetFeatures"
	case CmdAllocateProducerIDs:
		return "AllocateProducerIDs"
	case CmdPartitionLeaders:
		return "PartitionLeaders"
	case CmdReassign:
		return "Reassign"
	case CmdReassignDone:
		return "ReassignDone"
	case CmdUnregisterBroker:
		return "UnregisterBroker"
	case CmdACLs:
		return "ACLs"
	case CmdClientQuotas:
		return "ClientQuotas"
	}
	return fmt.Sprintf("CommandType(%d)", uint8(t))
}

// Assignment is one partition's replica list in a command.
type Assignment struct {
	Partition int32   `json:"p"`
	Replicas  []int32 `json:"r"`
}

// Command is one metadata change. Only the fields its Type uses are set.
// It is persisted as JSON (metadata_log.go): field names are part of the
// on-disk format.
type Command struct {
	Type CommandType `json:"type"`

	Broker *BrokerInfo `json:"broker,omitempty"` // RegisterBroker

	Topic      string            `json:"topic,omitempty"`      // CreateTopic, DeleteTopic, CreatePartitions, SetTopicConfigs
	TopicID    [16]byte          `json:"topicId"`              // CreateTopic, DeleteTopic, DeleteTopicDone
	Partitions []Assignment      `json:"partitions,omitempty"` // CreateTopic, CreatePartitions (the new ones)
	Configs    map[string]string `json:"configs,omitempty"`    // CreateTopic, SetTopicConfigs, SetBrokerConfigs, SetGroupConfigs (the complete set)

	// ConfigResource is SetBrokerConfigs' BROKER resource (a node ID, or
	// "" for the cluster-wide default) or SetGroupConfigs' group ID.
	ConfigResource string `json:"configResource,omitempty"`

	// Features are SetFeatures' finalized levels by feature name.
	Features map[string]int16 `json:"features,omitempty"`

	// AllocateProducerIDs: the block [ProducerIDStart, ProducerIDStart+ProducerIDCount).
	ProducerIDStart int64 `json:"pidStart,omitempty"`
	ProducerIDCount int64 `json:"pidCount,omitempty"`

	// PartitionLeaders: leaders as their groups elected them.
	Leaders []LeaderReport `json:"leaders,omitempty"`

	// Reassign, ReassignDone.
	Reassign *ReassignChange `json:"reassign,omitempty"`

	// ScramCredentials (metadata_scram.go).
	Scram []ScramChange `json:"scram,omitempty"`

	// ACLs (metadata_acls.go).
	ACLs *ACLChange `json:"acls,omitempty"`

	// ClientQuotas (metadata_quotas.go).
	Quotas []quota.Change `json:"quotas,omitempty"`
}

// pendingDelete is a topic removed from metadata whose logs may still be
// on disk (CmdDeleteTopic applied, CmdDeleteTopicDone not yet).
type pendingDelete struct {
	Name       string
	Partitions int32
}

// image is one immutable version of the cluster metadata. A new command
// produces a new image (copy on write of the maps it touches); readers load
// the current one from Broker.img without locks.
//
// Invariants: every topic in topics is in byID under its ID and vice versa;
// every topic's partitions are numbered 0..n-1; nextProducerID only grows.
type image struct {
	topics  map[string]*TopicInfo
	byID    map[[16]byte]*TopicInfo
	names   []string // sorted keys of topics
	brokers map[int32]BrokerInfo
	pending map[[16]byte]pendingDelete
	// nextProducerID is the first producer ID of the next block to hand out.
	nextProducerID int64
	// applied counts the commands applied (rejected ones included).
	applied int64
	// partitions is the number of partitions of all topics in topics.
	partitions int
	// brokerConfigs are the dynamic broker configs by BROKER resource
	// ("" = cluster default, else a node ID); metadata_broker_configs.go.
	brokerConfigs map[string]map[string]string
	// groupConfigs are the group config overrides by group ID; each
	// group's map is immutable once stored (metadata_group_configs.go).
	groupConfigs map[string]map[string]string
	// features are the finalized feature levels set by UpdateFeatures and
	// featuresEpoch the applied count of the last change (metadata_features.go).
	features      map[string]int16
	featuresEpoch int64
	// scram are the SCRAM credentials by user and mechanism (metadata_scram.go).
	scram map[scramKey]auth.ScramCredential
	// acls are the ACL bindings (metadata_acls.go); nil when there are none.
	acls *acl.Set
	// quotas are the client quota configs (metadata_quotas.go); nil when there
	// are none.
	quotas *quota.Set
}

func (im *image) partitionCount() int { return im.partitions }

// firstProducerID is where producer IDs start; 0 is valid in Kafka but
// starting higher makes IDs easy to tell from counts in logs.
const firstProducerID = 1000

func newImage() *image {
	return &image{
		topics:         map[string]*TopicInfo{},
		byID:           map[[16]byte]*TopicInfo{},
		brokers:        map[int32]BrokerInfo{},
		pending:        map[[16]byte]pendingDelete{},
		nextProducerID: firstProducerID,
	}
}

// clone is a shallow copy; Apply replaces the maps it changes.
func (im *image) clone() *image {
	c := *im
	return &c
}

func (im *image) withTopics(f func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo)) {
	topics := make(map[string]*TopicInfo, len(im.topics)+1)
	for k, v := range im.topics {
		topics[k] = v
	}
	byID := make(map[[16]byte]*TopicInfo, len(im.byID)+1)
	for k, v := range im.byID {
		byID[k] = v
	}
	f(topics, byID)
	im.topics, im.byID = topics, byID
	im.names = im.names[:0:0]
	im.partitions = 0
	for n, t := range topics {
		im.names = append(im.names, n)
		im.partitions += len(t.Partitions)
	}
	sort.Strings(im.names)
}

func (im *image) withPending(f func(map[[16]byte]pendingDelete)) {
	p := make(map[[16]byte]pendingDelete, len(im.pending)+1)
	for k, v := range im.pending {
		p[k] = v
	}
	f(p)
	im.pending = p
}

// also is err that also matches extra (errors.Is), with err's message: a
// rejection that has a more specific meaning for clients.
type also struct{ err, extra error }

func (e also) Error() string   { return e.err.Error() }
func (e also) Unwrap() []error { return []error{e.err, e.extra} }

// Apply returns the image after c. On an invalid command it returns the
// receiver unchanged (apart from the applied count) and an error wrapping
// errRejected.
func (im *image) Apply(c Command) (*image, error) {
	next := im.clone()
	next.applied++
	reject := func(format string, args ...any) (*image, error) {
		same := im.clone()
		same.applied++
		return same, fmt.Errorf("%w: %s: %s", errRejected, c.Type, fmt.Sprintf(format, args...))
	}
	switch c.Type {
	case CmdRegisterBroker:
		if c.Broker == nil || c.Broker.NodeID < 0 {
			return reject("missing or negative broker")
		}
		brokers := make(map[int32]BrokerInfo, len(im.brokers)+1)
		for k, v := range im.brokers {
			brokers[k] = v
		}
		brokers[c.Broker.NodeID] = *c.Broker
		next.brokers = brokers

	case CmdCreateTopic:
		if _, ok := im.topics[c.Topic]; ok {
			same, err := reject("topic %q exists", c.Topic)
			return same, also{err, ErrTopicExists}
		}
		if c.TopicID == ([16]byte{}) {
			return reject("zero topic id")
		}
		if _, ok := im.byID[c.TopicID]; ok {
			return reject("topic id of %q in use", c.Topic)
		}
		if _, ok := im.pending[c.TopicID]; ok {
			return reject("topic id of %q in use by a deleted topic", c.Topic)
		}
		if err := checkAssignments(c.Partitions, 0); err != nil {
			return reject("%s: %v", c.Topic, err)
		}
		t := &TopicInfo{
			Name:     c.Topic,
			ID:       c.TopicID,
			Internal: strings.HasPrefix(c.Topic, "__"),
			Configs:  copyConfigs(c.Configs),
		}
		t.Partitions = appendPartitions(nil, c.Partitions)
		next.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
			topics[t.Name] = t
			byID[t.ID] = t
		})

	case CmdDeleteTopic:
		t, ok := im.topics[c.Topic]
		if !ok || t.ID != c.TopicID {
			return reject("no topic %q with that id", c.Topic)
		}
		next.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
			delete(topics, t.Name)
			delete(byID, t.ID)
		})
		next.withPending(func(p map[[16]byte]pendingDelete) {
			p[t.ID] = pendingDelete{Name: t.Name, Partitions: int32(len(t.Partitions))}
		})

	case CmdDeleteTopicDone:
		if _, ok := im.pending[c.TopicID]; !ok {
			return reject("no pending deletion for that id")
		}
		next.withPending(func(p map[[16]byte]pendingDelete) { delete(p, c.TopicID) })

	case CmdCreatePartitions:
		t, ok := im.topics[c.Topic]
		if !ok {
			return reject("no topic %q", c.Topic)
		}
		if err := checkAssignments(c.Partitions, int32(len(t.Partitions))); err != nil {
			return reject("%s: %v", c.Topic, err)
		}
		nt := *t
		nt.Partitions = appendPartitions(append([]PartitionInfo(nil), t.Partitions...), c.Partitions)
		next.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
			topics[nt.Name] = &nt
			byID[nt.ID] = &nt
		})

	case CmdSetTopicConfigs:
		t, ok := im.topics[c.Topic]
		if !ok {
			return reject("no topic %q", c.Topic)
		}
		nt := *t
		nt.Configs = copyConfigs(c.Configs)
		next.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
			topics[nt.Name] = &nt
			byID[nt.ID] = &nt
		})

	case CmdSetBrokerConfigs:
		if err := next.setBrokerConfigs(c.ConfigResource, c.Configs); err != nil {
			return reject("%v", err)
		}

	case CmdSetGroupConfigs:
		if err := next.setGroupConfigs(c.ConfigResource, c.Configs); err != nil {
			return reject("%v", err)
		}

	case CmdSetFeatures:
		if err := next.setFeatures(c.Features); err != nil {
			return reject("%v", err)
		}

	case CmdAllocateProducerIDs:
		if c.ProducerIDStart != im.nextProducerID || c.ProducerIDCount <= 0 ||
			c.ProducerIDStart > maxProducerID-c.ProducerIDCount {
			return reject("block [%d, +%d) does not start at %d or overflows", c.ProducerIDStart, c.ProducerIDCount, im.nextProducerID)
		}
		next.nextProducerID = c.ProducerIDStart + c.ProducerIDCount

	case CmdPartitionLeaders:
		if len(c.Leaders) == 0 {
			return reject("no leaders")
		}
		next.applyLeaders(c.Leaders)

	case CmdReassign, CmdReassignDone:
		if err := next.applyReassign(c.Type, c.Reassign); err != nil {
			return reject("%v", err)
		}

	case CmdScramCredentials:
		if err := next.applyScram(c.Scram); err != nil {
			return reject("%v", err)
		}

	case CmdACLs:
		if err := next.applyACLs(c.ACLs); err != nil {
			return reject("%v", err)
		}

	case CmdClientQuotas:
		if err := next.applyQuotas(c.Quotas); err != nil {
			return reject("%v", err)
		}

	case CmdUnregisterBroker:
		if err := next.applyUnregister(c.Broker); err != nil {
			same, rerr := reject("%v", err)
			return same, also{rerr, ErrBrokerNotRegistered}
		}

	default:
		return reject("unknown command type")
	}
	return next, nil
}

// maxProducerID is the largest producer ID handed out (int64, positive).
const maxProducerID = int64(1<<63 - 1)

// checkAssignments checks that as numbers partitions first, first+1, ...
// in order, each with a non-empty list of distinct, non-negative replicas.
func checkAssignments(as []Assignment, first int32) error {
	if len(as) == 0 {
		return errors.New("no partitions")
	}
	for i, a := range as {
		if a.Partition != first+int32(i) {
			return fmt.Errorf("partition %d out of order (want %d)", a.Partition, first+int32(i))
		}
		if len(a.Replicas) == 0 {
			return fmt.Errorf("partition %d has no replicas", a.Partition)
		}
		for j, r := range a.Replicas {
			if r < 0 {
				return fmt.Errorf("partition %d: negative replica %d", a.Partition, r)
			}
			for _, q := range a.Replicas[:j] {
				if q == r {
					return fmt.Errorf("partition %d: replica %d listed twice", a.Partition, r)
				}
			}
		}
	}
	return nil
}

// appendPartitions adds the partitions of as to ps. The first replica leads
// (one voter: the leader is known without an election); leader epoch 0.
func appendPartitions(ps []PartitionInfo, as []Assignment) []PartitionInfo {
	for _, a := range as {
		reps := append([]int32(nil), a.Replicas...)
		ps = append(ps, PartitionInfo{
			Partition:   a.Partition,
			Leader:      reps[0],
			LeaderEpoch: 0,
			Replicas:    reps,
			ISR:         reps,
		})
	}
	return ps
}

func copyConfigs(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
