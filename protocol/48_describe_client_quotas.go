package protocol

import (
	"context"
	"errors"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/quota"
)

// DescribeClientQuotas: v0-1 (KIP-546)
//
// Behaviour:
//   - Answers from the replicated client quotas (replication/metadata_quotas.go),
//     so every broker answers alike, with Kafka's matching
//     (ClientQuotasImage.describe): each filter component names an entity
//     type (user, client-id, ip) and matches an exact name (0), the
//     default (1) or any name, the default included (2); entities with
//     other types too are listed unless strict; no component lists every
//     entity (none when strict).
//   - A bad filter (an empty type, a type twice, an exact match without a
//     name, a default or any-name match with one, an unknown match type,
//     ip with user or client-id) is INVALID_REQUEST; an unknown entity
//     type UNSUPPORTED_VERSION, as Kafka.
//
// With ACLs on it needs DESCRIBE_CONFIGS on the cluster (acl_rules.go),
// as Kafka.
//
// Version notes:
//   - v1: flexible versions.
func init() {
	register(48, 0, 1, concurrent, (*Server).handleDescribeClientQuotas,
		needsCluster(acl.DescribeConfigs))
}

func (s *Server) handleDescribeClientQuotas(ctx context.Context, req *kmsg.DescribeClientQuotasRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	filter := make([]quota.FilterComponent, 0, len(req.Components))
	for _, c := range req.Components {
		filter = append(filter, quota.FilterComponent{Type: c.EntityType, Match: int8(c.MatchType), Name: c.Match})
	}
	var set *quota.Set
	if s.broker != nil {
		set = s.broker.ClientQuotas()
	}
	found, err := set.Describe(filter, req.Strict)
	if err != nil {
		code := kerr.InvalidRequest.Code
		if errors.Is(err, quota.ErrUnsupportedType) {
			code = kerr.UnsupportedVersion.Code
		}
		msg := strings.TrimPrefix(quotaMsg(err), quota.ErrUnsupportedType.Error()+": ")
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp, nil
	}
	// Entries is nullable: null only with an error (the Java client
	// dereferences it on success).
	resp.Entries = make([]kmsg.DescribeClientQuotasResponseEntry, 0, len(found))
	for _, f := range found {
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, c := range f.Entity.Components() {
			ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = *c[0], c[1]
			e.Entity = append(e.Entity, ee)
		}
		for _, k := range sortedKeys(f.Set) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, f.Set[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp, nil
}

// sortedKeys lists a quota config map's keys in order.
func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
