package main

import (
	"errors"
	"strings"
	"testing"
)

// TestProcessRoles: process.roles as Kafka names them, and what each
// needs.
func TestProcessRoles(t *testing.T) {
	const voters = "controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"
	load := func(sets ...string) (*Config, error) {
		var args []string
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		cfg, _, err := loadConfig(args, nil, nil, nil)
		return cfg, err
	}
	for _, roles := range []string{"", "broker,controller", "controller, broker"} {
		cfg, err := load("node.id=2", voters, "process.roles="+roles)
		if err != nil || cfg.Cluster.BrokerOnly || cfg.Cluster.Advertise != "127.0.0.1:9094" {
			t.Fatalf("roles %q: %+v %v", roles, cfg, err)
		}
	}
	if cfg, err := load("node.id=3", voters, "process.roles=controller"); err != nil || !cfg.Cluster.ControllerOnly || cfg.Cluster.BrokerOnly {
		t.Fatalf("controller-only: %+v %v", cfg, err)
	}
	cfg, err := load("node.id=7", voters, "process.roles=broker", "replication.listener=127.0.0.1:9100")
	if err != nil || !cfg.Cluster.BrokerOnly || cfg.Cluster.Advertise != "127.0.0.1:9100" || cfg.Cluster.Bind != "127.0.0.1:9100" {
		t.Fatalf("broker-only: %+v %v", cfg, err)
	}
	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"node.id=2", voters, "process.roles=broker", "replication.listener=127.0.0.1:9100"}, "names the controllers only"},
		{[]string{"node.id=7", voters, "process.roles=broker"}, "needs replication.listener"},
		{[]string{"node.id=7", "process.roles=broker"}, "needs controller.quorum.voters"},
		{[]string{"node.id=7", voters, "process.roles=broker", "replication.listener=0.0.0.0:9100"}, "not a wildcard"},
		{[]string{"node.id=7", voters}, "process.roles=broker"},
		{[]string{"node.id=7", voters, "process.roles=controller"}, "must be in controller.quorum.voters"},
		{[]string{"node.id=1", voters, "process.roles=observer"}, "unknown role"},
		// Plaintext off loopback needs the setting, as for a controller.
		{[]string{"node.id=7", voters, "process.roles=broker", "replication.listener=10.1.2.3:9100"}, "replication.plaintext.allow.nonloopback"},
	} {
		_, err := load(c.sets...)
		if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want an error with %q", c.sets, err, c.want)
		}
	}
	cfg, err = load("node.id=7", voters, "process.roles=broker", "replication.listener=10.1.2.3:9100", "replication.plaintext.allow.nonloopback=true")
	if err != nil || !cfg.Cluster.PlaintextAnywhere {
		t.Fatalf("allow.nonloopback: %+v %v", cfg, err)
	}
}
