package retention

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-io/strata/log"
)

// Errors. Both are reported to clients as INVALID_CONFIG; the message names
// the offending key.
var (
	ErrUnknownConfig = errors.New("retention: unknown config")
	ErrInvalidValue  = errors.New("retention: invalid config value")
)

// Type is Kafka's ConfigType as DescribeConfigs (v3+) reports it. The
// numbers are on the wire and must not change.
type Type int8

const (
	TypeBoolean Type = 1
	TypeString  Type = 2
	TypeInt     Type = 3
	TypeShort   Type = 4
	TypeLong    Type = 5
	TypeDouble  Type = 6
	TypeList    Type = 7
)

func (t Type) String() string {
	switch t {
	case TypeBoolean:
		return "boolean"
	case TypeString:
		return "string"
	case TypeInt:
		return "int"
	case TypeShort:
		return "short"
	case TypeLong:
		return "long"
	case TypeDouble:
		return "double"
	case TypeList:
		return "list"
	}
	return "unknown"
}

// Source is Kafka's ConfigSource as DescribeConfigs reports it (on the wire).
type Source int8

const (
	SourceDynamicTopic Source = 1 // DYNAMIC_TOPIC_CONFIG: a topic override
	SourceStaticBroker Source = 4 // STATIC_BROKER_CONFIG: server.properties, flags or environment
	SourceDefault      Source = 5 // DEFAULT_CONFIG: the built-in default
)

// maxValueLen bounds a config value; Kafka has no limit but nothing
// legitimate comes near it and values are persisted in metadata.
const maxValueLen = 4096

// Synonym is a broker setting that supplies a topic config's default.
type Synonym struct {
	Name string
	Type Type
	// Scale converts the synonym's unit into the topic config's unit
	// (log.retention.hours -> retention.ms is 3,600,000). 1 when equal.
	Scale int64
	// Default is the synonym's own built-in default in its own unit, ""
	// when Kafka leaves it null (the next synonym then applies).
	Default string
}

// Def describes one topic config.
type Def struct {
	Name    string
	Type    Type
	Default string // in the config's own unit
	Doc     string
	// Synonyms are the broker settings that give the default, highest
	// priority first (log.retention.ms before log.retention.minutes before
	// log.retention.hours), as Kafka resolves them.
	Synonyms []Synonym
	// Min and Max bound numeric values (inclusive).
	Min, Max float64
	// Valid lists the accepted values of a string, or of each list element.
	Valid []string
	// Also lists numeric values accepted outside [Min, Max] (gzip's -1).
	Also []string
}

const (
	maxLong = math.MaxInt64
	maxInt  = math.MaxInt32
	msHour  = int64(time.Hour / time.Millisecond)
	msMin   = int64(time.Minute / time.Millisecond)
)

var maxLongStr = strconv.FormatInt(math.MaxInt64, 10)

