package replication

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

// Group configs (Kafka's GROUP config resource, KIP-848 and KIP-932):
// per-group overrides of group settings (share.record.lock.duration.ms,
// consumer.session.timeout.ms, ...), set by IncrementalAlterConfigs or
// AlterConfigs on a GROUP resource. They live in the metadata image
// (CmdSetGroupConfigs, the complete set of one group), so every broker has
// them, they survive restarts and travel in snapshots, as Kafka keeps them
// in its metadata log (ConfigRecord). A group needs not exist to have
// configs (as in Kafka).
//
// What the names and values mean is not this package's business: the
// protocol layer validates them (internal/groupconfig) before calling
// SetGroupConfigs; here they are bounded strings. Nothing is applied on
// commit: readers (the share-partition leader, the group coordinator)
// look them up per request (GroupConfigs, GroupConfigsView).

// CmdSetGroupConfigs replaces the configs of one group (Command.ConfigResource
// = the group ID, Command.Configs = the complete set; empty removes them).
// Persisted: the number must not change.
const CmdSetGroupConfigs CommandType = 9

// ErrInvalidGroupResource is a GROUP resource with an empty name
// (INVALID_REQUEST on the wire, as Kafka).
var ErrInvalidGroupResource = errors.New("replication: invalid group resource name")

// Bounds on what the image holds for group configs: Kafka defines about
// 30 group configs; values are short (internal/groupconfig bounds them at
// 1 KiB); groups with overrides are few next to groups.
const (
	maxGroupConfigGroups    = 100000
	maxGroupConfigsPerGroup = 64
	maxGroupConfigKeyBytes  = 256
	maxGroupConfigValBytes  = 4096
)

func checkGroupConfigs(group string, set map[string]string) error {
	if group == "" {
		return fmt.Errorf("%w: group name must not be empty", ErrInvalidGroupResource)
	}
	if len(set) > maxGroupConfigsPerGroup {
		return fmt.Errorf("%w: %d configs for group %q, more than %d", ErrInvalidConfig, len(set), group, maxGroupConfigsPerGroup)
	}
	for k, v := range set {
		if k == "" || len(k) > maxGroupConfigKeyBytes || len(v) > maxGroupConfigValBytes {
			return fmt.Errorf("%w: group %q: config name empty or longer than %d bytes, or value longer than %d", ErrInvalidConfig, group, maxGroupConfigKeyBytes, maxGroupConfigValBytes)
		}
	}
	return nil
}

// setGroupConfigs replaces the configs of group in im (a fresh clone: the
// outer map is rebuilt, never written in place, and each group's map is
// immutable once stored). An empty set removes the group.
func (im *image) setGroupConfigs(group string, set map[string]string) error {
	if err := checkGroupConfigs(group, set); err != nil {
		return err
	}
	_, had := im.groupConfigs[group]
	if !had && len(set) > 0 && len(im.groupConfigs) >= maxGroupConfigGroups {
		return fmt.Errorf("%w: more than %d groups with configs", ErrInvalidConfig, maxGroupConfigGroups)
	}
	m := make(map[string]map[string]string, len(im.groupConfigs)+1)
	for k, v := range im.groupConfigs {
		m[k] = v
	}
	if len(set) == 0 {
		delete(m, group)
	} else {
		m[group] = copyConfigs(set)
	}
	im.groupConfigs = m
	return nil
}

// GroupConfigs returns a copy of a group's config overrides (empty when
// none): what IncrementalAlterConfigs starts from and DescribeConfigs
// reports as GROUP_CONFIG.
func (q *metadataQuorum) GroupConfigs(group string) map[string]string {
	return copyConfigs(q.img.Load().groupConfigs[group])
}

// GroupConfigsView returns a group's config overrides without a copy, for
// a lookup per request (nil when none). The map is shared by every reader
// and immutable: never modify it.
func (q *metadataQuorum) GroupConfigsView(group string) map[string]string {
	return q.img.Load().groupConfigs[group]
}

// GroupsWithConfigs returns the IDs of the groups that have config
// overrides, sorted (ListConfigResources on GROUP, as Kafka lists them).
func (q *metadataQuorum) GroupsWithConfigs() []string {
	m := q.img.Load().groupConfigs
	out := make([]string, 0, len(m))
	for g := range m {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// SetGroupConfigs replaces a group's config overrides with configs (the
// complete set; empty removes them all), committed to the metadata quorum.
// The caller has validated names and values (internal/groupconfig); here
// only the group name (ErrInvalidGroupResource) and sizes
// (ErrInvalidConfig) are checked. validateOnly checks without committing.
func (q *metadataQuorum) SetGroupConfigs(ctx context.Context, group string, configs map[string]string, validateOnly bool) error {
	if err := checkGroupConfigs(group, configs); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	if err := q.lockWriter(ctx); err != nil {
		return err
	}
	defer q.mu.Unlock()
	if _, err := q.commitLocked(Command{Type: CmdSetGroupConfigs, ConfigResource: group, Configs: copyConfigs(configs)}); err != nil {
		return err
	}
	q.logger.Info("group configs set", "group", group, "configs", len(configs))
	return nil
}
