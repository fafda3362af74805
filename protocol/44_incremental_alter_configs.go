package protocol

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/groupconfig"
	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/retention"
)

// IncrementalAlterConfigs: v0-1
//
// Behaviour:
//   - TOPIC (2): each config is changed by its operation on the topic's
//     current override set, then the whole set goes through
//     Broker.SetTopicConfigs (validated, persisted in the metadata log,
//     applied to the live partitions; no restart):
//     SET (0) sets the override; DELETE (1) removes it (the default
//     applies again; deleting an absent override is not an error);
//     APPEND (2) and SUBTRACT (3), for list configs only (cleanup.policy),
//     add values not yet in the effective list / remove values from it.
//     APPEND/SUBTRACT on a non-list config, invalid keys or values:
//     INVALID_CONFIG with a message naming the key. A null value for SET,
//     APPEND or SUBTRACT, an unknown operation, or a key named twice:
//     INVALID_REQUEST. Unknown topic: UNKNOWN_TOPIC_OR_PARTITION.
//     ValidateOnly checks without changing anything.
//   - BROKER (4): the same operations on the dynamic configs of one broker
//     (name = node ID) or of the cluster-wide default (name ""), then
//     Broker.SetBrokerConfigs as AlterConfigs (read-only settings
//     INVALID_REQUEST, bad values INVALID_CONFIG; applied live). APPEND and
//     SUBTRACT start from the dynamic value, else this broker's effective
//     one (log.cleanup.policy is the only list).
//   - GROUP (32): SET and DELETE on the group's override set (the group
//     need not exist), then validated and committed as AlterConfigs does
//     (Broker.SetGroupConfigs): INVALID_CONFIG with Kafka's message naming
//     the key for an unknown or unsupported name, a bad value, or one
//     outside this broker's bounds (share.record.lock.duration.ms within
//     group.share.min/max.record.lock.duration.ms, ...); no group config is
//     a list, so APPEND and SUBTRACT are INVALID_CONFIG. An empty name:
//     INVALID_REQUEST.
//   - Other resource types (BROKER_LOGGER included): INVALID_REQUEST.
//
// Version notes:
//   - v1: flexible
func init() {
	register(44, 0, 1, barrier, (*Server).handleIncrementalAlterConfigs, (*authz).incrementalAlterConfigs)
}

// Operations of IncrementalAlterConfigs (on the wire).
const (
	opSet      = 0
	opDelete   = 1
	opAppend   = 2
	opSubtract = 3
)

func (s *Server) handleIncrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		code, msg := s.incrementalAlterConfigs(ctx, rr, req.ValidateOnly)
		if code != 0 {
			sr.ErrorCode, sr.ErrorMessage = code, &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (s *Server) incrementalAlterConfigs(ctx context.Context, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) (int16, string) {
	names := make([]string, len(rr.Configs))
	for i, c := range rr.Configs {
		names[i] = c.Name
	}
	if code, msg := s.checkAlterResource(int8(rr.ResourceType), rr.ResourceName, names); code != 0 {
		return code, msg
	}
	if int8(rr.ResourceType) == resourceGroup {
		set := s.broker.GroupConfigs(rr.ResourceName)
		groupType := func(name string) (retention.Type, bool) {
			d, ok := groupconfig.Lookup(name)
			return retention.Type(d.Type), ok
		}
		effective := func() (map[string]string, error) { return configValues(s.groupConfigEntries(rr.ResourceName)), nil }
		if code, msg := applyConfigOps(set, rr.Configs, groupType, effective); code != 0 {
			return code, msg
		}
		return s.setGroupConfigs(ctx, rr.ResourceName, set, validateOnly)
	}
	if int8(rr.ResourceType) == resourceBroker {
		set := s.broker.DynamicBrokerConfigs(rr.ResourceName)
		effective := func() (map[string]string, error) { return configValues(s.broker.BrokerConfigEntries()), nil }
		if code, msg := applyConfigOps(set, rr.Configs, retention.BrokerSettingType, effective); code != 0 {
			return code, msg
		}
		if err := s.broker.SetBrokerConfigs(ctx, rr.ResourceName, set, validateOnly); err != nil {
			return errCode(err), err.Error()
		}
		return 0, ""
	}
	t, ok := s.broker.Topic(rr.ResourceName)
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %s does not exist", rr.ResourceName)
	}
	set := maps.Clone(t.Configs)
	if set == nil {
		set = map[string]string{}
	}
	topicType := func(name string) (retention.Type, bool) {
		d, ok := retention.Lookup(name)
		return d.Type, ok
	}
	effective := func() (map[string]string, error) {
		entries, err := s.broker.TopicConfig(rr.ResourceName)
		if err != nil {
			return nil, err
		}
		return configValues(entries), nil
	}
	if code, msg := applyConfigOps(set, rr.Configs, topicType, effective); code != 0 {
		return code, msg
	}
	if err := s.broker.SetTopicConfigs(ctx, rr.ResourceName, set, validateOnly); err != nil {
		return errCode(err), err.Error()
	}
	return 0, ""
}