// defs is the table of topic configs, Kafka's names, types, defaults
// (Kafka 4.0) and broker synonyms.
var defs = []Def{
	{Name: "cleanup.policy", Type: TypeList, Default: "delete", Valid: []string{"compact", "delete"},
		Doc:      "The retention policy for old segments: delete, compact, or both.",
		Synonyms: []Synonym{{Name: "log.cleanup.policy", Type: TypeList, Scale: 1, Default: "delete"}}},
	{Name: "compression.type", Type: TypeString, Default: "producer",
		Valid:    []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"},
		Doc:      "The final compression type of the topic; producer keeps the codec the producer used.",
		Synonyms: []Synonym{{Name: "compression.type", Type: TypeString, Scale: 1, Default: "producer"}}},
	// Codec levels (KIP-390, Kafka 3.8) for when the broker recompresses.
	{Name: "compression.gzip.level", Type: TypeInt, Default: "-1", Min: 1, Max: 9, Also: []string{"-1"},
		Doc:      "The gzip level when compression.type is gzip; -1 = the codec's default.",
		Synonyms: []Synonym{{Name: "compression.gzip.level", Type: TypeInt, Scale: 1, Default: "-1"}}},
	{Name: "compression.lz4.level", Type: TypeInt, Default: "9", Min: 1, Max: 17,
		Doc:      "The lz4 level when compression.type is lz4.",
		Synonyms: []Synonym{{Name: "compression.lz4.level", Type: TypeInt, Scale: 1, Default: "9"}}},
	{Name: "compression.zstd.level", Type: TypeInt, Default: "3", Min: -131072, Max: 22,
		Doc:      "The zstd level when compression.type is zstd.",
		Synonyms: []Synonym{{Name: "compression.zstd.level", Type: TypeInt, Scale: 1, Default: "3"}}},
	{Name: "delete.retention.ms", Type: TypeLong, Default: "86400000", Min: 0, Max: maxLong,
		Doc:      "How long delete tombstones are retained for compacted topics.",
		Synonyms: []Synonym{{Name: "log.cleaner.delete.retention.ms", Type: TypeLong, Scale: 1, Default: "86400000"}}},
	// KIP-1191 (Kafka 4.4): share groups may write dead letters to this
	// topic only when it is true (no broker default setting).
	{Name: "errors.deadletterqueue.group.enable", Type: TypeBoolean, Default: "false",
		Doc: "Enable this topic to be used as a dead-letter queue for share groups. When set to true, share groups can write undeliverable records to this topic. When set to false (the default), attempts to use this topic as a DLQ will be rejected."},
	{Name: "file.delete.delay.ms", Type: TypeLong, Default: "60000", Min: 0, Max: maxLong,
		Doc:      "How long to wait before deleting a file from the filesystem.",
		Synonyms: []Synonym{{Name: "log.segment.delete.delay.ms", Type: TypeLong, Scale: 1, Default: "60000"}}},
	{Name: "flush.messages", Type: TypeLong, Default: maxLongStr, Min: 1, Max: maxLong,
		Doc:      "fsync the log after this many messages.",
		Synonyms: []Synonym{{Name: "log.flush.interval.messages", Type: TypeLong, Scale: 1, Default: maxLongStr}}},
	{Name: "flush.ms", Type: TypeLong, Default: maxLongStr, Min: 0, Max: maxLong,
		Doc:      "fsync the log when the oldest unflushed write is this old.",
		Synonyms: []Synonym{{Name: "log.flush.interval.ms", Type: TypeLong, Scale: 1}}},
	{Name: "index.interval.bytes", Type: TypeInt, Default: "4096", Min: 0, Max: maxInt,
		Doc:      "Bytes of log between two offset index entries.",
		Synonyms: []Synonym{{Name: "log.index.interval.bytes", Type: TypeInt, Scale: 1, Default: "4096"}}},
	{Name: "max.compaction.lag.ms", Type: TypeLong, Default: maxLongStr, Min: 1, Max: maxLong,
		Doc:      "The longest a message stays ineligible for compaction.",
		Synonyms: []Synonym{{Name: "log.cleaner.max.compaction.lag.ms", Type: TypeLong, Scale: 1, Default: maxLongStr}}},
	{Name: "max.message.bytes", Type: TypeInt, Default: "1048588", Min: 0, Max: maxInt,
		Doc:      "The largest record batch size allowed.",
		Synonyms: []Synonym{{Name: "message.max.bytes", Type: TypeInt, Scale: 1, Default: "1048588"}}},
	{Name: "message.timestamp.type", Type: TypeString, Default: "CreateTime", Valid: []string{"CreateTime", "LogAppendTime"},
		Doc:      "Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).",
		Synonyms: []Synonym{{Name: "log.message.timestamp.type", Type: TypeString, Scale: 1, Default: "CreateTime"}}},
	{Name: "message.timestamp.before.max.ms", Type: TypeLong, Default: maxLongStr, Min: 0, Max: maxLong,
		Doc:      "How far a CreateTime timestamp may be behind the broker's clock.",
		Synonyms: []Synonym{{Name: "log.message.timestamp.before.max.ms", Type: TypeLong, Scale: 1, Default: maxLongStr}}},
	{Name: "message.timestamp.after.max.ms", Type: TypeLong, Default: "3600000", Min: 0, Max: maxLong,
		Doc:      "How far a CreateTime timestamp may be ahead of the broker's clock.",
		Synonyms: []Synonym{{Name: "log.message.timestamp.after.max.ms", Type: TypeLong, Scale: 1, Default: "3600000"}}},
	{Name: "min.cleanable.dirty.ratio", Type: TypeDouble, Default: "0.5", Min: 0, Max: 1,
		Doc:      "The dirty fraction of the log above which it is compacted.",
		Synonyms: []Synonym{{Name: "log.cleaner.min.cleanable.ratio", Type: TypeDouble, Scale: 1, Default: "0.5"}}},
	{Name: "min.compaction.lag.ms", Type: TypeLong, Default: "0", Min: 0, Max: maxLong,
		Doc:      "The shortest a message stays uncompacted.",
		Synonyms: []Synonym{{Name: "log.cleaner.min.compaction.lag.ms", Type: TypeLong, Scale: 1, Default: "0"}}},
	{Name: "min.insync.replicas", Type: TypeInt, Default: "1", Min: 1, Max: maxInt,
		Doc:      "The fewest in-sync replicas an acks=all write needs.",
		Synonyms: []Synonym{{Name: "min.insync.replicas", Type: TypeInt, Scale: 1, Default: "1"}}},
	{Name: "preallocate", Type: TypeBoolean, Default: "false",
		Doc:      "Preallocate the file when a segment is created.",
		Synonyms: []Synonym{{Name: "log.preallocate", Type: TypeBoolean, Scale: 1, Default: "false"}}},
	{Name: "retention.bytes", Type: TypeLong, Default: "-1", Min: -1, Max: maxLong,
		Doc:      "The largest a partition grows before old segments are deleted; -1 = no limit.",
		Synonyms: []Synonym{{Name: "log.retention.bytes", Type: TypeLong, Scale: 1, Default: "-1"}}},
	{Name: "retention.ms", Type: TypeLong, Default: "604800000", Min: -1, Max: maxLong,
		Doc: "How long a segment is kept before it is deleted; -1 = no limit.",
		Synonyms: []Synonym{
			{Name: "log.retention.ms", Type: TypeLong, Scale: 1},
			{Name: "log.retention.minutes", Type: TypeInt, Scale: msMin},
			{Name: "log.retention.hours", Type: TypeInt, Scale: msHour, Default: "168"},
		}},
	// Kafka 4.0 raised segment.bytes's minimum to 1 MiB; Strata keeps the
	// Kafka 3 minimum (14, a v0 record's overhead) so tests can roll often.
	{Name: "segment.bytes", Type: TypeInt, Default: "1073741824", Min: 14, Max: maxInt,
		Doc:      "The size of a segment file.",
		Synonyms: []Synonym{{Name: "log.segment.bytes", Type: TypeInt, Scale: 1, Default: "1073741824"}}},
	{Name: "segment.index.bytes", Type: TypeInt, Default: "10485760", Min: 4, Max: maxInt,
		Doc:      "The size of the index that maps offsets to file positions.",
		Synonyms: []Synonym{{Name: "log.index.size.max.bytes", Type: TypeInt, Scale: 1, Default: "10485760"}}},
	{Name: "segment.jitter.ms", Type: TypeLong, Default: "0", Min: 0, Max: maxLong,
		Doc: "The largest random jitter subtracted from segment.ms to avoid thundering herds of rolls.",
		Synonyms: []Synonym{
			{Name: "log.roll.jitter.ms", Type: TypeLong, Scale: 1},
			{Name: "log.roll.jitter.hours", Type: TypeInt, Scale: msHour, Default: "0"},
		}},
	{Name: "segment.ms", Type: TypeLong, Default: "604800000", Min: 1, Max: maxLong,
		Doc: "Roll a new segment after this time even if the active one is not full.",
		Synonyms: []Synonym{
			{Name: "log.roll.ms", Type: TypeLong, Scale: 1},
			{Name: "log.roll.hours", Type: TypeInt, Scale: msHour, Default: "168"},
		}},
	// Strata's overflow rule for queues (protocol/produce_backlog.go): no
	// broker default; the rule is on when both are set.
	{Name: "strata.produce.backlog.group", Type: TypeString, Default: "",
		Doc: "A consumer group or share group whose backlog bounds this topic (Strata-specific): while the group has more than strata.produce.backlog.max.records records not consumed, producers get NOT_ENOUGH_REPLICAS (retriable) instead of filling the disk."},
	{Name: "strata.produce.backlog.max.records", Type: TypeLong, Default: "-1", Min: -1, Max: maxLong,
		Doc: "The most records strata.produce.backlog.group may have not consumed (lag for a consumer group, unacknowledged records for a share group) before producing to this topic is refused; -1 = no limit (Strata-specific)."},
	{Name: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false",
		Doc:      "Whether a replica outside the ISR may become leader (may lose data).",
		Synonyms: []Synonym{{Name: "unclean.leader.election.enable", Type: TypeBoolean, Scale: 1, Default: "false"}}},
}

