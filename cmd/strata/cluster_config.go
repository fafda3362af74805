package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/replication/transport"
)

// clusterSettings configure the metadata quorum (replication's doc.go,
// "Raft design").
//
// controller.quorum.voters uses Kafka's syntax, id@host:port,... where
// host:port is that broker's replication listener: Strata carries the
// metadata quorum and (later) every partition's Raft group over one
// listener per broker, so Kafka's separate controller listener and this
// one are the same. The broker whose node.id is listed binds its own entry
// (replication.listener overrides where it binds, e.g. 0.0.0.0:9093, when
// the voters list names an address other brokers reach). Empty = this
// broker alone, one voter, no replication listener.
var clusterSettings = append([]setting{
	{"process.roles", "", "Kafka's roles: broker, controller, or broker,controller. broker: this node is not in controller.quorum.voters; it follows the metadata quorum as a Raft non-voter (the controller adds it when it starts), registers, hosts partitions and serves clients, and never becomes the controller; its replication.listener is the address peers dial. controller: a voter of controller.quorum.voters that opens no Kafka listener, hosts no partitions and is not in Metadata's broker list. Empty or broker,controller: a voter that is also a broker."},
	{"controller.quorum.voters", "", "Metadata quorum, Kafka syntax id@host:port,...; host:port is each voter's replication listener. Empty: this broker alone."},
	{"replication.listener", "", "Where this broker binds its replication listener (Strata-specific); default: its own entry in controller.quorum.voters."},
	{"strata.partition.heartbeat.timeout.ms", "2000", "Raft heartbeat timeout of partition groups with several replicas (Strata-specific): a follower that hears nothing from its leader for this long to twice it starts an election, so a dead leader is replaced in about this time; lower costs more idle traffic per partition. 100..60000."},
}, replicationSecuritySettings...)

// clusterConfig is the parsed cluster part of Config.
type clusterConfig struct {
	Voters []replication.Voter
	// Bind is the replication listener's bind address; "" = none (one
	// voter).
	Bind string
	// Advertise is this broker's address in the voters list.
	Advertise string
	// PartitionHeartbeat is strata.partition.heartbeat.timeout.ms.
	PartitionHeartbeat time.Duration
	// TLS is the replication transport's mutual TLS; nil = plaintext
	// (replication_security.go).
	TLS *transport.TLS
	// BrokerOnly is process.roles=broker: not a voter (replication's
	// roles.go).
	BrokerOnly bool
	// ControllerOnly is process.roles=controller: a voter with no Kafka
	// listener that never registers as a broker (serve_controller.go).
	ControllerOnly bool
	// PlaintextAnywhere is replication.plaintext.allow.nonloopback.
	PlaintextAnywhere bool
}

// maxVoters bounds controller.quorum.voters (Raft quorums are small).
const maxVoters = 9

// parseVoters parses id@host:port,...
func parseVoters(s string) ([]replication.Voter, error) {
	var out []replication.Voter
	seen := map[int32]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("%q is not id@host:port", part)
		}
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: node id %q is not a non-negative integer", part, id)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			return nil, fmt.Errorf("%q: %q is not host:port", part, addr)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("%q: bad port %q", part, port)
		}
		if seen[int32(n)] {
			return nil, fmt.Errorf("node id %d listed twice", n)
		}
		seen[int32(n)] = true
		out = append(out, replication.Voter{NodeID: int32(n), Addr: addr})
		if len(out) > maxVoters {
			return nil, fmt.Errorf("more than %d voters", maxVoters)
		}
	}
	return out, nil
}

// parseClusterSettings fills cfg.Cluster.
func parseClusterSettings(merged map[string]rawValue, cfg *Config) error {
	bad := func(name, why string) error { return badSetting(merged, name, why) }
	voters, err := parseVoters(merged["controller.quorum.voters"].value)
	if err != nil {
		return bad("controller.quorum.voters", err.Error())
	}
	cfg.Cluster.Voters = voters
	if err := parseRoles(merged["process.roles"].value, cfg); err != nil {
		return bad("process.roles", err.Error())
	}
	for _, v := range voters {
		if v.NodeID == cfg.NodeID {
			if cfg.Cluster.BrokerOnly {
				return bad("process.roles", fmt.Sprintf("node.id %d is in controller.quorum.voters, which names the controllers only", cfg.NodeID))
			}
			cfg.Cluster.Advertise, cfg.Cluster.Bind = v.Addr, v.Addr
		}
	}
	if len(voters) > 0 && cfg.Cluster.Advertise == "" && !cfg.Cluster.BrokerOnly {
		return bad("controller.quorum.voters", fmt.Sprintf("node.id %d is not a voter (a broker outside the quorum needs process.roles=broker)", cfg.NodeID))
	}
	if b := merged["replication.listener"].value; b != "" {
		if len(voters) == 0 {
			return bad("replication.listener", "needs controller.quorum.voters")
		}
		if _, _, err := net.SplitHostPort(b); err != nil {
			return bad("replication.listener", "expected host:port")
		}
		cfg.Cluster.Bind = b
		if cfg.Cluster.BrokerOnly {
			// Peers dial it: it must be an address they reach.
			if host, _, _ := net.SplitHostPort(b); host == "" || net.ParseIP(host).IsUnspecified() {
				return bad("replication.listener", "a broker-only node registers its replication.listener as the address peers dial: name a host, not a wildcard")
			}
			cfg.Cluster.Advertise = b
		}
	} else if cfg.Cluster.BrokerOnly {
		return bad("process.roles", "a broker-only node needs replication.listener (host:port peers dial)")
	}
	const hbName = "strata.partition.heartbeat.timeout.ms"
	hb, err := strconv.ParseInt(merged[hbName].value, 10, 64)
	if err != nil || hb < 100 || hb > 60000 {
		return bad(hbName, "expected milliseconds between 100 and 60000")
	}
	cfg.Cluster.PartitionHeartbeat = time.Duration(hb) * time.Millisecond
	return parseReplicationSecurity(merged, cfg)
}

// parseRoles reads process.roles: "" and broker,controller are both roles
// (today's default); broker is a broker-only node.
func parseRoles(v string, cfg *Config) error {
	roles := map[string]bool{}
	for _, r := range strings.Split(v, ",") {
		r = strings.ToLower(strings.TrimSpace(r))
		switch r {
		case "":
		case "broker", "controller":
			roles[r] = true
		default:
			return fmt.Errorf("unknown role %q: expected broker, controller, or broker,controller", r)
		}
	}
	switch {
	case roles["controller"] && !roles["broker"]:
		self := false
		for _, v := range cfg.Cluster.Voters {
			self = self || v.NodeID == cfg.NodeID
		}
		if !self {
			return fmt.Errorf("a controller must be in controller.quorum.voters (node.id %d is not)", cfg.NodeID)
		}
		cfg.Cluster.ControllerOnly = true
	case roles["broker"] && !roles["controller"]:
		if len(cfg.Cluster.Voters) == 0 {
			return fmt.Errorf("a broker-only node needs controller.quorum.voters (the controllers it follows)")
		}
		cfg.Cluster.BrokerOnly = true
	}
	return nil
}
