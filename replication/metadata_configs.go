package replication

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/strata-io/strata/retention"
)

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

// TopicConfig returns every config of a topic with its value and source, for
// DescribeConfigs.
func (q *metadataQuorum) TopicConfig(name string) ([]ConfigEntry, error) {
	t, ok := q.img.Load().topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, name)
	}
	return q.TopicConfigWith(t.Configs)
}

// TopicConfigWith is TopicConfig for a topic with these overrides that need
// not exist (CreateTopics' validate-only answer lists the configs the
// topic would have).
func (q *metadataQuorum) TopicConfigWith(overrides map[string]string) ([]ConfigEntry, error) {
	entries, err := retention.DescribeTopicLayers(overrides, q.brokerLayers(q.img.Load(), true))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	out := make([]ConfigEntry, len(entries))
	for i, e := range entries {
		out[i] = fromRetentionEntry(e)
	}
	return out, nil
}

// ownSetting is one of the broker's own settings, as DescribeConfigs
// lists it.
type ownSetting struct {
	name, value, def string
	typ              retention.Type
	doc              string
}

// ownSettings are the broker's own settings with their values. None is
// dynamic (as in Kafka): altering one is refused as read-only.
func ownSettings(c BrokerConfig) []ownSetting {
	return []ownSetting{
		{"node.id", strconv.Itoa(int(c.NodeID)), "", retention.TypeInt, "The node ID of this broker."},
		{"broker.id", strconv.Itoa(int(c.NodeID)), "", retention.TypeInt, "The broker ID (equal to node.id)."},
		{"broker.rack", c.Rack, "", retention.TypeString, "The rack of this broker."},
		{"log.dirs", c.DataDir, "", retention.TypeString, "The data directory (only the first of log.dirs is used)."},
		{"num.partitions", strconv.Itoa(int(c.NumPartitions)), "1", retention.TypeInt, "Partitions of auto-created topics and of CreateTopics with -1."},
		{"default.replication.factor", strconv.Itoa(int(c.DefaultReplicationFactor)), "1", retention.TypeInt, "Replication factor of auto-created topics and of CreateTopics with -1."},
		{"auto.create.topics.enable", strconv.FormatBool(c.AutoCreateTopics), "true", retention.TypeBoolean, "Create unknown topics on metadata requests and produce."},
		{"delete.topic.enable", strconv.FormatBool(c.DeleteTopicEnable), "true", retention.TypeBoolean, "Allow DeleteTopics."},
	}
}

// staticOnlySettings are further settings a broker is started with that
// are never dynamic, and not listed unless given.
var staticOnlySettings = []string{"listeners", "advertised.listeners", "controller.quorum.voters", "process.roles"}

// BrokerConfigEntries returns this broker's configs for DescribeConfigs on
// BROKER "<its id>": its own settings (read-only), the broker defaults of
// topic configs and the cleaner's settings with their dynamic and static
// layers (the dynamic ones writable), and any other setting given
// explicitly (read-only).
func (q *metadataQuorum) BrokerConfigEntries() []ConfigEntry {
	c := q.cfg
	own := ownSettings(c)
	seen := map[string]bool{}
	var out []ConfigEntry
	for _, o := range own {
		seen[o.name] = true
		e := ConfigEntry{Name: o.name, ReadOnly: true, Type: int8(o.typ), Doc: o.doc, Source: int8(retention.SourceStaticBroker)}
		if o.value != "" {
			e.Value = strPtr(o.value)
		}
		if o.def != "" && o.value == o.def {
			e.Source = int8(retention.SourceDefault)
		}
		e.Synonyms = []ConfigSynonym{{Name: o.name, Value: e.Value, Source: e.Source}}
		out = append(out, e)
	}
	for _, e := range retention.DescribeBrokerLayers(q.brokerLayers(q.img.Load(), true)) {
		seen[e.Name] = true
		out = append(out, fromRetentionEntry(e))
	}
	var rest []string
	for k := range c.BrokerProps {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		v := strPtr(c.BrokerProps[k])
		out = append(out, ConfigEntry{Name: k, Value: v, Source: int8(retention.SourceStaticBroker), ReadOnly: true,
			Type: int8(retention.TypeString), Synonyms: []ConfigSynonym{{Name: k, Value: v, Source: int8(retention.SourceStaticBroker)}}})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// BrokerDefaultConfigEntries returns the cluster-wide dynamic broker
// configs for DescribeConfigs on BROKER "": as Kafka, only those set, each
// with its synonyms below the per-broker level.
func (q *metadataQuorum) BrokerDefaultConfigEntries() []ConfigEntry {
	img := q.img.Load()
	set := img.brokerConfigs[""]
	var out []ConfigEntry
	for _, e := range retention.DescribeBrokerLayers(q.brokerLayers(img, false)) {
		if _, ok := set[e.Name]; ok {
			out = append(out, fromRetentionEntry(e))
		}
	}
	return out
}

func fromRetentionEntry(e retention.Entry) ConfigEntry {
	ce := ConfigEntry{Name: e.Name, Source: int8(e.Source), ReadOnly: e.ReadOnly, Sensitive: e.Sensitive, Type: int8(e.Type), Doc: e.Doc}
	if e.Value != "" || e.Source != retention.SourceDefault {
		ce.Value = strPtr(e.Value)
	}
	for _, s := range e.Synonyms {
		ce.Synonyms = append(ce.Synonyms, ConfigSynonym{Name: s.Name, Value: strPtr(s.Value), Source: int8(s.Source)})
	}
	return ce
}

func strPtr(s string) *string { return &s }
