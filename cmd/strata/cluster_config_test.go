package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestControllerQuorumVoters(t *testing.T) {
	cfg, _, err := loadConfig([]string{"--set", "node.id=2", "--set", "controller.quorum.voters=1@127.0.0.1:9093, 2@127.0.0.1:9094,3@h3:9095"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Cluster
	if len(c.Voters) != 3 || c.Voters[2].NodeID != 3 || c.Voters[2].Addr != "h3:9095" || c.Advertise != "127.0.0.1:9094" || c.Bind != "127.0.0.1:9094" {
		t.Fatalf("%+v", c)
	}
	cfg, _, err = loadConfig([]string{"--set", "node.id=1", "--set", "controller.quorum.voters=1@b1:9093", "--set", "replication.listener=0.0.0.0:9093",
		"--set", "replication.plaintext.allow.nonloopback=true"}, nil, nil, nil)
	if err != nil || cfg.Cluster.Bind != "0.0.0.0:9093" || cfg.Cluster.Advertise != "b1:9093" {
		t.Fatalf("%+v %v", cfg, err)
	}
	if cfg, _, err := loadConfig(nil, nil, nil, nil); err != nil || len(cfg.Cluster.Voters) != 0 || cfg.Cluster.Bind != "" {
		t.Fatalf("default: %+v %v", cfg, err)
	}
	for _, bad := range []string{"1@", "x@h:1", "1@h", "1@h:0", "1@h:1,1@h:2", "1h:1", "-1@h:1"} {
		_, _, err := loadConfig([]string{"--set", "controller.quorum.voters=" + bad}, nil, nil, nil)
		if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "controller.quorum.voters") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, _, err := loadConfig([]string{"--set", "node.id=4", "--set", "controller.quorum.voters=1@h:1"}, nil, nil, nil); !errors.Is(err, errConfig) {
		t.Errorf("non-voter: %v", err)
	}
	if _, _, err := loadConfig([]string{"--set", "replication.listener=h:1"}, nil, nil, nil); !errors.Is(err, errConfig) {
		t.Errorf("listener without voters: %v", err)
	}
}

func TestPartitionHeartbeatSetting(t *testing.T) {
	cfg, _, err := loadConfig(nil, nil, nil, nil)
	if err != nil || cfg.Cluster.PartitionHeartbeat != 2*time.Second {
		t.Fatalf("default: %v %v", cfg.Cluster.PartitionHeartbeat, err)
	}
	cfg, _, err = loadConfig([]string{"--set", "strata.partition.heartbeat.timeout.ms=500"}, nil, nil, nil)
	if err != nil || cfg.Cluster.PartitionHeartbeat != 500*time.Millisecond {
		t.Fatalf("500: %v %v", cfg.Cluster.PartitionHeartbeat, err)
	}
	for _, bad := range []string{"99", "60001", "x", "-1", ""} {
		_, _, err := loadConfig([]string{"--set", "strata.partition.heartbeat.timeout.ms=" + bad}, nil, nil, nil)
		if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "strata.partition.heartbeat.timeout.ms") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
