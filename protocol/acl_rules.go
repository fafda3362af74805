package protocol

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/log"
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

func (z *authz) produce(r *kmsg.ProduceRequest) (kmsg.Response, func(kmsg.Response)) {
	name := func(i int) string {
		if r.Version >= 13 {
			return z.topicName(r.Topics[i].TopicID)
		}
		return r.Topics[i].Topic
	}
	txnDenied := r.TransactionID != nil && !z.ok(acl.Write, acl.TransactionalID, *r.TransactionID)
	keep, denied := z.splitTopics(len(r.Topics), acl.Write, name)
	if txnDenied {
		keep, denied = nil, append(keep, denied...)
	}
	if len(denied) == 0 {
		return nil, nil
	}
	code := errTopicAuth
	if txnDenied {
		code = errTxnAuth
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		pr := resp.(*kmsg.ProduceResponse)
		for _, t := range gone {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, code
				sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			pr.Topics = append(pr.Topics, st)
		}
	}
}

func (z *authz) fetch(r *kmsg.FetchRequest) (kmsg.Response, func(kmsg.Response)) {
	replica := r.ReplicaID >= 0
	if r.Version >= 15 {
		replica = r.ReplicaState.ID >= 0
	}
	if replica { // a follower's fetch
		if !z.cluster(acl.ClusterAction) {
			return errorResponse(r, errClusterAuth), nil
		}
		return nil, nil
	}
	name := func(i int) string {
		if r.Version >= 13 {
			return z.topicName(r.Topics[i].TopicID)
		}
		return r.Topics[i].Topic
	}
	keep, denied := z.splitTopics(len(r.Topics), acl.Read, name)
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		var fr *kmsg.FetchResponse
		var regions map[regionKey]*log.Region
		switch v := resp.(type) {
		case *kmsg.FetchResponse:
			fr = v
		case *fetchResponse:
			fr, regions = v.FetchResponse, v.regions
		default:
			return
		}
		// An incremental session also answers for partitions the request
		// did not name, added while READ was allowed, and a long poll
		// may end after an ACL changed: each topic is checked again
		// against the bindings now, and its records dropped when READ is
		// gone.
		z.refresh()
		for i := range fr.Topics {
			t := &fr.Topics[i]
			n := t.Topic
			if r.Version >= 13 {
				n = z.topicName(t.TopicID)
			}
			if z.ok(acl.Read, acl.Topic, n) {
				continue
			}
			for j := range t.Partitions {
				k := regionKey{topic: t.Topic, partition: t.Partitions[j].Partition}
				if r.Version >= 13 {
					k = regionKey{topicID: t.TopicID, partition: t.Partitions[j].Partition}
				}
				if rg := regions[k]; rg != nil {
					rg.Release()
					delete(regions, k)
				}
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = t.Partitions[j].Partition, errTopicAuth
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				t.Partitions[j] = sp
			}
		}
		for _, t := range gone {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errTopicAuth
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			fr.Topics = append(fr.Topics, st)
		}
	}
}

func (z *authz) metadata(r *kmsg.MetadataRequest) (kmsg.Response, func(kmsg.Response)) {
	fill := fillOps(z, r)
	all := r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0)
	if all {
		return nil, func(resp kmsg.Response) {
			mr := resp.(*kmsg.MetadataResponse)
			keep := mr.Topics[:0]
			for _, t := range mr.Topics {
				if t.Topic != nil && z.ok(acl.Describe, acl.Topic, *t.Topic) {
					keep = append(keep, t)
				}
			}
			mr.Topics = keep
			if fill != nil {
				fill(resp)
			}
		}
	}
	autoCreate := r.Version < 4 || r.AllowAutoTopicCreation
	var keep []kmsg.MetadataRequestTopic
	var gone []kmsg.MetadataResponseTopic
	for _, t := range r.Topics {
		name := ""
		if t.Topic != nil && (r.Version < 10 || t.TopicID == [16]byte{}) {
			name = *t.Topic
		} else {
			name = z.topicName(t.TopicID)
			if name == "" {
				keep = append(keep, t) // unknown: the handler's UNKNOWN_TOPIC_ID
				continue
			}
		}
		denied := !z.ok(acl.Describe, acl.Topic, name)
		if !denied && autoCreate && z.s.broker != nil {
			if _, exists := z.s.broker.Topic(name); !exists && validTopicName(name) {
				denied = !z.cluster(acl.Create) && !z.ok(acl.Create, acl.Topic, name)
			}
		}
		if denied {
			gone = append(gone, metadataError(t.Topic, t.TopicID, errTopicAuth))
		} else {
			keep = append(keep, t)
		}
	}
	if len(gone) == 0 {
		return nil, fill
	}
	r.Topics = keep
	if len(keep) == 0 {
		r.Topics = []kmsg.MetadataRequestTopic{} // not nil: nil asks for all topics
	}
	return nil, func(resp kmsg.Response) {
		mr := resp.(*kmsg.MetadataResponse)
		if r.Version == 0 && len(keep) == 0 {
			mr.Topics = nil // v0's empty list asked for all topics
		}
		mr.Topics = append(mr.Topics, gone...)
		if fill != nil {
			fill(resp)
		}
	}
}

