package replication

import (
	"context"
	"errors"
	"fmt"
)

// UnregisterBroker (Kafka's API 64, kafka-cluster unregister): the
// registration of a broker that has left the cluster is removed from the
// metadata, so Metadata and DescribeCluster no longer list it and no new
// partition is placed on it. Its replicas, if any are left, are reported
// offline; move them away first (AlterPartitionReassignments). A broker
// registers itself again when it starts, so a running broker that is
// unregistered comes back at its next start. Voters of the metadata quorum
// stay voters (controller.quorum.voters is static).
//
// CmdUnregisterBroker is a command type older brokers do not know: they
// would reject it and keep the registration, so every broker of a cluster
// must run a version that has it before it is used.

// CmdUnregisterBroker removes Command.Broker.NodeID's registration.
const CmdUnregisterBroker CommandType = 23

// ErrBrokerNotRegistered is BROKER_ID_NOT_REGISTERED.
var ErrBrokerNotRegistered = errors.New("replication: broker not registered")

func init() { sentinels["broker_not_registered"] = ErrBrokerNotRegistered }

// applyUnregister removes the registration of bi.NodeID from im (a copy
// about to be published).
func (im *image) applyUnregister(bi *BrokerInfo) error {
	if bi == nil || bi.NodeID < 0 {
		return fmt.Errorf("%w: missing or negative broker", ErrBrokerNotRegistered)
	}
	if _, ok := im.brokers[bi.NodeID]; !ok {
		return fmt.Errorf("%w: %d", ErrBrokerNotRegistered, bi.NodeID)
	}
	brokers := make(map[int32]BrokerInfo, len(im.brokers))
	for k, v := range im.brokers {
		if k != bi.NodeID {
			brokers[k] = v
		}
	}
	im.brokers = brokers
	return nil
}

// UnregisterBroker removes node's registration (through the controller).
// ErrBrokerNotRegistered when it has none.
func (q *metadataQuorum) UnregisterBroker(ctx context.Context, node int32) error {
	if err := q.lockWriter(ctx); err != nil {
		return err
	}
	defer q.mu.Unlock()
	if _, ok := q.img.Load().brokers[node]; !ok {
		return fmt.Errorf("%w: %d", ErrBrokerNotRegistered, node)
	}
	_, err := q.commitLocked(Command{Type: CmdUnregisterBroker, Broker: &BrokerInfo{NodeID: node}})
	if err != nil {
		return err
	}
	q.logger.Info("broker unregistered", "node_id", node)
	return nil
}
