package replication

import (
	"fmt"
	"sort"

	"github.com/strata-io/strata/retention"
)

// Partition limits (KIP-578): max.broker.partitions bounds the replicas
// one broker hosts, max.partitions the partitions of the cluster. The
// broker that takes the request checks them, with its own effective
// settings (its dynamic value, the dynamic cluster default, static), against
// its image before it proposes a CreateTopic, CreatePartitions or
// reassignment -- auto-created
// and internal topics included, as KIP-578 asks, so that no request is a
// back door. What would exceed them is refused with ErrPolicyViolation
// (POLICY_VIOLATION on the wire: KIP-578's own error code was never
// added to Kafka, and every Kafka client knows POLICY_VIOLATION as a
// non-retriable error whose message it shows), naming the limit. The
// checks are O(partitions) under the writer lock, at most 200,000.

// The open-file limit bounds the replicas a broker can host too: each
// keeps FDsPerReplica files open while idle (its active segment's log;
// the indexes are mappings that keep no descriptor and the raft side log
// is opened only to be written, docs/SCALING.md "File descriptors per
// replica"; every older segment it retains adds one, which the reserve
// and the operator's margin cover), and a broker past its RLIMIT_NOFILE
// fails to open partitions and stops on storage errors. A broker
// registers the capacity its limit allows (BrokerInfo.ReplicaCapacity),
// and a request that would place more replicas on it is refused like one
// past max.broker.partitions, naming the limit to raise.

// FDsPerReplica is the files one idle partition replica keeps open.
const FDsPerReplica = 1

// openFileReserve is the part of the open-file limit kept for
// everything else: connections, the metadata log, segments being read.
const openFileReserve = 1024

// ReplicaCapacity is the replicas an open-file limit of limit allows; 0
// when limit is 0 (unknown).
func ReplicaCapacity(limit uint64) int64 {
	if limit == 0 {
		return 0
	}
	if limit <= openFileReserve {
		return 1
	}
	return int64((limit - openFileReserve) / FDsPerReplica)
}

// replicaCounts counts, per broker, the replicas img places on it: the
// current replicas of every partition plus those a reassignment is adding.
func replicaCounts(img *image) map[int32]int64 {
	out := make(map[int32]int64, len(img.brokers))
	for _, name := range img.names {
		for _, p := range img.topics[name].Partitions {
			for _, n := range p.Replicas {
				out[n]++
			}
			for _, n := range p.Target {
				if !containsNode(p.Replicas, n) {
					out[n]++
				}
			}
		}
	}
	return out
}

// checkPartitionLimits checks that adding newParts partitions and the
// replicas in added (per broker) keeps img within limits.
func checkPartitionLimits(img *image, props map[string]string, newParts int, added map[int32]int64) error {
	perBroker, cluster := retention.PartitionLimits(props)
	if total := int64(img.partitionCount()); newParts > 0 && total+int64(newParts) > cluster {
		return fmt.Errorf("%w: %d more partitions would make the cluster hold %d, above %s=%d", ErrPolicyViolation, newParts, total+int64(newParts), retention.MaxPartitions, cluster)
	}
	if len(added) == 0 {
		return nil
	}
	counts := replicaCounts(img)
	nodes := make([]int32, 0, len(added))
	for n := range added {
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	for _, n := range nodes {
		c := counts[n] + added[n]
		if added[n] > 0 && c > perBroker {
			return fmt.Errorf("%w: %d more partition replicas on broker %d would make it host %d, above %s=%d", ErrPolicyViolation, added[n], n, c, retention.MaxBrokerPartitions, perBroker)
		}
		if capacity := img.brokers[n].ReplicaCapacity; added[n] > 0 && capacity > 0 && c > capacity {
			return fmt.Errorf("%w: %d more partition replicas on broker %d would make it host %d, above the %d its open-file limit allows (%d files each; raise its RLIMIT_NOFILE, e.g. systemd's LimitNOFILE)", ErrPolicyViolation, added[n], n, c, capacity, FDsPerReplica)
		}
	}
	return nil
}

// assignedReplicas counts the replicas of assign per broker.
func assignedReplicas(assign []Assignment) map[int32]int64 {
	out := map[int32]int64{}
	for _, a := range assign {
		for _, n := range a.Replicas {
			out[n]++
		}
	}
	return out
}

// placeWithin places partitions first..first+n-1, rf replicas each, on
// the unfenced brokers that still have room under max.broker.partitions
// and their open-file capacity (KIP-578: the controller assigns replicas only to brokers with
// capacity), in autoAssign's round-robin order skipping the full ones.
// Used when autoAssign's placement would overfill a broker that others
// could relieve; an error when the brokers' room does not suffice.
func placeWithin(img *image, props map[string]string, first, n int32, rf int) ([]Assignment, error) {
	perBroker, _ := retention.PartitionLimits(props)
	counts := replicaCounts(img)
	nodes := make([]int32, 0, len(img.brokers))
	for id, bi := range img.brokers {
		if !bi.Fenced {
			nodes = append(nodes, id)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	room := make(map[int32]int64, len(nodes))
	for _, id := range nodes {
		limit := perBroker
		if c := img.brokers[id].ReplicaCapacity; c > 0 && c < limit {
			limit = c // its open-file limit allows fewer
		}
		room[id] = limit - counts[id]
	}
	if rf <= 0 || rf > len(nodes) {
		return nil, fmt.Errorf("%w: replication factor %d with %d available broker(s)", ErrInvalidReplicationFactor, rf, len(nodes))
	}
	out := make([]Assignment, n)
	for i := int32(0); i < n; i++ {
		p := first + i
		reps := make([]int32, 0, rf)
		for k := 0; k < len(nodes) && len(reps) < rf; k++ {
			id := nodes[(int(p)+k)%len(nodes)]
			if room[id] > 0 {
				reps = append(reps, id)
			}
		}
		if len(reps) < rf {
			return nil, fmt.Errorf("%w: %d partitions of %d replicas do not fit the brokers' room under %s=%d", ErrPolicyViolation, n, rf, retention.MaxBrokerPartitions, perBroker)
		}
		for _, id := range reps {
			room[id]--
		}
		out[i] = Assignment{Partition: p, Replicas: reps}
	}
	return out, nil
}

// checkOrPlace checks an assignment against the partition limits; an
// automatic one (auto true) that would overfill a broker is placed again
// on the brokers with room (placeWithin) when they can take it.
func checkOrPlace(img *image, props map[string]string, assign []Assignment, auto bool, first int32) ([]Assignment, error) {
	err := checkPartitionLimits(img, props, len(assign), assignedReplicas(assign))
	if err == nil || !auto || len(assign) == 0 {
		return assign, err
	}
	again, perr := placeWithin(img, props, first, int32(len(assign)), len(assign[0].Replicas))
	if perr != nil {
		return nil, err
	}
	if err := checkPartitionLimits(img, props, len(again), assignedReplicas(again)); err != nil {
		return nil, err
	}
	return again, nil
}
