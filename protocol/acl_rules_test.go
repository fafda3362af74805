package protocol

import (
	"context"
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
			t.Errorf("API %d (%s) has no ACL rule in its registration", k, kmsg.NameForKey(k))
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

// Every registered API carries its ACL rule in its registration, so a
// new API cannot be served without saying how it is authorized.
func TestRegistryHoldsEveryACLRule(t *testing.T) {
	for _, k := range registered() {
		if apis[k].authorize == nil {
			t.Errorf("API %d (%s), registered in %s, has no ACL rule", k, kmsg.NameForKey(k), apis[k].file)
		}
	}
}

// Only the APIs Kafka never authorizes (they run before the principal is
// known) use the rule anyone: a new API that needs no authorization must
// say why here.
func TestOnlyHandshakeAPIsAreOpen(t *testing.T) {
	want := map[int16]bool{17: true, 18: true, 36: true} // SaslHandshake, ApiVersions, SaslAuthenticate
	for _, k := range registered() {
		if apis[k].open != want[k] {
			t.Errorf("API %d (%s): open %v, want %v", k, kmsg.NameForKey(k), apis[k].open, want[k])
		}
	}
}

// register refuses an API without an ACL rule, or with the rule of
// another request type.
func TestRegisterNeedsAnACLRule(t *testing.T) {
	const key = 34 // AlterReplicaLogDirs: not served
	if apis[key].ok {
		t.Fatalf("API %d is registered; pick another key", key)
	}
	defer func() { apis[key] = apiEntry{} }()
	h := func(*Server, context.Context, *kmsg.AlterReplicaLogDirsRequest) (kmsg.Response, error) {
		return nil, nil
	}
	for name, reg := range map[string]func(){
		"no rule":         func() { register(key, 0, 0, barrier, h, aclRule[kmsg.Request](nil)) },
		"another request": func() { register(key, 0, 0, barrier, h, (*authz).produce) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registered", name)
				}
			}()
			reg()
		}()
	}
}
