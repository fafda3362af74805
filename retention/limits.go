package retention

import (
	"fmt"
	"strconv"
	"strings"
)

// Partition limits (KIP-578's names): broker settings that bound how many
// partitions the cluster holds, so that CreateTopics, CreatePartitions,
// auto-creation and reassignment cannot grow it past what its brokers can
// carry. They are not topic-config synonyms; like the cleaner's settings
// they live among the broker settings (static in server.properties, and
// dynamic: AlterConfigs on BROKER "" for the cluster). The broker that
// takes a request enforces them with its own effective value.
const (
	// MaxBrokerPartitions bounds the replicas one broker hosts (a
	// partition of replication factor 3 counts once on each of its three
	// brokers; replicas being added by a reassignment count too).
	MaxBrokerPartitions = "max.broker.partitions"
	// MaxPartitions bounds the partitions of the cluster (each counted
	// once, whatever its replication factor).
	MaxPartitions = "max.partitions"
)

// PartitionsCeiling is the most partitions the metadata image holds
// whatever max.partitions says: every metadata change copies the image
// and a snapshot carries it whole. Keep equal to replication's
// maxPartitionsPerBroker.
const PartitionsCeiling = 200000

var limitSettings = []struct {
	name, def, doc string
	min, max       int64
}{
	{MaxBrokerPartitions, "10000", "The most partition replicas one broker may host (KIP-578): CreateTopics, CreatePartitions, auto-creation and reassignments that would place more on a broker are refused with POLICY_VIOLATION.", 1, 1<<31 - 1},
	{MaxPartitions, strconv.Itoa(PartitionsCeiling), "The most partitions the cluster may hold, each counted once (KIP-578): requests that would create more are refused with POLICY_VIOLATION. At most 200000.", 1, PartitionsCeiling},
}

func limitSettingIndex(name string) int {
	for i, s := range limitSettings {
		if s.name == name {
			return i
		}
	}
	return -1
}

// IsLimitSetting reports whether name is a partition limit
// (max.broker.partitions, max.partitions).
func IsLimitSetting(name string) bool { return limitSettingIndex(name) >= 0 }

// ValidateLimitSetting checks the value of a partition limit.
// ErrUnknownConfig when name is not one.
func ValidateLimitSetting(name, value string) error {
	_, err := parseLimit(name, value)
	return err
}

func parseLimit(name, value string) (int64, error) {
	i := limitSettingIndex(name)
	if i < 0 {
		return 0, fmt.Errorf("%w: %q is not a partition limit", ErrUnknownConfig, name)
	}
	s := limitSettings[i]
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil || n < s.min || n > s.max {
		return 0, fmt.Errorf("%w: %s=%q: expected an integer in [%d, %d]", ErrInvalidValue, name, value, s.min, s.max)
	}
	return n, nil
}

// PartitionLimits returns the effective max.broker.partitions and
// max.partitions of a broker's merged settings (an invalid value, which
// validation keeps out, counts as the default).
func PartitionLimits(props map[string]string) (perBroker, cluster int64) {
	get := func(i int) int64 {
		s := limitSettings[i]
		if v, ok := props[s.name]; ok {
			if n, err := parseLimit(s.name, v); err == nil {
				return n
			}
		}
		n, _ := strconv.ParseInt(s.def, 10, 64)
		return n
	}
	return get(0), get(1)
}
