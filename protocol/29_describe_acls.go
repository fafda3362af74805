package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// DescribeAcls: v1-v3 (Kafka 4.4's versions; v0 was removed in 4.0)
//
// Behaviour:
//   - Lists the bindings the filter matches (ANY and MATCH patterns as in
//     Kafka; internal/acl), grouped by resource pattern, from the
//     replicated metadata.
//   - Needs DESCRIBE on the cluster (acl_rules.go). With ACLs off
//     (no authorizer.class.name) SECURITY_DISABLED, as Kafka.
//   - A filter with an UNKNOWN field is INVALID_REQUEST.
func init() { register(29, 1, 3, concurrent, (*Server).handleDescribeACLs, needsCluster(acl.Describe)) }

func (s *Server) handleDescribeACLs(ctx context.Context, req *kmsg.DescribeACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if s.authorizer() == nil {
		resp.ErrorCode = kerr.SecurityDisabled.Code
		msg := "no authorizer is configured (authorizer.class.name)"
		resp.ErrorMessage = &msg
		return resp, nil
	}
	f := acl.Filter{ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType}
	if err := f.Validate(); err != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		return resp, nil
	}
	type resKey struct {
		rt   kmsg.ACLResourceType
		pt   kmsg.ACLResourcePatternType
		name string
	}
	idx := map[resKey]int{}
	for _, b := range s.broker.ACLs().Select(f) {
		k := resKey{b.ResourceType, b.PatternType, b.ResourceName}
		i, ok := idx[k]
		if !ok {
			i = len(resp.Resources)
			idx[k] = i
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			resp.Resources = append(resp.Resources, r)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	return resp, nil
}
