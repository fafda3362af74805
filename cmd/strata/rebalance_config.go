package main

import (
	"strconv"
	"time"

	"github.com/strata-io/strata/replication"
)

// rebalanceSettings are what the controller does for the brokers:
// Kafka's automatic preferred-leader election (replication/partition_rebalance.go:
// the controller gives leaderships back to the preferred replica, the
// first of a partition's replicas, once a broker's share of preferred
// partitions led elsewhere passes the percentage, checked every
// interval) and broker fencing (replication/metadata_fencing.go).
var rebalanceSettings = []setting{
	{"auto.leader.rebalance.enable", "true", "The controller moves partition leadership back to each partition's preferred replica (the first of its replicas) when that broker is in the ISR and too many of its partitions are led elsewhere, e.g. after a restart."},
	{"leader.imbalance.check.interval.seconds", "300", "How often the controller checks leader balance. 1..86400."},
	{"leader.imbalance.per.broker.percentage", "10", "A broker's preferred partitions led by other brokers, in percent of all its preferred partitions, above which the controller moves them back. 0..100."},
	{"broker.session.timeout.ms", "9000", "The controller fences a broker it has not heard from for this long: Metadata leaves it out (its replicas are reported offline) and new partitions are not placed on it, until it is heard from again. 1000..600000."},
}

// rebalanceConfig is the parsed form of rebalanceSettings.
type rebalanceConfig struct {
	replication.LeaderRebalanceConfig
	// SessionTimeout is broker.session.timeout.ms (replication/metadata_fencing.go).
	SessionTimeout time.Duration
}

// parseRebalanceSettings fills cfg.Rebalance.
func parseRebalanceSettings(merged map[string]rawValue, cfg *Config) error {
	bad := func(name, why string) error { return badSetting(merged, name, why) }
	const enName, ivName, pctName = "auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds", "leader.imbalance.per.broker.percentage"
	en, err := strconv.ParseBool(merged[enName].value)
	if err != nil {
		return bad(enName, "expected true or false")
	}
	iv, err := strconv.ParseInt(merged[ivName].value, 10, 64)
	if err != nil || iv < 1 || iv > 86400 {
		return bad(ivName, "expected seconds between 1 and 86400")
	}
	pct, err := strconv.Atoi(merged[pctName].value)
	if err != nil || pct < 0 || pct > 100 {
		return bad(pctName, "expected a percentage between 0 and 100")
	}
	const stName = "broker.session.timeout.ms"
	st, err := strconv.ParseInt(merged[stName].value, 10, 64)
	if err != nil || st < 1000 || st > 600000 {
		return bad(stName, "expected milliseconds between 1000 and 600000")
	}
	cfg.Rebalance = rebalanceConfig{
		LeaderRebalanceConfig: replication.LeaderRebalanceConfig{Enable: en, Interval: time.Duration(iv) * time.Second, ImbalancePercent: pct},
		SessionTimeout:        time.Duration(st) * time.Millisecond,
	}
	return nil
}
