package protocol

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// ListConfigResources: v0-1 (ListClientMetricsResources before Kafka 4.1,
// KIP-1000; KIP-1142)
//
// Behaviour:
//   - Lists the config resources of the types asked for, as Kafka 4.4
//     does: TOPIC (2) every topic, internal ones included; BROKER (4)
//     every registered broker ID; GROUP (32) every group with config
//     overrides (IncrementalAlterConfigs on GROUP; replication's
//     GroupsWithConfigs), so `kafka-configs --describe --entity-type
//     groups` without a name describes each of them. No types = all of
//     them.
//   - CLIENT_METRICS (16) and BROKER_LOGGER (8): none (Strata has no
//     client-metrics subscriptions and no dynamic log levels).
//   - Any other type: UNSUPPORTED_VERSION with nothing listed, as Kafka.
//
// Version notes:
//   - v0 (ListClientMetricsResources): client-metrics resources only:
//     always empty here. v1: ResourceTypes and each resource's type.
//
// Differences from Kafka: Kafka lists each broker ID under BROKER_LOGGER
// too; Strata serves no BROKER_LOGGER configs, so it lists none.
func init() {
	register(74, 0, 1, concurrent, (*Server).handleListConfigResources,
		needsCluster(acl.DescribeConfigs))
}

const (
	resourceBrokerLogger  = 8
	resourceClientMetrics = 16
)

func (s *Server) handleListConfigResources(_ context.Context, req *kmsg.ListConfigResourcesRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	if req.Version == 0 {
		return resp, nil // client-metrics resources: none
	}
	types := req.ResourceTypes
	if len(types) == 0 {
		types = []int8{resourceGroup, resourceBrokerLogger, resourceBroker, resourceTopic, resourceClientMetrics}
	}
	for _, t := range types {
		switch t {
		case resourceGroup, resourceBroker, resourceTopic, resourceBrokerLogger, resourceClientMetrics:
		default:
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			return resp, nil
		}
	}
	add := func(typ int8, name string) {
		r := kmsg.NewListConfigResourcesResponseConfigResource()
		r.Name, r.Type = name, typ
		resp.ConfigResources = append(resp.ConfigResources, r)
	}
	seen := map[int8]bool{}
	for _, t := range types {
		if seen[t] {
			continue
		}
		seen[t] = true
		switch t {
		case resourceGroup:
			for _, g := range s.broker.GroupsWithConfigs() {
				add(t, g)
			}
		case resourceBroker:
			for _, b := range s.broker.Brokers() {
				add(t, strconv.Itoa(int(b.NodeID)))
			}
		case resourceTopic:
			names, _ := s.broker.TopicNames()
			for _, n := range names {
				add(t, n)
			}
		}
	}
	return resp, nil
}
