package retention

import (
	"fmt"
	"sort"
	"strings"
)

// Broker settings come in layers, as in Kafka: a dynamic per-broker value
// (AlterConfigs on BROKER "<id>") beats a dynamic cluster-wide default
// (BROKER ""), which beats server.properties/flags/environment, which beat
// the built-in default. The layers are merged key by key first; the
// synonym priority (log.retention.ms before .minutes before .hours) is then
// applied to the merged map -- so a static log.retention.ms still beats a
// dynamic log.retention.hours, exactly as in Kafka.

// More of Kafka's ConfigSource values (on the wire).
const (
	SourceDynamicBroker        Source = 2 // DYNAMIC_BROKER_CONFIG: AlterConfigs on BROKER "<id>"
	SourceDynamicDefaultBroker Source = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG: AlterConfigs on BROKER ""
)

// Layer is one level of broker settings and the source it reports.
type Layer struct {
	Props  map[string]string
	Source Source
}

// Merge returns the effective broker settings of layers given highest
// priority first: a key takes the value of the first layer that sets it.
func Merge(layers []Layer) map[string]string {
	n := 0
	for _, l := range layers {
		n += len(l.Props)
	}
	out := make(map[string]string, n)
	for i := len(layers) - 1; i >= 0; i-- {
		for k, v := range layers[i].Props {
			out[k] = v
		}
	}
	return out
}

// IsDynamicBrokerSetting reports whether a broker setting may be changed
// at run time (AlterConfigs on a BROKER resource). As in Kafka
// (DynamicLogConfig.ReconfigurableConfigs), these are the primary broker
// synonyms of the topic configs (log.retention.ms, log.roll.ms,
// message.max.bytes, ...), not the alternatives in other units
// (log.retention.hours, log.roll.hours stay static). They reach every live
// partition whose topic does not override them. Of the cleaner's own
// settings, log.cleaner.backoff.ms is dynamic (Cleaner.SetBackoff), the
// others are not, as in Kafka. The partition limits (max.broker.partitions,
// max.partitions) are dynamic, as KIP-578 makes them.
func IsDynamicBrokerSetting(name string) bool {
	if name == "log.cleaner.backoff.ms" || IsLimitSetting(name) {
		return true
	}
	ref, ok := synonymByName[name]
	return ok && len(ref.def.Synonyms) > 0 && ref.def.Synonyms[0].Name == name
}

// cleanerSettingIndex is the index of a cleaner setting in
// cleanerSettings, or -1.
func cleanerSettingIndex(name string) int {
	for i, s := range cleanerSettings {
		if s.name == name {
			return i
		}
	}
	return -1
}

// ValidateDynamicBroker checks a set of dynamic broker settings: each one
// dynamic and valid, and the resulting effective settings (merged with the
// lower layers) consistent. ErrUnknownConfig for a key that is not a
// dynamic setting; callers that know the static settings report those as
// read-only first.
func ValidateDynamicBroker(set map[string]string, lower []Layer) error {
	for _, k := range sortedKeys(set) {
		if !IsDynamicBrokerSetting(k) {
			return fmt.Errorf("%w: %q is not a dynamic broker config", ErrUnknownConfig, k)
		}
		if i := cleanerSettingIndex(k); i >= 0 {
			if _, _, err := parseCleanerSetting(i, set[k]); err != nil {
				return err
			}
			continue
		}
		if IsLimitSetting(k) {
			if err := ValidateLimitSetting(k, set[k]); err != nil {
				return err
			}
			continue
		}
		if err := ValidateBrokerSetting(k, set[k]); err != nil {
			return err
		}
	}
	merged := Merge(append([]Layer{{Props: set}}, lower...))
	if _, err := Resolve(nil, merged); err != nil {
		return err
	}
	return nil
}

