package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRebalanceSettings(t *testing.T) {
	cfg, _, err := loadConfig(nil, nil, nil, nil)
	if err != nil || !cfg.Rebalance.Enable || cfg.Rebalance.Interval != 300*time.Second || cfg.Rebalance.ImbalancePercent != 10 ||
		cfg.Rebalance.SessionTimeout != 9*time.Second {
		t.Fatalf("defaults (Kafka's): %+v %v", cfg.Rebalance, err)
	}
	cfg, _, err = loadConfig([]string{"--set", "auto.leader.rebalance.enable=false", "--set", "leader.imbalance.check.interval.seconds=1",
		"--set", "leader.imbalance.per.broker.percentage=0", "--set", "broker.session.timeout.ms=3000"}, nil, nil, nil)
	if err != nil || cfg.Rebalance.Enable || cfg.Rebalance.Interval != time.Second || cfg.Rebalance.ImbalancePercent != 0 || cfg.Rebalance.SessionTimeout != 3*time.Second {
		t.Fatalf("set: %+v %v", cfg.Rebalance, err)
	}
	for _, bad := range []string{"auto.leader.rebalance.enable=maybe", "leader.imbalance.check.interval.seconds=0",
		"leader.imbalance.check.interval.seconds=x", "leader.imbalance.per.broker.percentage=101", "leader.imbalance.per.broker.percentage=-1",
		"broker.session.timeout.ms=999", "broker.session.timeout.ms=600001"} {
		_, _, err := loadConfig([]string{"--set", bad}, nil, nil, nil)
		name, _, _ := strings.Cut(bad, "=")
		if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