func (z *authz) offsetForLeaderEpochDenied(r *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, t := range r.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, errClusterAuth
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (z *authz) offsetCommit(r *kmsg.OffsetCommitRequest) (kmsg.Response, func(kmsg.Response)) {
	groupDenied := !z.ok(acl.Read, acl.Group, r.Group)
	name := func(i int) string {
		if r.Version >= 10 {
			return z.topicName(r.Topics[i].TopicID)
		}
		return r.Topics[i].Topic
	}
	keep, denied := z.splitTopics(len(r.Topics), acl.Read, name)
	code := errTopicAuth
	if groupDenied {
		keep, denied, code = nil, append(keep, denied...), errGroupAuth
	}
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	add := func(resp *kmsg.OffsetCommitResponse) {
		for _, t := range gone {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
	}
	if len(keep) == 0 {
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		add(resp)
		return resp, nil
	}
	return nil, func(resp kmsg.Response) { add(resp.(*kmsg.OffsetCommitResponse)) }
}

func (z *authz) offsetFetch(r *kmsg.OffsetFetchRequest) (kmsg.Response, func(kmsg.Response)) {
	hide := func(topics []kmsg.OffsetFetchResponseTopic, all bool) []kmsg.OffsetFetchResponseTopic {
		keep := topics[:0]
		for _, t := range topics {
			if z.ok(acl.Describe, acl.Topic, t.Topic) {
				keep = append(keep, t)
				continue
			}
			if all {
				continue
			}
			for j := range t.Partitions {
				p := kmsg.NewOffsetFetchResponseTopicPartition()
				p.Partition, p.ErrorCode = t.Partitions[j].Partition, errTopicAuth
				t.Partitions[j] = p
			}
			keep = append(keep, t)
		}
		return keep
	}
	if r.Version < 8 {
		if !z.ok(acl.Describe, acl.Group, r.Group) {
			return errorResponse(r, errGroupAuth), nil
		}
		return nil, func(resp kmsg.Response) {
			or := resp.(*kmsg.OffsetFetchResponse)
			or.Topics = hide(or.Topics, r.Topics == nil)
		}
	}
	return nil, func(resp kmsg.Response) {
		or := resp.(*kmsg.OffsetFetchResponse)
		for i := range or.Groups {
			g := &or.Groups[i]
			if !z.ok(acl.Describe, acl.Group, g.Group) {
				g.Topics, g.ErrorCode = nil, errGroupAuth
				continue
			}
			all := true
			for _, rg := range r.Groups {
				if rg.Group == g.Group && rg.Topics != nil {
					all = false
				}
			}
			topics := make([]kmsg.OffsetFetchResponseTopic, 0, len(g.Topics))
			for _, gt := range g.Topics {
				var t kmsg.OffsetFetchResponseTopic
				t.Topic = gt.Topic
				if r.Version >= 10 && gt.Topic == "" {
					t.Topic = z.topicName(gt.TopicID)
				}
				topics = append(topics, t)
			}
			keep := g.Topics[:0]
			for j, gt := range g.Topics {
				if z.ok(acl.Describe, acl.Topic, topics[j].Topic) {
					keep = append(keep, gt)
					continue
				}
				if all {
					continue
				}
				for k := range gt.Partitions {
					p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					p.Partition, p.ErrorCode = gt.Partitions[k].Partition, errTopicAuth
					gt.Partitions[k] = p
				}
				keep = append(keep, gt)
			}
			g.Topics = keep
		}
	}
}

// offsetDelete: DELETE on the group, else the whole request fails; READ
// per topic.
func (z *authz) offsetDelete(r *kmsg.OffsetDeleteRequest) (kmsg.Response, func(kmsg.Response)) {
	if d, _ := z.group(r, acl.Delete, r.Group); d != nil {
		return d, nil
	}
	keep, denied := z.splitTopics(len(r.Topics), acl.Read, func(i int) string { return r.Topics[i].Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		or := resp.(*kmsg.OffsetDeleteResponse)
		for _, t := range gone {
			st := kmsg.NewOffsetDeleteResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewOffsetDeleteResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errTopicAuth
				st.Partitions = append(st.Partitions, sp)
			}
			or.Topics = append(or.Topics, st)
		}
	}
}

// findCoordinator: DESCRIBE on each key's group or transactional ID; a
// denied key answers its error and no coordinator.
func (z *authz) findCoordinator(r *kmsg.FindCoordinatorRequest) (kmsg.Response, func(kmsg.Response)) {
	allowed := func(key string) (bool, int16) {
		switch r.CoordinatorType {
		case 1:
			return z.ok(acl.Describe, acl.TransactionalID, key), errTxnAuth
		case 2: // share: "group:topicId:partition"
			if i := strings.Index(key, ":"); i >= 0 {
				key = key[:i]
			}
		}
		return z.ok(acl.Describe, acl.Group, key), errGroupAuth
	}
	return nil, func(resp kmsg.Response) {
		fr := resp.(*kmsg.FindCoordinatorResponse)
		if r.Version < 4 {
			if ok, code := allowed(r.CoordinatorKey); !ok {
				fr.ErrorCode, fr.ErrorMessage, fr.NodeID, fr.Host, fr.Port = code, nil, -1, "", -1
			}
			return
		}
		for i := range fr.Coordinators {
			c := &fr.Coordinators[i]
			if ok, code := allowed(c.Key); !ok {
				c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port = code, nil, -1, "", -1
			}
		}
	}
}

func (z *authz) deleteGroups(r *kmsg.DeleteGroupsRequest) (kmsg.Response, func(kmsg.Response)) {
	var keep, gone []string
	for _, g := range r.Groups {
		if z.ok(acl.Delete, acl.Group, g) {
			keep = append(keep, g)
		} else {
			gone = append(gone, g)
		}
	}
	if len(gone) == 0 {
		return nil, nil
	}
	r.Groups = keep
	return nil, func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteGroupsResponse)
		for _, g := range gone {
			res := kmsg.NewDeleteGroupsResponseGroup()
			res.Group, res.ErrorCode = g, errGroupAuth
			dr.Groups = append(dr.Groups, res)
		}
	}
}