// DescribeTopicLayers lists every topic config with its effective value,
// source and synonyms, sorted by name: the topic override, then the broker
// synonyms set in each layer (highest layer first; within a layer in
// synonym priority), then the built-in default of the first synonym that
// has one.
func DescribeTopicLayers(overrides map[string]string, layers []Layer) ([]Entry, error) {
	merged := Merge(layers)
	vals, err := Resolve(overrides, merged)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(defs))
	for _, d := range Defs() {
		v := vals[d.Name]
		e := Entry{Name: d.Name, Value: v.Value, Type: d.Type, Doc: d.Doc}
		if ov, ok := overrides[d.Name]; ok {
			e.Synonyms = append(e.Synonyms, EntrySynonym{Name: d.Name, Value: strings.TrimSpace(ov), Source: SourceDynamicTopic})
		}
		e.Synonyms = append(e.Synonyms, brokerSynonyms(d.Synonyms, layers)...)
		// The source is that of the value Resolve chose: the first synonym
		// of that name (its highest layer). Kafka takes the first synonym
		// after dropping those before the primary broker name, which can
		// name a setting that did not supply the value.
		e.Source = SourceDefault
		for _, s := range e.Synonyms {
			if s.Name == v.From {
				e.Source = s.Source
				break
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// brokerSynonyms lists the synonyms of syns set in each layer, then the
// first built-in default, in Kafka's order (ConfigHelper.configSynonyms).
func brokerSynonyms(syns []Synonym, layers []Layer) []EntrySynonym {
	var out []EntrySynonym
	for _, l := range layers {
		for _, s := range syns {
			if v, ok := l.Props[s.Name]; ok {
				out = append(out, EntrySynonym{Name: s.Name, Value: strings.TrimSpace(v), Source: l.Source})
			}
		}
	}
	for _, s := range syns {
		if s.Default != "" {
			out = append(out, EntrySynonym{Name: s.Name, Value: s.Default, Source: SourceDefault})
			break
		}
	}
	return out
}

// DescribeBrokerLayers lists every broker setting that supplies a topic
// default, and the cleaner's own settings, sorted by name, for
// DescribeConfigs on a broker. As Kafka does,
// a setting's synonyms are its synonym group (log.retention.ms, .minutes,
// .hours) set in each layer, highest layer first, then the built-in
// default, with the entries before the first one of the setting itself
// dropped (describing log.retention.hours does not list log.retention.ms).
// The value is the setting's own (merged or built-in default; empty when
// Kafka leaves it null), the source that of its first synonym; writable
// when IsDynamicBrokerSetting.
func DescribeBrokerLayers(layers []Layer) []Entry {
	names := BrokerSettings()
	merged := Merge(layers)
	out := make([]Entry, 0, len(names))
	for _, n := range names {
		ref := synonymByName[n]
		e := Entry{Name: n, Type: ref.syn.Type, ReadOnly: !IsDynamicBrokerSetting(n),
			Doc: ref.def.Doc + " Broker default for the topic config " + ref.def.Name + "."}
		var all []EntrySynonym
		for _, l := range layers {
			for _, s := range ref.def.Synonyms {
				if v, ok := l.Props[s.Name]; ok {
					all = append(all, EntrySynonym{Name: s.Name, Value: strings.TrimSpace(v), Source: l.Source})
				}
			}
		}
		for _, s := range ref.def.Synonyms {
			if s.Default != "" {
				all = append(all, EntrySynonym{Name: s.Name, Value: s.Default, Source: SourceDefault})
			}
		}
		for len(all) > 0 && all[0].Name != n {
			all = all[1:]
		}
		e.Synonyms = all
		e.Source = SourceDefault
		if len(all) > 0 {
			e.Source = all[0].Source
		}
		if v, ok := merged[n]; ok {
			e.Value = strings.TrimSpace(v)
		} else {
			e.Value = ref.syn.Default
		}
		out = append(out, e)
	}
	for _, cs := range cleanerSettings {
		e := Entry{Name: cs.name, Type: TypeLong, ReadOnly: !IsDynamicBrokerSetting(cs.name), Doc: cs.doc}
		if cs.name == "log.cleaner.enable" {
			e.Type = TypeBoolean
		}
		for _, l := range layers {
			if v, ok := l.Props[cs.name]; ok {
				e.Synonyms = append(e.Synonyms, EntrySynonym{Name: cs.name, Value: strings.TrimSpace(v), Source: l.Source})
			}
		}
		e.Synonyms = append(e.Synonyms, EntrySynonym{Name: cs.name, Value: cs.def, Source: SourceDefault})
		e.Value, e.Source = e.Synonyms[0].Value, e.Synonyms[0].Source
		out = append(out, e)
	}
	for _, ls := range limitSettings {
		e := Entry{Name: ls.name, Type: TypeInt, Doc: ls.doc}
		for _, l := range layers {
			if v, ok := l.Props[ls.name]; ok {
				e.Synonyms = append(e.Synonyms, EntrySynonym{Name: ls.name, Value: strings.TrimSpace(v), Source: l.Source})
			}
		}
		e.Synonyms = append(e.Synonyms, EntrySynonym{Name: ls.name, Value: ls.def, Source: SourceDefault})
		e.Value, e.Source = e.Synonyms[0].Value, e.Synonyms[0].Source
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// BrokerSettingType is the type of a broker setting that supplies a topic
// default (TypeList for log.cleanup.policy, ...).
func BrokerSettingType(name string) (Type, bool) {
	ref, ok := synonymByName[name]
	if !ok {
		return 0, false
	}
	return ref.syn.Type, true
}
