package protocol

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/groupconfig"
)

// AlterConfigs: v0-2
//
// Behaviour:
//   - TOPIC (2): the resource's configs replace the topic's whole override
//     set (configs not named go back to their defaults), as Kafka's legacy
//     AlterConfigs does. Broker.SetTopicConfigs validates, persists the set
//     in the metadata log and applies it to the live partitions: no
//     restart. Invalid keys or values: INVALID_CONFIG with a message naming
//     the key. A null value or a key named twice: INVALID_REQUEST. Unknown
//     topic: UNKNOWN_TOPIC_OR_PARTITION. ValidateOnly checks without
//     changing anything.
//   - BROKER (4): the configs replace the dynamic configs of one broker
//     (name = its node ID, any broker of the cluster) or of the cluster-wide
//     default (name ""), through Broker.SetBrokerConfigs: validated,
//     persisted in the replicated metadata, applied live to every partition
//     whose topic does not override them. A setting Kafka does not let one
//     change dynamically (num.partitions, log.retention.hours, ...):
//     INVALID_REQUEST "cannot update these configs dynamically", as Kafka.
//     Invalid values or unknown keys: INVALID_CONFIG naming the key (Kafka
//     says INVALID_REQUEST here, KAFKA-13609). A name that is neither "" nor
//     a node ID: INVALID_REQUEST.
//   - GROUP (32): the configs replace the group's whole override set, as
//     Kafka 4.4 allows (the group need not exist), validated against this
//     broker's group.share.* and group.consumer.* bounds
//     (internal/groupconfig: INVALID_CONFIG with Kafka's message naming
//     the key) and committed to the replicated metadata
//     (Broker.SetGroupConfigs); the share-partition leader and the group
//     coordinator read them per request. An empty name: INVALID_REQUEST
//     "Default group resources are not allowed."
//   - Any other resource type: INVALID_REQUEST.
//
// Version notes:
//   - v1: no change (throttle behaviour); v2: flexible
func init() { register(33, 0, 2, barrier, (*Server).handleAlterConfigs, (*authz).alterConfigs) }

func (s *Server) handleAlterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		code, msg := s.alterConfigs(ctx, rr, req.ValidateOnly)
		if code != 0 {
			sr.ErrorCode, sr.ErrorMessage = code, &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (s *Server) alterConfigs(ctx context.Context, rr kmsg.AlterConfigsRequestResource, validateOnly bool) (int16, string) {
	names := make([]string, len(rr.Configs))
	for i, c := range rr.Configs {
		names[i] = c.Name
	}
	if code, msg := s.checkAlterResource(int8(rr.ResourceType), rr.ResourceName, names); code != 0 {
		return code, msg
	}
	set := make(map[string]string, len(rr.Configs))
	for _, c := range rr.Configs {
		if c.Value == nil {
			return kerr.InvalidRequest.Code, fmt.Sprintf("null value not supported for config %s", c.Name)
		}
		set[c.Name] = *c.Value
	}
	switch int8(rr.ResourceType) {
	case resourceBroker:
		if err := s.broker.SetBrokerConfigs(ctx, rr.ResourceName, set, validateOnly); err != nil {
			return errCode(err), err.Error()
		}
		return 0, ""
	case resourceGroup:
		return s.setGroupConfigs(ctx, rr.ResourceName, set, validateOnly)
	}
	if _, ok := s.broker.Topic(rr.ResourceName); !ok {
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %s does not exist", rr.ResourceName)
	}
	if err := s.broker.SetTopicConfigs(ctx, rr.ResourceName, set, validateOnly); err != nil {
		return errCode(err), err.Error()
	}
	return 0, ""
}

// maxAlterConfigs bounds the configs of one resource in an alter request
// (there are fewer than 40 topic configs; duplicates are refused anyway).
const maxAlterConfigs = 1000

// checkAlterResource answers what AlterConfigs and IncrementalAlterConfigs
// share: the resource type, a valid topic name, broker resource name or
// group name, no key twice. A zero code means the resource is a topic,
// broker or group to alter.
func (s *Server) checkAlterResource(typ int8, name string, keys []string) (int16, string) {
	switch typ {
	case resourceTopic:
		if !validTopicName(name) {
			return kerr.InvalidTopicException.Code, fmt.Sprintf("topic name %q is not valid", name)
		}
	case resourceBroker:
		if name != "" {
			if id, err := strconv.ParseInt(name, 10, 32); err != nil || id < 0 {
				return kerr.InvalidRequest.Code, fmt.Sprintf("invalid broker resource name %q: a broker id, or empty for the cluster-wide default", name)
			}
		}
	case resourceGroup:
		if name == "" {
			return kerr.InvalidRequest.Code, "Default group resources are not allowed."
		}
	default:
		return kerr.InvalidRequest.Code, fmt.Sprintf("unsupported resource type %d", typ)
	}
	if len(keys) > maxAlterConfigs {
		return kerr.InvalidRequest.Code, fmt.Sprintf("%d configs in one resource, more than %d", len(keys), maxAlterConfigs)
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			return kerr.InvalidRequest.Code, fmt.Sprintf("error due to duplicate config keys: %s", k)
		}
		seen[k] = true
	}
	return 0, ""
}

// setGroupConfigs validates a group's complete override set against this
// broker's bounds and commits it (AlterConfigs, IncrementalAlterConfigs).
func (s *Server) setGroupConfigs(ctx context.Context, group string, set map[string]string, validateOnly bool) (int16, string) {
	if err := groupconfig.Validate(set, s.cfg.GroupConfig); err != nil {
		return kerr.InvalidConfig.Code, err.Error()
	}
	if err := s.broker.SetGroupConfigs(ctx, group, set, validateOnly); err != nil {
		return errCode(err), err.Error()
	}
	return 0, ""
}

func (z *authz) alterConfigs(r *kmsg.AlterConfigsRequest) (kmsg.Response, func(kmsg.Response)) {
	var keep []kmsg.AlterConfigsRequestResource
	var gone []kmsg.AlterConfigsResponseResource
	for _, res := range r.Resources {
		if code := z.configResource(acl.AlterConfigs, res.ResourceType, res.ResourceName); code != 0 {
			d := kmsg.NewAlterConfigsResponseResource()
			d.ResourceType, d.ResourceName, d.ErrorCode = res.ResourceType, res.ResourceName, code
			gone = append(gone, d)
		} else {
			keep = append(keep, res)
		}
	}
	if len(gone) == 0 {
		return nil, nil
	}
	r.Resources = keep
	return nil, func(resp kmsg.Response) {
		ar := resp.(*kmsg.AlterConfigsResponse)
		ar.Resources = append(ar.Resources, gone...)
	}
}
