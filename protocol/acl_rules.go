package protocol

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// Each API's authorization, as Kafka's KafkaApis does it (authorizer.go),
// is a rule its file registers with its handler (register, dispatch.go):
// a method such as (*authz).produce for an API of its own, or one of the
// shared rules below for APIs that check alike (needsCluster, needsGroup,
// needsClusterElse, fillsOps, anyone).

// aclRule is one API's authorization. It returns either deny, the whole
// request's answer, or after, which completes the handler's response (the
// denied resources added back with their error, what may not be described
// hidden, authorized operations filled); both nil: the request is allowed
// as it is. A rule may take the denied resources out of r before the
// handler sees it.
type aclRule[R kmsg.Request] = func(z *authz, r R) (deny kmsg.Response, after func(kmsg.Response))

// enforce runs kreq's registered rule. z is nil when ACLs are off: only
// the authorized-operations fields are filled (with every operation, as
// Kafka without an authorizer).
func (z *authz) enforce(kreq kmsg.Request) (deny kmsg.Response, after func(kmsg.Response)) {
	if z == nil {
		return nil, fillOps(nil, kreq)
	}
	if k := kreq.Key(); k >= 0 && int(k) < len(apis) && apis[k].authorize != nil {
		return apis[k].authorize(z, kreq)
	}
	// An API without a rule is refused, even to super users; register
	// takes a rule with every API (TestEveryAPIHasAnACLRule).
	return errorResponse(kreq, errClusterAuth), nil
}

// anyone is the rule of the APIs Kafka never authorizes: ApiVersions and
// the SASL handshake, which run before the principal is known.
// TestOnlyHandshakeAPIsAreOpen keeps it to them.
func anyone(*authz, kmsg.Request) (kmsg.Response, func(kmsg.Response)) { return nil, nil }

// needsCluster: the whole request needs op on the cluster, else its
// top-level ErrorCode is CLUSTER_AUTHORIZATION_FAILED.
func needsCluster(op kmsg.ACLOperation) aclRule[kmsg.Request] {
	return func(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		return z.clusterOp(kreq, op)
	}
}

// needsClusterElse: the whole request needs op on the cluster, else it is
// answered with denied(r), for responses that carry their error per
// resource rather than at the top.
func needsClusterElse[R kmsg.Request](op kmsg.ACLOperation, denied func(r R) kmsg.Response) aclRule[R] {
	return func(z *authz, r R) (kmsg.Response, func(kmsg.Response)) {
		if !z.cluster(op) {
			return denied(r), nil
		}
		return nil, nil
	}
}

// needsGroup: the whole request needs op on the group that group names,
// else its ErrorCode is GROUP_AUTHORIZATION_FAILED.
func needsGroup[R kmsg.Request](op kmsg.ACLOperation, group func(r R) string) aclRule[R] {
	return func(z *authz, r R) (kmsg.Response, func(kmsg.Response)) {
		return z.group(r, op, group(r))
	}
}

// fillsOps is the rule of the describe APIs whose response fillOps
// completes: the groups the principal may not describe answered with
// GROUP_AUTHORIZATION_FAILED, the authorized-operations fields filled.
func fillsOps(z *authz, kreq kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return nil, fillOps(z, kreq)
}

// group denies the whole request (its ErrorCode) unless op on group is
// allowed.
func (z *authz) group(kreq kmsg.Request, op kmsg.ACLOperation, group string) (kmsg.Response, func(kmsg.Response)) {
	if !z.ok(op, acl.Group, group) {
		return errorResponse(kreq, errGroupAuth), nil
	}
	return nil, nil
}

// clusterOp denies the whole request (its ErrorCode) unless op on the
// cluster is allowed.
func (z *authz) clusterOp(kreq kmsg.Request, op kmsg.ACLOperation) (kmsg.Response, func(kmsg.Response)) {
	if !z.cluster(op) {
		return errorResponse(kreq, errClusterAuth), nil
	}
	return nil, nil
}

// transactionalID denies the whole request with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED unless op on id is allowed.
func (z *authz) transactionalID(kreq kmsg.Request, op kmsg.ACLOperation, id string) (kmsg.Response, func(kmsg.Response)) {
	if !z.ok(op, acl.TransactionalID, id) {
		return errorResponse(kreq, errTxnAuth), nil
	}
	return nil, nil
}