func (z *authz) shareFetch(r *kmsg.ShareFetchRequest) (kmsg.Response, func(kmsg.Response)) {
	if r.GroupID != nil && !z.ok(acl.Read, acl.Group, *r.GroupID) {
		return errorResponse(r, errGroupAuth), nil
	}
	keep, denied := z.splitTopics(len(r.Topics), acl.Read, func(i int) string { return z.topicName(r.Topics[i].TopicID) })
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		z.refresh()
		var sr *kmsg.ShareFetchResponse
		switch v := resp.(type) {
		case *kmsg.ShareFetchResponse:
			sr = v
		case *shareFetchResponse:
			sr = v.ShareFetchResponse
		default:
			return
		}
		for _, t := range gone {
			st := kmsg.NewShareFetchResponseTopic()
			st.TopicID = t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewShareFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errTopicAuth
				st.Partitions = append(st.Partitions, sp)
			}
			sr.Topics = append(sr.Topics, st)
		}
	}
}

func (z *authz) shareAcknowledge(r *kmsg.ShareAcknowledgeRequest) (kmsg.Response, func(kmsg.Response)) {
	if r.GroupID != nil && !z.ok(acl.Read, acl.Group, *r.GroupID) {
		return errorResponse(r, errGroupAuth), nil
	}
	keep, denied := z.splitTopics(len(r.Topics), acl.Read, func(i int) string { return z.topicName(r.Topics[i].TopicID) })
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		sr := resp.(*kmsg.ShareAcknowledgeResponse)
		for _, t := range gone {
			st := kmsg.NewShareAcknowledgeResponseTopic()
			st.TopicID = t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewShareAcknowledgeResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errTopicAuth
				st.Partitions = append(st.Partitions, sp)
			}
			sr.Topics = append(sr.Topics, st)
		}
	}
}