var (
	defByName     = map[string]*Def{}
	synonymByName = map[string]synonymRef{}
)

type synonymRef struct {
	def *Def
	syn Synonym
}

func init() {
	for i := range defs {
		d := &defs[i]
		if _, dup := defByName[d.Name]; dup {
			panic("retention: duplicate config " + d.Name)
		}
		defByName[d.Name] = d
		for _, s := range d.Synonyms {
			synonymByName[s.Name] = synonymRef{def: d, syn: s}
		}
	}
}

// Defs returns the topic config definitions sorted by name. The slice is a
// copy; the Synonyms slices are shared and must not be modified.
func Defs() []Def {
	out := append([]Def(nil), defs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the definition of a topic config.
func Lookup(name string) (Def, bool) {
	d, ok := defByName[name]
	if !ok {
		return Def{}, false
	}
	return *d, true
}

// IsBrokerSetting reports whether name is a broker setting that supplies a
// topic config default (log.retention.hours, message.max.bytes, ...).
func IsBrokerSetting(name string) bool {
	_, ok := synonymByName[name]
	return ok
}

// BrokerSettings returns the names of every broker setting that supplies a
// topic config default, sorted.
func BrokerSettings() []string {
	out := make([]string, 0, len(synonymByName))
	for n := range synonymByName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ValidateTopic checks a set of topic overrides: every key known, every
// value of the right type and in range, and the cross-key rules. The error
// names the first offending key (keys are checked in sorted order so the
// message is deterministic) and wraps ErrUnknownConfig or ErrInvalidValue.
func ValidateTopic(overrides map[string]string) error {
	keys := sortedKeys(overrides)
	for _, k := range keys {
		d, ok := defByName[k]
		if !ok {
			return fmt.Errorf("%w: %q is not a topic config", ErrUnknownConfig, k)
		}
		if err := checkValue(k, d.Type, overrides[k], d); err != nil {
			return err
		}
	}
	// Cross-key rules are checked on the effective values in Resolve; here
	// only the overrides themselves are known, which is what Kafka checks.
	if minLag, ok := overrides["min.compaction.lag.ms"]; ok {
		if maxLag, ok := overrides["max.compaction.lag.ms"]; ok {
			lo, _ := strconv.ParseInt(minLag, 10, 64)
			hi, _ := strconv.ParseInt(maxLag, 10, 64)
			if lo > hi {
				return fmt.Errorf("%w: min.compaction.lag.ms=%d is greater than max.compaction.lag.ms=%d", ErrInvalidValue, lo, hi)
			}
		}
	}
	return nil
}

// ValidateBroker checks broker settings that supply topic defaults. Keys
// that are not such settings are ignored (the broker's own settings such as
// node.id are cmd's to check); use IsBrokerSetting to tell them apart.
func ValidateBroker(props map[string]string) error {
	for _, k := range sortedKeys(props) {
		if !IsBrokerSetting(k) {
			continue
		}
		if err := ValidateBrokerSetting(k, props[k]); err != nil {
			return err
		}
	}
	return nil
}

// ValidateBrokerSetting checks one broker setting that supplies a topic
// default. ErrUnknownConfig when name is not such a setting.
func ValidateBrokerSetting(name, value string) error {
	ref, ok := synonymByName[name]
	if !ok {
		return fmt.Errorf("%w: %q is not a broker log setting", ErrUnknownConfig, name)
	}
	if err := checkValue(name, ref.syn.Type, value, nil); err != nil {
		return err
	}
	// The scaled value must fit the topic config's range (log.retention.hours
	// = -1 means unlimited, as Kafka treats it).
	if _, err := scaled(ref.def, ref.syn, value); err != nil {
		return err
	}
	return nil
}

// checkValue parses value as typ and checks range and valid values (when d
// is non-nil). name is only used in messages.
func checkValue(name string, typ Type, value string, d *Def) error {
	if len(value) > maxValueLen {
		return fmt.Errorf("%w: %s: value is %d bytes long, more than %d", ErrInvalidValue, name, len(value), maxValueLen)
	}
	v := strings.TrimSpace(value)
	bad := func(why string) error {
		return fmt.Errorf("%w: %s=%q: %s", ErrInvalidValue, name, value, why)
	}
	switch typ {
	case TypeBoolean:
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return bad("expected true or false")
		}
	case TypeShort, TypeInt, TypeLong:
		bits := map[Type]int{TypeShort: 16, TypeInt: 32, TypeLong: 64}[typ]
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return bad("expected a " + typ.String())
		}
		if d != nil && !contains(d.Also, v) && (n < int64(d.Min) || (d.Max < maxLong && n > int64(d.Max))) {
			return bad(fmt.Sprintf("out of range [%s, %s]", fmtBound(d.Min), fmtBound(d.Max)))
		}
	case TypeDouble:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return bad("expected a number")
		}
		if d != nil && (f < d.Min || f > d.Max) {
			return bad(fmt.Sprintf("out of range [%s, %s]", fmtBound(d.Min), fmtBound(d.Max)))
		}
	case TypeString:
		if d != nil && len(d.Valid) > 0 && !contains(d.Valid, v) {
			return bad("expected one of " + strings.Join(d.Valid, ", "))
		}
	case TypeList:
		elems := splitList(v)
		if d != nil && len(d.Valid) > 0 {
			if len(elems) == 0 {
				return bad("expected one or more of " + strings.Join(d.Valid, ", "))
			}
			for _, e := range elems {
				if !contains(d.Valid, e) {
					return bad(fmt.Sprintf("%q is not one of %s", e, strings.Join(d.Valid, ", ")))
				}
			}
		}
	}
	return nil
}

