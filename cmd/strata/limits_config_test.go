package main

import (
	"errors"
	"testing"
	"time"
)

// TestLimitSettings: Kafka's names for the listener's limits are accepted
// (they were refused as unknown settings) and reach the listener's
// configuration; bad values are refused naming the setting.
func TestLimitSettings(t *testing.T) {
	cfg, _, err := loadConfig(nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Limits; l.MaxConnections != 10000 || l.MaxConnectionsPerIP != 10000 || l.ConnectionsMaxIdle != 10*time.Minute ||
		l.QueuedMaxRequestBytes != 256<<20 || l.RequestReadTimeout != 30*time.Second || l.ResponseWriteTimeout != time.Minute ||
		l.ProduceMaxPartitions != 100000 {
		t.Fatalf("defaults: %+v", l)
	}
	cfg, _, err = loadConfig([]string{"--set", "max.connections=500", "--set", "max.connections.per.ip=20",
		"--set", "connections.max.idle.ms=60000", "--set", "queued.max.request.bytes=-1",
		"--set", "strata.request.read.timeout.ms=5000", "--set", "strata.response.write.timeout.ms=7000",
		"--set", "strata.produce.max.partitions=1000"}, []string{"STRATA_MAX_CONNECTIONS=400"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Limits; l.MaxConnections != 500 || l.MaxConnectionsPerIP != 20 || l.ConnectionsMaxIdle != time.Minute ||
		l.QueuedMaxRequestBytes != -1 || l.RequestReadTimeout != 5*time.Second || l.ResponseWriteTimeout != 7*time.Second ||
		l.ProduceMaxPartitions != 1000 {
		t.Fatalf("set: %+v", l)
	}
	for _, bad := range [][]string{
		{"--set", "max.connections=0"},
		{"--set", "max.connections.per.ip=x"},
		{"--set", "connections.max.idle.ms=10"},
		{"--set", "queued.max.request.bytes=1000"}, // below socket.request.max.bytes
		{"--set", "queued.max.request.bytes=0"},
		{"--set", "strata.produce.max.partitions=0"},
	} {
		if _, _, err := loadConfig(bad, nil, nil, nil); !errors.Is(err, errConfig) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// TestBacklogCheckIntervalSetting: strata.produce.backlog.check.interval.ms
// defaults to 1 s, reaches the listener and refuses values out of range;
// the overflow rule's topic configs and the partition limits are known
// settings.
func TestBacklogCheckIntervalSetting(t *testing.T) {
	cfg, _, err := loadConfig(nil, nil, nil, nil)
	if err != nil || cfg.Limits.BacklogCheckInterval != time.Second {
		t.Fatalf("default: %v %v", err, cfg.Limits.BacklogCheckInterval)
	}
	cfg, _, err = loadConfig([]string{"--set", "strata.produce.backlog.check.interval.ms=250", "--set", "max.broker.partitions=4000",
		"--set", "max.partitions=50000"}, nil, nil, nil)
	if err != nil || cfg.Limits.BacklogCheckInterval != 250*time.Millisecond || cfg.BrokerProps["max.broker.partitions"] != "4000" {
		t.Fatalf("set: %v %+v", err, cfg.Limits)
	}
	for _, bad := range []string{"strata.produce.backlog.check.interval.ms=5", "max.partitions=300000", "max.broker.partitions=0"} {
		if _, _, err := loadConfig([]string{"--set", bad}, nil, nil, nil); !errors.Is(err, errConfig) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