// applyConfigOps applies IncrementalAlterConfigs' operations to set (the
// resource's current dynamic configs). typeOf tells a known config's type
// (APPEND and SUBTRACT need a list); effective loads the current effective
// values, once, on the first APPEND/SUBTRACT of a config not in set.
func applyConfigOps(set map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig,
	typeOf func(string) (retention.Type, bool), effective func() (map[string]string, error)) (int16, string) {
	var eff map[string]string
	for _, c := range ops {
		op := int8(c.Op)
		if op != opDelete && c.Value == nil {
			return kerr.InvalidRequest.Code, fmt.Sprintf("null value not supported for %s", c.Name)
		}
		switch op {
		case opSet:
			set[c.Name] = *c.Value
		case opDelete:
			delete(set, c.Name)
		case opAppend, opSubtract:
			typ, ok := typeOf(c.Name)
			if !ok {
				return kerr.InvalidConfig.Code, fmt.Sprintf("unknown config %s", c.Name)
			}
			if typ != retention.TypeList {
				return kerr.InvalidConfig.Code, fmt.Sprintf("config value append/subtract is not allowed for config key %s: it is a %s, not a list", c.Name, typ)
			}
			cur, ok := set[c.Name]
			if !ok {
				if eff == nil {
					var err error
					if eff, err = effective(); err != nil {
						return errCode(err), err.Error()
					}
				}
				cur = eff[c.Name]
			}
			set[c.Name] = alterList(cur, *c.Value, op == opAppend)
		default:
			return kerr.InvalidRequest.Code, fmt.Sprintf("unknown operation %d for config %s", op, c.Name)
		}
	}
	return 0, ""
}

// configValues maps described configs to their values (nil ones left out).
func configValues(entries []replication.ConfigEntry) map[string]string {
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		if e.Value != nil {
			out[e.Name] = *e.Value
		}
	}
	return out
}

// alterList appends the comma-separated values to the list cur (those not
// yet in it, in order) or subtracts them.
func alterList(cur, values string, add bool) string {
	split := func(v string) []string {
		var out []string
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	list := split(cur)
	for _, v := range split(values) {
		has := slices.Contains(list, v)
		switch {
		case add && !has:
			list = append(list, v)
		case !add && has:
			list = slices.DeleteFunc(list, func(x string) bool { return x == v })
		}
	}
	return strings.Join(list, ",")
}

func (z *authz) incrementalAlterConfigs(r *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, func(kmsg.Response)) {
	var keep []kmsg.IncrementalAlterConfigsRequestResource
	var gone []kmsg.IncrementalAlterConfigsResponseResource
	for _, res := range r.Resources {
		if code := z.configResource(acl.AlterConfigs, res.ResourceType, res.ResourceName); code != 0 {
			d := kmsg.NewIncrementalAlterConfigsResponseResource()
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
		ar := resp.(*kmsg.IncrementalAlterConfigsResponse)
		ar.Resources = append(ar.Resources, gone...)
	}
}
