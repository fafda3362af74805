package replication

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-io/strata/retention"
)

// Dynamic broker configs, as Kafka's DynamicBrokerConfig: AlterConfigs and
// IncrementalAlterConfigs on a BROKER resource set broker settings at run
// time, either for one broker (resource name = its node ID, source
// DYNAMIC_BROKER_CONFIG) or for every broker (resource name "", source
// DYNAMIC_DEFAULT_BROKER_CONFIG). They live in the metadata image
// (CmdSetBrokerConfigs, the complete set of one resource), so they are
// replicated to every broker, survive restarts and travel in snapshots.
//
// Effective broker settings = per-broker dynamic over cluster default over
// static (server.properties, flags, environment), merged key by key; topic
// configs then resolve against that merge (topic overrides still win).
// When a command changes this broker's effective settings, onApply
// re-resolves the config of every local partition and applies it live
// (log.Partition.SetConfig): retention, roll, flush and size limits take
// effect without a restart; the cleaner reads them at its next check.
// Settings outside partitions (log.cleaner.backoff.ms) reach their owner
// through BrokerConfig.OnBrokerProps.
//
// Only the settings Kafka lets one change dynamically and that Strata has
// are accepted (retention.IsDynamicBrokerSetting); the broker's other
// settings are refused as read-only, as Kafka does.

// CmdSetBrokerConfigs replaces the dynamic configs of one BROKER resource
// (Command.ConfigResource, Command.Configs: the complete set). Persisted:
// the number must not change.
const CmdSetBrokerConfigs CommandType = 8

// Errors of dynamic broker configs (INVALID_REQUEST on the wire, as Kafka).
var (
	ErrReadOnlyConfig         = errors.New("replication: cannot update these configs dynamically")
	ErrInvalidBrokerResource  = errors.New("replication: invalid broker resource name")
	errTooManyBrokerResources = errors.New("replication: too many broker config resources")
)

// Bounds on what the image holds: a resource per broker plus the default,
// and no more configs per resource than there are settings.
const (
	maxBrokerConfigResources = 4096
	maxDynamicBrokerConfigs  = 256
)