// describeShareGroupOffsets: DESCRIBE on each group (else its error and no
// topics) and on each topic (else hidden).
func (z *authz) describeShareGroupOffsets(*kmsg.DescribeShareGroupOffsetsRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		for i := range resp.(*kmsg.DescribeShareGroupOffsetsResponse).Groups {
			g := &resp.(*kmsg.DescribeShareGroupOffsetsResponse).Groups[i]
			if !z.ok(acl.Describe, acl.Group, g.GroupID) {
				g.Topics, g.ErrorCode, g.ErrorMessage = nil, errGroupAuth, nil
				continue
			}
			keep := g.Topics[:0]
			for _, t := range g.Topics {
				if z.ok(acl.Describe, acl.Topic, t.Topic) {
					keep = append(keep, t)
				}
			}
			g.Topics = keep
		}
	}
}

func shareStateDenied(kreq kmsg.Request) kmsg.Response {
	resp := kreq.ResponseKind()
	resp.SetVersion(kreq.GetVersion())
	switch r := kreq.(type) {
	case *kmsg.InitializeShareGroupStateRequest:
		out := resp.(*kmsg.InitializeShareGroupStateResponse)
		for _, t := range r.Topics {
			st := kmsg.NewInitializeShareGroupStateResponseTopic()
			st.TopicID = t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errClusterAuth
				st.Partitions = append(st.Partitions, sp)
			}
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.ReadShareGroupStateSummaryRequest:
		out := resp.(*kmsg.ReadShareGroupStateSummaryResponse)
		for _, t := range r.Topics {
			st := kmsg.NewReadShareGroupStateSummaryResponseTopic()
			st.TopicID = t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errClusterAuth
				st.Partitions = append(st.Partitions, sp)
			}
			out.Topics = append(out.Topics, st)
		}
	case *kmsg.DeleteShareGroupStateRequest:
		out := resp.(*kmsg.DeleteShareGroupStateResponse)
		for _, t := range r.Topics {
			st := kmsg.NewDeleteShareGroupStateResponseTopic()
			st.TopicID = t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errClusterAuth
				st.Partitions = append(st.Partitions, sp)
			}
			out.Topics = append(out.Topics, st)
		}
	}
	return resp
}

