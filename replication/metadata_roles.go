package replication

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/replication/transport"
)

// Kafka's process.roles (issue 23, item 1). A node is a controller (a
// voter of the metadata group, named in controller.quorum.voters), a
// broker, or both (the default: every node of controller.quorum.voters
// is both). A broker-only node (BrokerConfig.BrokerOnly) is not a voter:
//
//   - It starts its metadata raft with no configuration and asks the
//     controllers to add it: a join request (joinRequest) sent over the
//     replication transport to each voter's address in turn until the
//     controller (the metadata leader) answers. The controller adds it
//     with AddNonvoter, so it receives every metadata entry but neither
//     votes nor stands for election: it never becomes the controller.
//     The request is asked again at every start and is idempotent (a
//     node already in the configuration at the same address changes
//     nothing; at a new address its address is updated).
//   - It then catches up (waitCaughtUp) and registers as every broker
//     does, with its replication address (BrokerInfo.ReplicationAddr),
//     which peers dial for partition groups (peerAddr) and check its
//     certificate against under mTLS (expectPeer).
//   - Admission: a node that is neither a voter nor registered yet is
//     admitted by a controller's plaintext replication listener when it
//     connects from loopback, or from anywhere when
//     replication.plaintext.allow.nonloopback is set (the operator has
//     accepted that without TLS a node ID is only a claim); with mTLS its
//     node certificate admits it (transport/tls.go).

// joinRequest asks the controller to add Node at Addr to the metadata
// group as a non-voter.
type joinRequest struct {
	Node int32  `json:"node"`
	Addr string `json:"addr"`
}

// isVoter reports whether node is named in controller.quorum.voters.
func (q *metadataQuorum) isVoter(node int32) bool {
	for _, v := range q.cfg.Voters {
		if v.NodeID == node {
			return true
		}
	}
	return false
}

// selfInfo is this broker's registration.
func (q *metadataQuorum) selfInfo() BrokerInfo {
	bi := BrokerInfo{NodeID: q.cfg.NodeID, Host: q.cfg.AdvertisedHost, Port: q.cfg.AdvertisedPort, Rack: q.cfg.Rack, Endpoints: q.cfg.AdvertisedEndpoints}
	if q.cfg.BrokerOnly {
		bi.ReplicationAddr = string(q.mux.Addr())
	}
	bi.ReplicaCapacity = ReplicaCapacity(q.cfg.OpenFileLimit)
	return bi
}

// registeredReplAddr is the replication address a broker-only node
// registered; "" when none.
func (q *metadataQuorum) registeredReplAddr(node int32) string {
	if img := q.img.Load(); img != nil {
		return img.brokers[node].ReplicationAddr
	}
	return ""
}

// admitPeerFrom is the plaintext admission check (transport.Config.AdmitFrom):
// admitPeer's voters and registered brokers, the members of the metadata
// configuration (a broker-only node added but not registered yet), and on
// a controller a node asking to join only with
// replication.plaintext.allow.nonloopback: without TLS a node's ID is
// only its claim, so admitting nodes the metadata does not know is the
// operator's explicit choice (with mutual TLS the certificate admits
// them). Loopback is not enough: any local process could claim a node.
func (q *metadataQuorum) admitPeerFrom(id string, remote net.Addr) error {
	err := q.admitPeer(id)
	if err == nil || !errors.Is(err, transport.ErrRefused) {
		return err
	}
	node := parseServerID(raft.ServerID(id))
	if node < 0 || serverID(node) != raft.ServerID(id) {
		return err
	}
	if r := q.raft; r != nil {
		if f := r.GetConfiguration(); f.Error() == nil {
			for _, s := range f.Configuration().Servers {
				if s.ID == serverID(node) {
					return nil
				}
			}
		}
	}
	if !q.isVoter(q.cfg.NodeID) {
		return err // only controllers take joins
	}
	if q.cfg.JoinOffLoopback {
		return nil
	}
	return fmt.Errorf("%w (a node joining over plaintext is admitted only with replication.plaintext.allow.nonloopback=true on the controllers, or use mutual TLS)", err)
}

// joinQuorum asks the voters, one after another, to add this broker-only
// node to the metadata group; nil once the controller has (or had).
func (q *metadataQuorum) joinQuorum(timeout time.Duration) error {
	body, err := json.Marshal(forwardRequest{Join: &joinRequest{Node: q.cfg.NodeID, Addr: string(q.mux.Addr())}})
	if err != nil {
		return err
	}
	var errs []error
	for _, v := range q.cfg.Voters {
		out, err := q.mux.Forward(raft.ServerAddress(v.Addr), body, timeout)
		if err != nil {
			errs = append(errs, fmt.Errorf("voter %d: %v", v.NodeID, err))
			continue
		}
		var resp forwardResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			errs = append(errs, fmt.Errorf("voter %d: %v", v.NodeID, err))
			continue
		}
		if resp.Err != "" {
			errs = append(errs, fmt.Errorf("voter %d: %w", v.NodeID, sentinelError(resp.Err, resp.Msg)))
			continue
		}
		return nil
	}
	return fmt.Errorf("%w: joining the metadata quorum: %w", ErrNotController, errors.Join(errs...))
}

