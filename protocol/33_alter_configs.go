package protocol

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
//   - BROKER (4): INVALID_REQUEST naming the keys -- Strata has no dynamic
//     broker configs yet; they are set in server.properties (flags,
//     environment) and read at start.
//   - Any other resource type: INVALID_REQUEST.
//
// Version notes:
//   - v1: no change (throttle behaviour); v2: flexible
func init() { regKey(33, 0, 2) }

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
			return kerr.InvalidRequest.Code, fmt.Sprintf("null value not supported for topic config %s", c.Name)
		}
		set[c.Name] = *c.Value
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
// share: the resource type, a valid topic name, no key twice. A zero code
// means the resource is a topic to alter.
func (s *Server) checkAlterResource(typ int8, name string, keys []string) (int16, string) {
	switch typ {
	case resourceTopic:
	case resourceBroker:
		if name != "" {
			if id, err := strconv.ParseInt(name, 10, 32); err != nil || int32(id) != s.broker.NodeID() {
				return kerr.InvalidRequest.Code, fmt.Sprintf("unexpected broker id, expected %d or empty string, but received %q", s.broker.NodeID(), name)
			}
		}
		return kerr.InvalidRequest.Code, fmt.Sprintf("cannot update these configs dynamically: %v (Strata reads broker settings from server.properties, flags and environment at start)", keys)
	default:
		return kerr.InvalidRequest.Code, fmt.Sprintf("unsupported resource type %d", typ)
	}
	if !validTopicName(name) {
		return kerr.InvalidTopicException.Code, fmt.Sprintf("topic name %q is not valid", name)
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