// addPartitionsToTxn: v0-v3 (from clients) need WRITE on the
// transactional ID and on each topic; v4+ (from brokers) CLUSTER_ACTION.
// Kafka answers a partly denied request without adding anything: the
// denied topics get their error, the others OPERATION_NOT_ATTEMPTED.
func (z *authz) addPartitionsToTxn(r *kmsg.AddPartitionsToTxnRequest) (kmsg.Response, func(kmsg.Response)) {
	if r.Version >= 4 {
		return z.clusterOp(r, acl.ClusterAction)
	}
	txnDenied := !z.ok(acl.Write, acl.TransactionalID, r.TransactionalID)
	_, denied := z.splitTopics(len(r.Topics), acl.Write, func(i int) string { return r.Topics[i].Topic })
	if !txnDenied && len(denied) == 0 {
		return nil, nil
	}
	isDenied := map[int]bool{}
	for _, i := range denied {
		isDenied[i] = true
	}
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for i, t := range r.Topics {
		code := int16(55) // OPERATION_NOT_ATTEMPTED
		switch {
		case txnDenied:
			code = errTxnAuth
		case isDenied[i]:
			code = errTopicAuth
		}
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// txnOffsetCommit needs WRITE on the transactional ID, READ on the group
// and on each topic.
func (z *authz) txnOffsetCommit(r *kmsg.TxnOffsetCommitRequest) (kmsg.Response, func(kmsg.Response)) {
	code := int16(0)
	switch {
	case !z.ok(acl.Write, acl.TransactionalID, r.TransactionalID):
		code = errTxnAuth
	case !z.ok(acl.Read, acl.Group, r.Group):
		code = errGroupAuth
	}
	_, denied := z.splitTopics(len(r.Topics), acl.Read, func(i int) string { return r.Topics[i].Topic })
	if code == 0 && len(denied) == 0 {
		return nil, nil
	}
	isDenied := map[int]bool{}
	for _, i := range denied {
		isDenied[i] = true
	}
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for i, t := range r.Topics {
		c := code
		if c == 0 {
			c = int16(55) // OPERATION_NOT_ATTEMPTED
			if isDenied[i] {
				c = errTopicAuth
			}
		}
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.Partition, c
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

func writeTxnMarkersDenied(r *kmsg.WriteTxnMarkersRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range r.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition, sp.ErrorCode = p, errClusterAuth
				st.Partitions = append(st.Partitions, sp)
			}
			rm.Topics = append(rm.Topics, st)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

func electLeadersDenied(r *kmsg.ElectLeadersRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.ErrorCode = errClusterAuth
	for _, t := range r.Topics {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, errClusterAuth
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// createTopics: CREATE on the cluster, or on each topic.
func (z *authz) createTopics(r *kmsg.CreateTopicsRequest) (kmsg.Response, func(kmsg.Response)) {
	if z.cluster(acl.Create) {
		return nil, nil
	}
	keep, denied := z.splitTopics(len(r.Topics), acl.Create, func(i int) string { return r.Topics[i].Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		cr := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range gone {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic, st.ErrorCode = t.Topic, errTopicAuth
			st.NumPartitions, st.ReplicationFactor = -1, -1
			cr.Topics = append(cr.Topics, st)
		}
	}
}

func (z *authz) deleteTopics(r *kmsg.DeleteTopicsRequest) (kmsg.Response, func(kmsg.Response)) {
	if r.Version < 6 {
		keep, denied := z.splitTopics(len(r.TopicNames), acl.Delete, func(i int) string { return r.TopicNames[i] })
		if len(denied) == 0 {
			return nil, nil
		}
		gone := pick(r.TopicNames, denied)
		r.TopicNames = pick(r.TopicNames, keep)
		return nil, func(resp kmsg.Response) {
			dr := resp.(*kmsg.DeleteTopicsResponse)
			for _, n := range gone {
				st := kmsg.NewDeleteTopicsResponseTopic()
				name := n
				st.Topic, st.ErrorCode = &name, errTopicAuth
				dr.Topics = append(dr.Topics, st)
			}
		}
	}
	name := func(i int) string {
		if t := r.Topics[i]; t.Topic != nil {
			return *t.Topic
		}
		return z.topicName(r.Topics[i].TopicID)
	}
	keep, denied := z.splitTopics(len(r.Topics), acl.Delete, name)
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteTopicsResponse)
		for _, t := range gone {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic, st.TopicID, st.ErrorCode = t.Topic, t.TopicID, errTopicAuth
			dr.Topics = append(dr.Topics, st)
		}
	}
}

func (z *authz) deleteRecords(r *kmsg.DeleteRecordsRequest) (kmsg.Response, func(kmsg.Response)) {
	keep, denied := z.splitTopics(len(r.Topics), acl.Delete, func(i int) string { return r.Topics[i].Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		dr := resp.(*kmsg.DeleteRecordsResponse)
		for _, t := range gone {
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewDeleteRecordsResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.LowWatermark = p.Partition, errTopicAuth, -1
				st.Partitions = append(st.Partitions, sp)
			}
			dr.Topics = append(dr.Topics, st)
		}
	}
}

func (z *authz) createPartitions(r *kmsg.CreatePartitionsRequest) (kmsg.Response, func(kmsg.Response)) {
	keep, denied := z.splitTopics(len(r.Topics), acl.Alter, func(i int) string { return r.Topics[i].Topic })
	if len(denied) == 0 {
		return nil, nil
	}
	gone := pick(r.Topics, denied)
	r.Topics = pick(r.Topics, keep)
	return nil, func(resp kmsg.Response) {
		cr := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range gone {
			st := kmsg.NewCreatePartitionsResponseTopic()
			st.Topic, st.ErrorCode = t.Topic, errTopicAuth
			cr.Topics = append(cr.Topics, st)
		}
	}
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

// listOffsets: DESCRIBE per topic; a denied topic's partitions answer
// TOPIC_AUTHORIZATION_FAILED.
func (z *authz) listOffsets(*kmsg.ListOffsetsRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		for i := range resp.(*kmsg.ListOffsetsResponse).Topics {
			t := &resp.(*kmsg.ListOffsetsResponse).Topics[i]
			if !z.ok(acl.Describe, acl.Topic, t.Topic) {
				for j := range t.Partitions {
					p := kmsg.NewListOffsetsResponseTopicPartition()
					p.Partition, p.ErrorCode = t.Partitions[j].Partition, errTopicAuth
					t.Partitions[j] = p
				}
			}
		}
	}
}

// offsetForLeaderEpoch: a follower's (ReplicaID >= 0) needs CLUSTER_ACTION;
// a client's DESCRIBE per topic.
func (z *authz) offsetForLeaderEpoch(r *kmsg.OffsetForLeaderEpochRequest) (kmsg.Response, func(kmsg.Response)) {
	if r.ReplicaID >= 0 && !z.cluster(acl.ClusterAction) {
		return z.offsetForLeaderEpochDenied(r), nil
	}
	return nil, func(resp kmsg.Response) {
		for i := range resp.(*kmsg.OffsetForLeaderEpochResponse).Topics {
			t := &resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[i]
			if !z.ok(acl.Describe, acl.Topic, t.Topic) {
				for j := range t.Partitions {
					p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
					p.Partition, p.ErrorCode = t.Partitions[j].Partition, errTopicAuth
					t.Partitions[j] = p
				}
			}
		}
	}
}

// listGroups: every group with DESCRIBE on the cluster, else only those
// the principal may describe.
func (z *authz) listGroups(*kmsg.ListGroupsRequest) (kmsg.Response, func(kmsg.Response)) {
	if z.cluster(acl.Describe) {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		lr := resp.(*kmsg.ListGroupsResponse)
		keep := lr.Groups[:0]
		for _, g := range lr.Groups {
			if z.ok(acl.Describe, acl.Group, g.Group) {
				keep = append(keep, g)
			}
		}
		lr.Groups = keep
	}
}

// alterShareGroupOffsets: READ on the group, then READ on every topic, else
// the whole request fails.
func (z *authz) alterShareGroupOffsets(r *kmsg.AlterShareGroupOffsetsRequest) (kmsg.Response, func(kmsg.Response)) {
	if d, _ := z.group(r, acl.Read, r.GroupID); d != nil {
		return d, nil
	}
	for _, t := range r.Topics {
		if !z.ok(acl.Read, acl.Topic, t.Topic) {
			return errorResponse(r, errTopicAuth), nil
		}
	}
	return nil, nil
}

// deleteShareGroupOffsets: DELETE on the group, then READ on every topic,
// else the whole request fails.
func (z *authz) deleteShareGroupOffsets(r *kmsg.DeleteShareGroupOffsetsRequest) (kmsg.Response, func(kmsg.Response)) {
	if d, _ := z.group(r, acl.Delete, r.GroupID); d != nil {
		return d, nil
	}
	for _, t := range r.Topics {
		if !z.ok(acl.Read, acl.Topic, t.Topic) {
			return errorResponse(r, errTopicAuth), nil
		}
	}
	return nil, nil
}

// initProducerID: a transactional producer needs WRITE on its ID; an
// idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
func (z *authz) initProducerID(r *kmsg.InitProducerIDRequest) (kmsg.Response, func(kmsg.Response)) {
	if r.TransactionalID != nil {
		return z.transactionalID(r, acl.Write, *r.TransactionalID)
	}
	if !z.cluster(acl.IdempotentWrite) && !z.a.AuthorizeAny(z.set, z.r, acl.Write, acl.Topic) {
		return errorResponse(r, errClusterAuth), nil
	}
	return nil, nil
}

// addOffsetsToTxn: WRITE on the transactional ID, then READ on the group.
func (z *authz) addOffsetsToTxn(r *kmsg.AddOffsetsToTxnRequest) (kmsg.Response, func(kmsg.Response)) {
	if d, _ := z.transactionalID(r, acl.Write, r.TransactionalID); d != nil {
		return d, nil
	}
	return z.group(r, acl.Read, r.Group)
}

// endTxn: WRITE on the transactional ID.
func (z *authz) endTxn(r *kmsg.EndTxnRequest) (kmsg.Response, func(kmsg.Response)) {
	return z.transactionalID(r, acl.Write, r.TransactionalID)
}

// describeTransactions: DESCRIBE per transactional ID; a denied one
// answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing else.
func (z *authz) describeTransactions(*kmsg.DescribeTransactionsRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		for i := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
			st := &resp.(*kmsg.DescribeTransactionsResponse).TransactionStates[i]
			if !z.ok(acl.Describe, acl.TransactionalID, st.TransactionalID) {
				d := kmsg.NewDescribeTransactionsResponseTransactionState()
				d.TransactionalID, d.ErrorCode = st.TransactionalID, errTxnAuth
				*st = d
			}
		}
	}
}

// listTransactions lists only the transactional IDs the principal may
// describe.
func (z *authz) listTransactions(*kmsg.ListTransactionsRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		lr := resp.(*kmsg.ListTransactionsResponse)
		keep := lr.TransactionStates[:0]
		for _, st := range lr.TransactionStates {
			if z.ok(acl.Describe, acl.TransactionalID, st.TransactionalID) {
				keep = append(keep, st)
			}
		}
		lr.TransactionStates = keep
	}
}

// describeProducers: READ per topic; a denied topic's partitions answer
// TOPIC_AUTHORIZATION_FAILED.
func (z *authz) describeProducers(*kmsg.DescribeProducersRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		for i := range resp.(*kmsg.DescribeProducersResponse).Topics {
			t := &resp.(*kmsg.DescribeProducersResponse).Topics[i]
			if !z.ok(acl.Read, acl.Topic, t.Topic) {
				for j := range t.Partitions {
					p := kmsg.NewDescribeProducersResponseTopicPartition()
					p.Partition, p.ErrorCode = t.Partitions[j].Partition, errTopicAuth
					t.Partitions[j] = p
				}
			}
		}
	}
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

// alterClientQuotasDenied answers every entry CLUSTER_AUTHORIZATION_FAILED:
// AlterClientQuotas needs ALTER_CONFIGS on the cluster, as Kafka's
// handleAlterClientQuotasRequest.
func alterClientQuotasDenied(r *kmsg.AlterClientQuotasRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	msg := kerr.ClusterAuthorizationFailed.Message
	for _, en := range r.Entries {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		out.ErrorCode, out.ErrorMessage = errClusterAuth, &msg
		for _, c := range en.Entity {
			oe := kmsg.NewAlterClientQuotasResponseEntryEntity()
			oe.Type, oe.Name = c.Type, c.Name
			out.Entity = append(out.Entity, oe)
		}
		resp.Entries = append(resp.Entries, out)
	}
	return resp
}

// alterUserSCRAMCredentialsDenied answers every user named, once,
// CLUSTER_AUTHORIZATION_FAILED.
func alterUserSCRAMCredentialsDenied(r *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	users := map[string]bool{}
	add := func(u string) {
		if !users[u] {
			users[u] = true
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode = u, errClusterAuth
			resp.Results = append(resp.Results, res)
		}
	}
	for _, d := range r.Deletions {
		add(d.Name)
	}
	for _, u := range r.Upsertions {
		add(u.Name)
	}
	return resp
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