// configResource is the error for op on a config resource, 0 if allowed.
func (z *authz) configResource(op kmsg.ACLOperation, rt kmsg.ConfigResourceType, name string) int16 {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		if !z.ok(op, acl.Topic, name) {
			return errTopicAuth
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !z.ok(op, acl.Group, name) {
			return errGroupAuth
		}
	default: // BROKER, BROKER_LOGGER, CLIENT_METRICS
		if !z.cluster(op) {
			return errClusterAuth
		}
	}
	return 0
}

// fillOps fills the authorized-operations fields a request asks for.
func fillOps(z *authz, kreq kmsg.Request) func(kmsg.Response) {
	switch r := kreq.(type) {
	case *kmsg.MetadataRequest:
		if !r.IncludeTopicAuthorizedOperations && !r.IncludeClusterAuthorizedOperations {
			return nil
		}
		return func(resp kmsg.Response) {
			mr := resp.(*kmsg.MetadataResponse)
			if r.IncludeClusterAuthorizedOperations && r.Version >= 8 && r.Version <= 10 {
				mr.AuthorizedOperations = z.ops(acl.Cluster, acl.ClusterName)
			}
			if r.IncludeTopicAuthorizedOperations && r.Version >= 8 {
				for i := range mr.Topics {
					if t := &mr.Topics[i]; t.Topic != nil && t.ErrorCode == 0 {
						t.AuthorizedOperations = z.ops(acl.Topic, *t.Topic)
					}
				}
			}
		}
	case *kmsg.DescribeGroupsRequest:
		return func(resp kmsg.Response) {
			for i := range resp.(*kmsg.DescribeGroupsResponse).Groups {
				g := &resp.(*kmsg.DescribeGroupsResponse).Groups[i]
				if z != nil && !z.ok(acl.Describe, acl.Group, g.Group) {
					d := kmsg.NewDescribeGroupsResponseGroup()
					d.Group, d.ErrorCode, d.AuthorizedOperations = g.Group, errGroupAuth, authorizedOpsNotRequested
					*g = d
				} else if r.IncludeAuthorizedOperations {
					g.AuthorizedOperations = z.ops(acl.Group, g.Group)
				}
			}
		}
	case *kmsg.ConsumerGroupDescribeRequest:
		return func(resp kmsg.Response) {
			for i := range resp.(*kmsg.ConsumerGroupDescribeResponse).Groups {
				g := &resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[i]
				if z != nil && !z.ok(acl.Describe, acl.Group, g.Group) {
					d := kmsg.NewConsumerGroupDescribeResponseGroup()
					d.Group, d.ErrorCode, d.AuthorizedOperations = g.Group, errGroupAuth, authorizedOpsNotRequested
					*g = d
				} else if r.IncludeAuthorizedOperations {
					g.AuthorizedOperations = z.ops(acl.Group, g.Group)
				}
			}
		}
	case *kmsg.ShareGroupDescribeRequest:
		return func(resp kmsg.Response) {
			for i := range resp.(*kmsg.ShareGroupDescribeResponse).Groups {
				g := &resp.(*kmsg.ShareGroupDescribeResponse).Groups[i]
				if z != nil && !z.ok(acl.Describe, acl.Group, g.GroupID) {
					d := kmsg.NewShareGroupDescribeResponseGroup()
					d.GroupID, d.ErrorCode, d.AuthorizedOperations = g.GroupID, errGroupAuth, authorizedOpsNotRequested
					*g = d
				} else if r.IncludeAuthorizedOperations {
					g.AuthorizedOperations = z.ops(acl.Group, g.GroupID)
				}
			}
		}
	case *kmsg.DescribeClusterRequest:
		if !r.IncludeClusterAuthorizedOperations {
			return nil
		}
		return func(resp kmsg.Response) {
			resp.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations = z.ops(acl.Cluster, acl.ClusterName)
		}
	}
	return nil
}

// splitTopics splits n topics by whether op on each is allowed; name
// gives the i-th topic's name.
func (z *authz) splitTopics(n int, op kmsg.ACLOperation, name func(i int) string) (keep, denied []int) {
	for i := 0; i < n; i++ {
		if z.ok(op, acl.Topic, name(i)) {
			keep = append(keep, i)
		} else {
			denied = append(denied, i)
		}
	}
	return keep, denied
}

func pick[T any](all []T, idx []int) []T {
	out := make([]T, 0, len(idx))
	for _, i := range idx {
		out = append(out, all[i])
	}
	return out
}