func fmtBound(f float64) string {
	if f >= maxLong {
		return maxLongStr
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// scaled converts a broker synonym's value into the topic config's unit.
// Negative values (-1 = unlimited) are kept as they are, as Kafka does.
func scaled(d *Def, s Synonym, value string) (string, error) {
	v := strings.TrimSpace(value)
	if s.Scale <= 1 || (d.Type != TypeLong && d.Type != TypeInt) {
		if err := checkValue(s.Name, d.Type, v, d); err != nil {
			return "", err
		}
		return v, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%w: %s=%q: expected a %s", ErrInvalidValue, s.Name, value, s.Type)
	}
	if n >= 0 {
		if n > math.MaxInt64/s.Scale {
			return "", fmt.Errorf("%w: %s=%q: too large", ErrInvalidValue, s.Name, value)
		}
		n *= s.Scale
	}
	out := strconv.FormatInt(n, 10)
	if err := checkValue(s.Name, d.Type, out, d); err != nil {
		return "", err
	}
	return out, nil
}

// Value is one effective topic config value and where it came from.
type Value struct {
	Value  string
	Source Source
	// From is the key that supplied it: the topic config itself for a
	// topic override or default, or the broker synonym.
	From string
}

// Resolve computes the effective value of every topic config: the topic
// override, else the first broker synonym set in brokerProps (scaled), else
// the built-in default. Invalid overrides or broker props are errors.
func Resolve(overrides, brokerProps map[string]string) (map[string]Value, error) {
	if err := ValidateTopic(overrides); err != nil {
		return nil, err
	}
	out := make(map[string]Value, len(defs))
	for i := range defs {
		d := &defs[i]
		if v, ok := overrides[d.Name]; ok {
			out[d.Name] = Value{Value: strings.TrimSpace(v), Source: SourceDynamicTopic, From: d.Name}
			continue
		}
		found := false
		for _, s := range d.Synonyms {
			bv, ok := brokerProps[s.Name]
			if !ok {
				continue
			}
			if err := checkValue(s.Name, s.Type, bv, nil); err != nil {
				return nil, err
			}
			v, err := scaled(d, s, bv)
			if err != nil {
				return nil, err
			}
			out[d.Name] = Value{Value: v, Source: SourceStaticBroker, From: s.Name}
			found = true
			break
		}
		if !found {
			out[d.Name] = Value{Value: d.Default, Source: SourceDefault, From: d.Name}
		}
	}
	minLag, _ := strconv.ParseInt(out["min.compaction.lag.ms"].Value, 10, 64)
	maxLag, _ := strconv.ParseInt(out["max.compaction.lag.ms"].Value, 10, 64)
	if minLag > maxLag {
		return nil, fmt.Errorf("%w: min.compaction.lag.ms=%d is greater than max.compaction.lag.ms=%d", ErrInvalidValue, minLag, maxLag)
	}
	return out, nil
}

// LogConfig computes a partition's log.Config from its topic overrides and
// the broker settings.
func LogConfig(overrides, brokerProps map[string]string) (log.Config, error) {
	vals, err := Resolve(overrides, brokerProps)
	if err != nil {
		return log.Config{}, err
	}
	i64 := func(k string) int64 {
		n, _ := strconv.ParseInt(vals[k].Value, 10, 64)
		return n
	}
	ms := func(k string) time.Duration {
		n := i64(k)
		if n <= 0 || n > int64(math.MaxInt64/time.Millisecond) {
			return 0 // "never": Long.MAX_VALUE ms does not fit a Duration
		}
		return time.Duration(n) * time.Millisecond
	}
	// bound maps Kafka's "Long.MAX = unbounded" to log's "0 = unbounded";
	// an explicit 0 ("no skew at all") becomes the tightest bound log can
	// express, 1 ms.
	bound := func(k string) int64 {
		n := i64(k)
		switch {
		case n == math.MaxInt64:
			return 0
		case n == 0:
			return 1
		}
		return n
	}
	cfg := log.Config{
		SegmentBytes:          i64("segment.bytes"),
		SegmentMs:             ms("segment.ms"),
		SegmentIndexBytes:     int32(i64("segment.index.bytes")),
		IndexIntervalBytes:    int32(i64("index.interval.bytes")),
		FlushIntervalMessages: i64("flush.messages"),
		FlushInterval:         ms("flush.ms"),
		MaxMessageBytes:       int32(i64("max.message.bytes")),
		MessageTimestampType:  vals["message.timestamp.type"].Value,
		TimestampBeforeMaxMs:  bound("message.timestamp.before.max.ms"),
		TimestampAfterMaxMs:   bound("message.timestamp.after.max.ms"),
	}
	for _, pol := range splitList(vals["cleanup.policy"].Value) {
		switch pol {
		case "delete":
			cfg.Cleanup.Delete = true
		case "compact":
			cfg.Cleanup.Compact = true
		}
	}
	cfg.Cleanup.RetentionMs = i64("retention.ms")
	cfg.Cleanup.RetentionBytes = i64("retention.bytes")
	cfg.Cleanup.DeleteRetentionMs = i64("delete.retention.ms")
	cfg.Cleanup.MinCleanableDirtyRatio, _ = strconv.ParseFloat(vals["min.cleanable.dirty.ratio"].Value, 64)
	cfg.Cleanup.MinCompactionLagMs = i64("min.compaction.lag.ms")
	if maxLag := i64("max.compaction.lag.ms"); maxLag != math.MaxInt64 {
		cfg.Cleanup.MaxCompactionLagMs = maxLag
	}
	return cfg, nil
}

// Entry is one config as DescribeConfigs reports it. Replication converts
// it to its own ConfigEntry (the types mirror each other).
type Entry struct {
	Name      string
	Value     string
	Source    Source
	ReadOnly  bool
	Sensitive bool
	Type      Type
	Doc       string
	Synonyms  []EntrySynonym
}

// EntrySynonym is one synonym of an Entry, in Kafka's order: the topic
// override, then the broker settings set explicitly, then the default.
type EntrySynonym struct {
	Name   string
	Value  string
	Source Source
}

// DescribeTopic lists every topic config with its effective value, source
// and synonyms, sorted by name, for DescribeConfigs on a topic, with only
// static broker settings (DescribeTopicLayers for dynamic ones).
func DescribeTopic(overrides, brokerProps map[string]string) ([]Entry, error) {
	return DescribeTopicLayers(overrides, []Layer{{Props: brokerProps, Source: SourceStaticBroker}})
}

// DescribeBroker lists every broker setting that supplies a topic default,
// with only static settings (DescribeBrokerLayers for dynamic ones).
func DescribeBroker(brokerProps map[string]string) []Entry {
	return DescribeBrokerLayers([]Layer{{Props: brokerProps, Source: SourceStaticBroker}})
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
