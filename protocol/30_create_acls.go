package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/replication"
)

// CreateAcls: v1-v3 (Kafka 4.4's versions; v0 was removed in 4.0)
//
// Behaviour:
//   - Each creation is checked as Kafka does (internal/acl Validate: a
//     concrete resource type, LITERAL or PREFIXED, a concrete operation
//     and permission, a non-empty name, kafka-cluster for CLUSTER, a
//     principal Type:name, a host): a bad one is INVALID_REQUEST, the
//     others are created.
//   - The valid ones commit together through the metadata quorum
//     (replication/metadata_acls.go), so every broker enforces them; creating an
//     existing binding succeeds and changes nothing.
//   - Needs ALTER on the cluster (acl_rules.go). With ACLs off
//     SECURITY_DISABLED, as Kafka.
func init() {
	register(30, 1, 3, barrier, (*Server).handleCreateACLs, needsClusterElse(acl.Alter, createACLsDenied))
}

func (s *Server) handleCreateACLs(ctx context.Context, req *kmsg.CreateACLsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	var valid []acl.Binding
	var validIdx []int
	for i, c := range req.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		if s.authorizer() == nil {
			setACLErr(&resp.Results[i].ErrorCode, &resp.Results[i].ErrorMessage, kerr.SecurityDisabled.Code, "no authorizer is configured (authorizer.class.name)")
			continue
		}
		b := acl.Binding{ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
		if err := b.Validate(); err != nil {
			setACLErr(&resp.Results[i].ErrorCode, &resp.Results[i].ErrorMessage, kerr.InvalidRequest.Code, err.Error())
			continue
		}
		valid = append(valid, b)
		validIdx = append(validIdx, i)
	}
	if len(valid) > 0 {
		if err := s.broker.ChangeACLs(ctx, replication.ACLChange{Create: valid}); err != nil {
			for _, i := range validIdx {
				setACLErr(&resp.Results[i].ErrorCode, &resp.Results[i].ErrorMessage, errCode(err), err.Error())
			}
		}
	}
	return resp, nil
}

func setACLErr(code *int16, msg **string, c int16, m string) {
	*code, *msg = c, &m
}

// createACLsDenied answers every creation CLUSTER_AUTHORIZATION_FAILED.
func createACLsDenied(r *kmsg.CreateACLsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	for range r.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode = errClusterAuth
		resp.Results = append(resp.Results, res)
	}
	return resp
}