// handleJoin adds a broker-only node as a non-voter (on the controller).
func (q *metadataQuorum) handleJoin(j *joinRequest) forwardResponse {
	var resp forwardResponse
	err := func() error {
		if q.raft.State() != raft.Leader {
			return fmt.Errorf("%w: not the metadata leader", ErrNotController)
		}
		if q.isVoter(j.Node) {
			return fmt.Errorf("%w: node %d is a voter of controller.quorum.voters, not a broker-only node", errRejected, j.Node)
		}
		if _, _, err := net.SplitHostPort(j.Addr); err != nil {
			return fmt.Errorf("%w: node %d's replication address %q is not host:port", errRejected, j.Node, j.Addr)
		}
		f := q.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			return fmt.Errorf("%w: %v", ErrNotController, err)
		}
		for _, s := range f.Configuration().Servers {
			if s.ID == serverID(j.Node) && s.Address == raft.ServerAddress(j.Addr) {
				return nil // joined before (a restart)
			}
		}
		if err := q.waitFuture(q.raft.AddNonvoter(serverID(j.Node), raft.ServerAddress(j.Addr), 0, metadataApplyTimeout)); err != nil {
			return fmt.Errorf("%w: add node %d: %v", ErrNotController, j.Node, err)
		}
		q.logger.Info("broker-only node joined the metadata group as a non-voter", "node_id", j.Node, "addr", j.Addr)
		return nil
	}()
	if err != nil {
		resp.Err, resp.Msg = sentinelName(err), err.Error()
	}
	return resp
}

// checkJoin refuses, with mTLS (peer authenticated), a join request for
// another node than the connection's.
func checkJoin(peer string, j *joinRequest) error {
	if j == nil || peer == "" || strconv.Itoa(int(j.Node)) == peer {
		return nil
	}
	return refused("node %s asked node %d to join", peer, j.Node)
}

// reachableController is the controller ID Metadata and DescribeCluster
// answer with: the metadata leader when it is a registered broker, else
// (a controller-only leader, which clients cannot reach) this broker,
// which forwards what a client sends its controller, as Kafka's brokers
// name a broker of theirs in KRaft mode.
func (q *metadataQuorum) reachableController(leader int32) int32 {
	img := q.img.Load()
	if img == nil {
		return leader
	}
	if _, ok := img.brokers[leader]; ok {
		return leader
	}
	if _, ok := img.brokers[q.cfg.NodeID]; ok {
		return q.cfg.NodeID
	}
	return leader
}

// peerAddr is the replication address of a broker: its metadata voter
// address (every broker is a voter), or this broker's own Mux address.
func (q *metadataQuorum) peerAddr(node int32) (raft.ServerAddress, error) {
	if node == q.cfg.NodeID {
		return q.mux.Addr(), nil
	}
	for _, v := range q.cfg.Voters {
		if v.NodeID == node {
			return raft.ServerAddress(v.Addr), nil
		}
	}
	if a := q.registeredReplAddr(node); a != "" { // a broker-only node (metadata_roles.go)
		return raft.ServerAddress(a), nil
	}
	return "", fmt.Errorf("%w: broker %d has no replication address (not in controller.quorum.voters)", ErrInvalidReplicaAssignment, node)
}

// registerLocked registers this broker (unless it is a controller only)
// and returns once the image holds its registration.
//
// The registration is asked again while the controller changes (its
// answer "not controller": a new controller, or a controller that lost
// its quorum for a moment), within StartTimeout, as Kafka's brokers
// retry theirs: the simulated 100-broker cluster (internal/sim) saw the
// controller step down while 100 brokers joined, and a broker's start
// failed on it. A registration whose answer was lost may have been
// committed: the image says.
func (q *metadataQuorum) registerLocked() error {
	self := q.selfInfo()
	timeout := q.cfg.StartTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	deadline := time.Now().Add(timeout)
	for !q.cfg.ControllerOnly {
		if cur, ok := q.img.Load().brokers[self.NodeID]; ok && cur == self {
			break
		}
		_, err := q.commitLocked(Command{Type: CmdRegisterBroker, Broker: &self})
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNotController) || time.Now().After(deadline) {
			return err
		}
		q.logger.Info("broker registration not taken by the controller; asking again", "err", err)
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}