// checkBrokerResource accepts "" (the cluster default) or a non-negative
// node ID in canonical decimal form.
func checkBrokerResource(name string) error {
	if name == "" {
		return nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != name {
		return fmt.Errorf("%w: %q (a broker ID, or empty for the cluster default)", ErrInvalidBrokerResource, name)
	}
	return nil
}

// setBrokerConfigs replaces the dynamic configs of resource in im (which
// must be a fresh clone: the map is rebuilt, never written in place). An
// empty set removes the resource. Values are not validated here: Apply
// must not depend on anything but the command (the broker validates
// before it proposes).
func (im *image) setBrokerConfigs(resource string, set map[string]string) error {
	if err := checkBrokerResource(resource); err != nil {
		return err
	}
	if len(set) > maxDynamicBrokerConfigs {
		return fmt.Errorf("%d configs for broker resource %q, more than %d", len(set), resource, maxDynamicBrokerConfigs)
	}
	_, had := im.brokerConfigs[resource]
	if !had && len(set) > 0 && len(im.brokerConfigs) >= maxBrokerConfigResources {
		return errTooManyBrokerResources
	}
	m := make(map[string]map[string]string, len(im.brokerConfigs)+1)
	for k, v := range im.brokerConfigs {
		m[k] = v
	}
	if len(set) == 0 {
		delete(m, resource)
	} else {
		m[resource] = copyConfigs(set)
	}
	im.brokerConfigs = m
	return nil
}

// ownResource is this broker's BROKER resource name.
func (q *metadataQuorum) ownResource() string { return strconv.Itoa(int(q.cfg.NodeID)) }

// brokerLayers are this broker's settings in img, highest priority first:
// its own dynamic configs (when perBroker), the cluster default, static.
func (q *metadataQuorum) brokerLayers(img *image, perBroker bool) []retention.Layer {
	ls := make([]retention.Layer, 0, 3)
	if perBroker {
		if m := img.brokerConfigs[q.ownResource()]; len(m) > 0 {
			ls = append(ls, retention.Layer{Props: m, Source: retention.SourceDynamicBroker})
		}
	}
	if m := img.brokerConfigs[""]; len(m) > 0 {
		ls = append(ls, retention.Layer{Props: m, Source: retention.SourceDynamicDefaultBroker})
	}
	return append(ls, retention.Layer{Props: q.cfg.BrokerProps, Source: retention.SourceStaticBroker})
}

// brokerProps are this broker's effective settings in the current image:
// what topic configs resolve against (retention.LogConfig). The returned
// map is shared: never modify it.
func (q *metadataQuorum) brokerProps() map[string]string { return q.brokerPropsOf(q.img.Load()) }

func (q *metadataQuorum) brokerPropsOf(img *image) map[string]string {
	ls := q.brokerLayers(img, true)
	if len(ls) == 1 {
		return q.cfg.BrokerProps // no dynamic configs: no copy
	}
	return retention.Merge(ls)
}

// EffectiveBrokerProps returns a copy of this broker's effective settings:
// the static ones under the dynamic broker configs that apply to it.
func (q *metadataQuorum) EffectiveBrokerProps() map[string]string {
	return copyConfigs(q.brokerProps())
}

// DynamicBrokerConfigs returns a copy of the dynamic configs of a BROKER
// resource (a node ID, or "" for the cluster default); empty when none.
func (q *metadataQuorum) DynamicBrokerConfigs(resource string) map[string]string {
	return copyConfigs(q.img.Load().brokerConfigs[resource])
}

// SetBrokerConfigs replaces the dynamic configs of a BROKER resource with
// configs (the complete set; IncrementalAlterConfigs merges into
// DynamicBrokerConfigs first; empty removes them all). Every key must be a
// dynamic setting (else ErrReadOnlyConfig for a known setting,
// ErrInvalidConfig for an unknown one), every value valid and the result
// consistent (ErrInvalidConfig). The change is committed to the metadata
// quorum and applied by every broker it concerns to its live partitions.
func (q *metadataQuorum) SetBrokerConfigs(ctx context.Context, resource string, configs map[string]string, validateOnly bool) error {
	if err := checkBrokerResource(resource); err != nil {
		return err
	}
	if len(configs) > maxDynamicBrokerConfigs {
		return fmt.Errorf("%w: %d configs, more than %d", ErrInvalidConfig, len(configs), maxDynamicBrokerConfigs)
	}
	var readOnly []string
	for k := range configs {
		if !retention.IsDynamicBrokerSetting(k) && q.isBrokerSetting(k) {
			readOnly = append(readOnly, k)
		}
	}
	if len(readOnly) > 0 {
		sort.Strings(readOnly)
		return fmt.Errorf("%w: %s", ErrReadOnlyConfig, strings.Join(readOnly, ", "))
	}
	if err := q.lockWriter(ctx); err != nil {
		return err
	}
	defer q.mu.Unlock()
	img := q.img.Load()
	// Validate against the layers below the resource as this broker sees
	// them (another broker's static settings are not known here; Kafka's
	// broker validates the same way, against its own).
	lower := q.brokerLayers(img, false)
	if resource == "" {
		lower = lower[len(lower)-1:]
	}
	if err := retention.ValidateDynamicBroker(configs, lower); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if resource == "" || resource == q.ownResource() {
		merged := retention.Merge(append([]retention.Layer{{Props: configs}}, lower...))
		for _, name := range img.names {
			t := img.topics[name]
			if len(t.Configs) == 0 {
				continue
			}
			if _, err := retention.LogConfig(t.Configs, merged); err != nil {
				return fmt.Errorf("%w: with topic %s's overrides: %w", ErrInvalidConfig, name, err)
			}
		}
	}
	if validateOnly {
		return nil
	}
	if _, err := q.commitLocked(Command{Type: CmdSetBrokerConfigs, ConfigResource: resource, Configs: copyConfigs(configs)}); err != nil {
		return err
	}
	q.logger.Info("dynamic broker configs set", "resource", resource, "configs", len(configs))
	return nil
}

// isBrokerSetting reports whether name is one of this broker's settings
// (its own, a topic default, or any given at start): altering such a
// non-dynamic setting is refused as read-only rather than unknown.
func (q *metadataQuorum) isBrokerSetting(name string) bool {
	if retention.IsBrokerSetting(name) {
		return true
	}
	if _, ok := q.cfg.BrokerProps[name]; ok {
		return true
	}
	if retention.IsCleanerSetting(name) {
		return true
	}
	for _, o := range ownSettings(q.cfg) {
		if o.name == name {
			return true
		}
	}
	for _, o := range staticOnlySettings {
		if o == name {
			return true
		}
	}
	return false
}
