package acl

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func bind(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) Binding {
	return Binding{ResourceType: rt, PatternType: pt, ResourceName: name, Principal: principal, Host: host, Operation: op, Permission: perm}
}

func TestAuthorize(t *testing.T) {
	s := NewSet([]Binding{
		bind(Topic, Literal, "orders", "User:alice", "*", Read, Allow),
		bind(Topic, Literal, "orders", "User:bob", "*", All, Allow),
		bind(Topic, Literal, "orders", "User:bob", "*", Write, Deny),
		bind(Topic, Prefixed, "logs-", "User:*", "10.0.0.1", Write, Allow),
		bind(Topic, Literal, "*", "User:carol", "*", Describe, Allow),
		bind(Group, Literal, "g", "User:alice", "*", AlterConfigs, Allow),
	})
	a := &Authorizer{SuperUsers: map[string]bool{"User:admin": true}}
	alice := Request{"User:alice", "127.0.0.1"}
	bob := Request{"User:bob", "127.0.0.1"}
	for _, c := range []struct {
		name string
		r    Request
		op   kmsg.ACLOperation
		rt   kmsg.ACLResourceType
		res  string
		want bool
	}{
		{"allowed", alice, Read, Topic, "orders", true},
		{"read implies describe", alice, Describe, Topic, "orders", true},
		{"not granted", alice, Write, Topic, "orders", false},
		{"deny beats all", bob, Write, Topic, "orders", false},
		{"all grants others", bob, Delete, Topic, "orders", true},
		{"prefixed host match", Request{"User:x", "10.0.0.1"}, Write, Topic, "logs-a", true},
		{"prefixed other host", Request{"User:x", "10.0.0.2"}, Write, Topic, "logs-a", false},
		{"prefix does not match", Request{"User:x", "10.0.0.1"}, Write, Topic, "log", false},
		{"wildcard resource", Request{"User:carol", "h"}, Describe, Topic, "anything", true},
		{"wildcard resource is an acl for all: no default", alice, Read, Topic, "anything", false},
		{"super user", Request{"User:admin", "h"}, Delete, Cluster, ClusterName, true},
		{"alter_configs implies describe_configs", alice, DescribeConfigs, Group, "g", true},
		{"alter_configs does not imply describe", alice, Describe, Group, "g", false},
		{"no acl, default deny", alice, Read, Group, "other", false},
	} {
		if got := a.Authorize(s, c.r, c.op, c.rt, c.res); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	open := &Authorizer{AllowIfNoACL: true}
	if !open.Authorize(s, alice, Read, Group, "other") {
		t.Error("allow.everyone.if.no.acl.found: a resource without ACLs is denied")
	}
	if open.Authorize(s, alice, Write, Topic, "orders") {
		t.Error("allow.everyone.if.no.acl.found applies to a resource with ACLs")
	}
	if !a.AuthorizeAny(s, alice, Read, Topic) || a.AuthorizeAny(s, alice, Write, Topic) {
		t.Error("AuthorizeAny")
	}
	if a.AuthorizeAny(s, bob, Write, Topic) {
		t.Error("AuthorizeAny: bob's only WRITE is denied")
	}
}

func TestFilter(t *testing.T) {
	s := NewSet([]Binding{
		bind(Topic, Literal, "orders", "User:alice", "*", Read, Allow),
		bind(Topic, Literal, "*", "User:alice", "*", Read, Allow),
		bind(Topic, Prefixed, "ord", "User:bob", "*", Write, Allow),
		bind(Group, Literal, "orders", "User:alice", "*", Read, Allow),
	})
	name := "orders"
	for _, c := range []struct {
		f    Filter
		want int
	}{
		{Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: AnyPat, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, 4},
		{Filter{ResourceType: Topic, ResourceName: &name, PatternType: Match, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, 3},
		{Filter{ResourceType: Topic, ResourceName: &name, PatternType: AnyPat, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, 1},
		{Filter{ResourceType: Topic, PatternType: Prefixed, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, 1},
		{Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: AnyPat, Operation: Read, Permission: Allow}, 3},
	} {
		if got := len(s.Select(c.f)); got != c.want {
			t.Errorf("%+v: %d bindings, want %d", c.f, got, c.want)
		}
	}
	if s2 := s.With(nil, s.All()[:1]); s2.Len() != 3 || s.Len() != 4 {
		t.Errorf("With: %d, %d", s2.Len(), s.Len())
	}
}

func TestValidate(t *testing.T) {
	good := bind(Topic, Literal, "t", "User:a", "*", Read, Allow)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []Binding{
		bind(kmsg.ACLResourceTypeAny, Literal, "t", "User:a", "*", Read, Allow),
		bind(Topic, Match, "t", "User:a", "*", Read, Allow),
		bind(Topic, Literal, "t", "User:a", "*", kmsg.ACLOperationAny, Allow),
		bind(Topic, Literal, "t", "User:a", "*", Read, kmsg.ACLPermissionTypeAny),
		bind(Topic, Literal, "", "User:a", "*", Read, Allow),
		bind(Topic, Literal, "t", "alice", "*", Read, Allow),
		bind(Cluster, Literal, "c", "User:a", "*", Alter, Allow),
		bind(Topic, Literal, "t", "User:a", "", Read, Allow),
	} {
		if b.Validate() == nil {
			t.Errorf("%v: valid", b)
		}
	}
	if op, err := ParseOp("describe_configs"); err != nil || op != DescribeConfigs {
		t.Error(op, err)
	}
	if op, err := ParseOp("TwoPhaseCommit"); err != nil || OpName(op) != "TWO_PHASE_COMMIT" {
		t.Error(op, err)
	}
	if Bitfield([]kmsg.ACLOperation{Read, Describe}) != 1<<3|1<<8 {
		t.Error("bitfield")
	}
}
