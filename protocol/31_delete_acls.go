package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/replication"
)

// DeleteAcls: v1-v3 (Kafka 4.4's versions; v0 was removed in 4.0)
//
// Behaviour:
//   - Each filter (ANY and MATCH as in Kafka) selects bindings; the
//     bindings of all valid filters are removed in one metadata command
//     (replication/metadata_acls.go) and each filter's result lists what it
//     matched. A filter with an UNKNOWN field is INVALID_REQUEST.
//   - Needs ALTER on the cluster (acl_rules.go). With ACLs off
//     SECURITY_DISABLED, as Kafka.
func init() {
	register(31, 1, 3, barrier, (*Server).handleDeleteACLs, needsClusterElse(acl.Alter, deleteACLsDenied))
}

func (s *Server) handleDeleteACLs(ctx context.Context, req *kmsg.DeleteACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	set := s.broker.ACLs()
	var gone []acl.Binding
	matched := make([][]acl.Binding, len(req.Filters))
	for i, f := range req.Filters {
		r := &resp.Results[i]
		*r = kmsg.NewDeleteACLsResponseResult()
		if s.authorizer() == nil {
			setACLErr(&r.ErrorCode, &r.ErrorMessage, kerr.SecurityDisabled.Code, "no authorizer is configured (authorizer.class.name)")
			continue
		}
		af := acl.Filter{ResourceType: f.ResourceType, ResourceName: f.ResourceName, PatternType: f.ResourcePatternType,
			Principal: f.Principal, Host: f.Host, Operation: f.Operation, Permission: f.PermissionType}
		if err := af.Validate(); err != nil {
			setACLErr(&r.ErrorCode, &r.ErrorMessage, kerr.InvalidRequest.Code, err.Error())
			continue
		}
		matched[i] = set.Select(af)
		gone = append(gone, matched[i]...)
	}
	var code int16
	var msg string
	if len(gone) > 0 {
		if err := s.broker.ChangeACLs(ctx, replication.ACLChange{Delete: gone}); err != nil {
			code, msg = errCode(err), err.Error()
		}
	}
	for i := range req.Filters {
		r := &resp.Results[i]
		if r.ErrorCode != 0 {
			continue
		}
		if code != 0 {
			setACLErr(&r.ErrorCode, &r.ErrorMessage, code, msg)
			continue
		}
		for _, b := range matched[i] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
			r.MatchingACLs = append(r.MatchingACLs, m)
		}
	}
	return resp, nil
}

// deleteACLsDenied answers every filter CLUSTER_AUTHORIZATION_FAILED.
func deleteACLsDenied(r *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range r.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		res.ErrorCode = errClusterAuth
		resp.Results = append(resp.Results, res)
	}
	return resp
}
