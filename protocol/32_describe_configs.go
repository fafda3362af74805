package protocol

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/groupconfig"
	"github.com/strata-io/strata/replication"
)

// DescribeConfigs: v0-4
//
// Behaviour:
//   - TOPIC (2): Broker.TopicConfig (every config with value and source);
//     UNKNOWN_TOPIC_OR_PARTITION for a missing topic, INVALID_TOPIC_EXCEPTION
//     for an invalid name.
//   - BROKER (4) "<this broker's ID>": Broker.BrokerConfigEntries, every
//     setting with its source (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
//     STATIC_BROKER_CONFIG, DEFAULT_CONFIG), synonyms in Kafka's order, the
//     dynamic ones not read-only. BROKER "": only the cluster-wide dynamic
//     defaults that are set (Broker.BrokerDefaultConfigEntries), as Kafka.
//     Another broker's ID is INVALID_REQUEST, as Kafka answers for a broker
//     ID that is not its own (clients send it to that broker).
//   - GROUP (32): every group config Strata serves (internal/groupconfig:
//     share.* and consumer.* membership and share-partition settings),
//     whether or not the group exists, as Kafka 4.4: a config the group
//     overrides is GROUP_CONFIG, else the broker's setting behind it
//     (STATIC_BROKER_CONFIG when given explicitly, else DEFAULT_CONFIG);
//     synonyms: the override, the broker setting, Kafka's default. None is
//     read-only. An empty name: INVALID_REQUEST "Group name must not be
//     empty".
//   - Any other resource type (BROKER_LOGGER included: Strata has no dynamic
//     log levels): INVALID_REQUEST.
//   - ConfigNames null or empty = every config; otherwise only those named
//     (unknown names are left out, as Kafka does).
//   - Synonyms only with IncludeSynonyms (v1+), documentation only with
//     IncludeDocumentation (v3+). v0's IsDefault is Source == DEFAULT_CONFIG.
//
// Version notes:
//   - v1: sources and synonyms; v2: no change; v3: type and documentation;
//     v4: flexible
func init() {
	register(32, 0, 4, concurrent, (*Server).handleDescribeConfigs, (*authz).describeConfigs)
}

const (
	resourceTopic  = 2
	resourceBroker = 4
	resourceGroup  = 32
	sourceDefault  = 5 // DEFAULT_CONFIG
)

func (s *Server) handleDescribeConfigs(ctx context.Context, req *kmsg.DescribeConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		fail := func(code int16, msg string) {
			sr.ErrorCode, sr.ErrorMessage = code, &msg
		}
		var entries []replication.ConfigEntry
		switch rr.ResourceType {
		case resourceTopic:
			if !validTopicName(rr.ResourceName) {
				fail(kerr.InvalidTopicException.Code, fmt.Sprintf("topic name %q is not valid", rr.ResourceName))
				break
			}
			var err error
			if entries, err = s.broker.TopicConfig(rr.ResourceName); err != nil {
				fail(errCode(err), err.Error())
			}
		case resourceBroker:
			if rr.ResourceName == "" {
				entries = s.broker.BrokerDefaultConfigEntries()
				break
			}
			id, err := strconv.ParseInt(rr.ResourceName, 10, 32)
			if err != nil || int32(id) != s.broker.NodeID() {
				fail(kerr.InvalidRequest.Code, fmt.Sprintf("unexpected broker id, expected %d or empty string, but received %q", s.broker.NodeID(), rr.ResourceName))
				break
			}
			entries = s.broker.BrokerConfigEntries()
		case resourceGroup:
			if rr.ResourceName == "" {
				fail(kerr.InvalidRequest.Code, "Group name must not be empty")
				break
			}
			entries = s.groupConfigEntries(rr.ResourceName)
		default:
			fail(kerr.InvalidRequest.Code, fmt.Sprintf("unsupported resource type %d", rr.ResourceType))
		}
		if sr.ErrorCode == 0 {
			sr.Configs = describeConfigEntries(req, rr.ConfigNames, entries)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func describeConfigEntries(req *kmsg.DescribeConfigsRequest, names []string, entries []replication.ConfigEntry) []kmsg.DescribeConfigsResponseResourceConfig {
	var want map[string]bool
	if len(names) > 0 { // null or empty: every config (Kafka's ConfigHelper)
		want = make(map[string]bool, len(names))
		for _, n := range names {
			want[n] = true
		}
	}
	out := []kmsg.DescribeConfigsResponseResourceConfig{}
	for _, e := range entries {
		if want != nil && !want[e.Name] {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.ReadOnly, c.IsSensitive = e.Name, e.Value, e.ReadOnly, e.Sensitive
		c.Source = kmsg.ConfigSource(e.Source)
		c.IsDefault = e.Source == sourceDefault
		c.ConfigType = kmsg.ConfigType(e.Type)
		if req.IncludeDocumentation && e.Doc != "" {
			doc := e.Doc
			c.Documentation = &doc
		}
		if req.IncludeSynonyms {
			for _, syn := range e.Synonyms {
				cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				cs.Name, cs.Value, cs.Source = syn.Name, syn.Value, kmsg.ConfigSource(syn.Source)
				c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
			}
		}
		out = append(out, c)
	}
	return out
}

// groupConfigEntries describes a group's configs (groupconfig.Describe).
func (s *Server) groupConfigEntries(group string) []replication.ConfigEntry {
	described := groupconfig.Describe(s.broker.GroupConfigsView(group), s.cfg.GroupConfig)
	out := make([]replication.ConfigEntry, len(described))
	for i, e := range described {
		ce := replication.ConfigEntry{Name: e.Name, Value: kmsg.StringPtr(e.Value), Source: e.Source, Type: int8(e.Type), Doc: e.Doc}
		for _, syn := range e.Synonyms {
			ce.Synonyms = append(ce.Synonyms, replication.ConfigSynonym{Name: syn.Name, Value: kmsg.StringPtr(syn.Value), Source: syn.Source})
		}
		out[i] = ce
	}
	return out
}

// describeConfigs: DESCRIBE_CONFIGS per resource (configResource); a
// denied resource answers its error and no configs.
func (z *authz) describeConfigs(*kmsg.DescribeConfigsRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		for i := range resp.(*kmsg.DescribeConfigsResponse).Resources {
			res := &resp.(*kmsg.DescribeConfigsResponse).Resources[i]
			if code := z.configResource(acl.DescribeConfigs, res.ResourceType, res.ResourceName); code != 0 {
				res.ErrorCode, res.ErrorMessage, res.Configs = code, nil, nil
			}
		}
	}
}
