package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// Every registered API has an authorization rule of its own: an API
// without one is refused whole when ACLs are on, even to a super user
// (enforce's default), so a super user denied anything shows a missing
// rule.
func TestEveryAPIHasAnACLRule(t *testing.T) {
	admin := &authz{a: &acl.Authorizer{SuperUsers: map[string]bool{"User:admin": true}}, s: &Server{},
		r: acl.Request{Principal: "User:admin", Host: "127.0.0.1"}}
	for _, k := range registered() {
		if deny, _ := admin.enforce(kmsg.RequestForKey(k)); deny != nil {
			t.Errorf("API %d (%s) has no ACL rule in acl_rules.go", k, kmsg.NameForKey(k))
		}
	}
}

// With no ACL a principal that is not a super user gets Kafka's errors
// from requests denied whole, and a super user is let through.
func TestACLDenyWhole(t *testing.T) {
	nobody := &authz{a: &acl.Authorizer{SuperUsers: map[string]bool{"User:admin": true}}, s: &Server{},
		r: acl.Request{Principal: "User:nobody", Host: "127.0.0.1"}}
	admin := *nobody
	admin.r.Principal = "User:admin"
	wtm := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "t", []int32{0, 1}
	m.Topics = append(m.Topics, mt)
	wtm.Markers = append(wtm.Markers, m)
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group = "g"
	sgh := kmsg.NewPtrShareGroupHeartbeatRequest()
	sgh.GroupID = "queue"
	sf := kmsg.NewPtrShareFetchRequest()
	sf.GroupID = kmsg.StringPtr("queue")
	ipid := kmsg.NewPtrInitProducerIDRequest()
	ipid.TransactionalID = kmsg.StringPtr("tx")
	for _, c := range []struct {
		req  kmsg.Request
		code func(kmsg.Response) int16
		want int16
	}{
		{wtm, func(r kmsg.Response) int16 {
			return r.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[1].ErrorCode
		}, kerr.ClusterAuthorizationFailed.Code},
		{jg, func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }, kerr.GroupAuthorizationFailed.Code},
		{sgh, func(r kmsg.Response) int16 { return r.(*kmsg.ShareGroupHeartbeatResponse).ErrorCode }, kerr.GroupAuthorizationFailed.Code},
		{sf, func(r kmsg.Response) int16 { return r.(*kmsg.ShareFetchResponse).ErrorCode }, kerr.GroupAuthorizationFailed.Code},
		{ipid, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, kerr.TransactionalIDAuthorizationFailed.Code},
		{kmsg.NewPtrAlterPartitionAssignmentsRequest(), func(r kmsg.Response) int16 {
			return r.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode
		}, kerr.ClusterAuthorizationFailed.Code},
		{kmsg.NewPtrDescribeACLsRequest(), func(r kmsg.Response) int16 { return r.(*kmsg.DescribeACLsResponse).ErrorCode }, kerr.ClusterAuthorizationFailed.Code},
	} {
		deny, _ := nobody.enforce(c.req)
		if deny == nil {
			t.Fatalf("%s: not denied", kmsg.NameForKey(c.req.Key()))
		}
		if got := c.code(deny); got != c.want {
			t.Errorf("%s: error %d, want %d", kmsg.NameForKey(c.req.Key()), got, c.want)
		}
		if deny, _ := admin.enforce(c.req); deny != nil {
			t.Errorf("%s: a super user is denied", kmsg.NameForKey(c.req.Key()))
		}
	}
}
