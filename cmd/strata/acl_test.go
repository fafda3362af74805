package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// TestACLSettings: ACLs are off by default; Kafka's StandardAuthorizer
// class turns them on with super.users and allow.everyone.if.no.acl.found;
// other classes and bad values are refused naming the setting.
func TestACLSettings(t *testing.T) {
	cfg, _, err := loadConfig(nil, nil, nil, nil)
	if err != nil || cfg.ACLs.Authorizer != nil {
		t.Fatalf("default: %v %+v", err, cfg.ACLs)
	}
	cfg, _, err = loadConfig([]string{"--set", "authorizer.class.name=" + StandardAuthorizerClass,
		"--set", "super.users=User:admin; User:broker", "--set", "allow.everyone.if.no.acl.found=true"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.ACLs.Authorizer; a == nil || !a.SuperUsers["User:admin"] || !a.SuperUsers["User:broker"] || len(a.SuperUsers) != 2 || !a.AllowIfNoACL {
		t.Fatalf("set: %+v", cfg.ACLs.Authorizer)
	}
	for _, bad := range [][]string{
		{"--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"},
		{"--set", "authorizer.class.name=com.example.Mine"},
		{"--set", "super.users=admin"},
		{"--set", "allow.everyone.if.no.acl.found=yes"},
	} {
		if _, _, err := loadConfig(bad, nil, nil, nil); !errors.Is(err, errConfig) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

func parseACLFlags(t *testing.T, args ...string) *aclFlags {
	t.Helper()
	fs := flag.NewFlagSet("acl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f aclFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &f
}

// TestACLFlags: strata acl's kafka-acls.sh flags make the bindings and
// filters they say.
func TestACLFlags(t *testing.T) {
	bs, err := parseACLFlags(t, "--allow-principal", "User:alice", "--operation", "read", "--operation", "DESCRIBE_CONFIGS",
		"--topic", "logs-", "--resource-pattern-type", "prefixed", "--deny-principal", "User:bob", "--deny-host", "10.0.0.1").bindings()
	if err != nil {
		t.Fatal(err)
	}
	want := []acl.Binding{
		{ResourceType: acl.Topic, ResourceName: "logs-", PatternType: acl.Prefixed, Principal: "User:alice", Host: "*", Operation: acl.Read, Permission: acl.Allow},
		{ResourceType: acl.Topic, ResourceName: "logs-", PatternType: acl.Prefixed, Principal: "User:alice", Host: "*", Operation: acl.DescribeConfigs, Permission: acl.Allow},
		{ResourceType: acl.Topic, ResourceName: "logs-", PatternType: acl.Prefixed, Principal: "User:bob", Host: "10.0.0.1", Operation: acl.Read, Permission: acl.Deny},
		{ResourceType: acl.Topic, ResourceName: "logs-", PatternType: acl.Prefixed, Principal: "User:bob", Host: "10.0.0.1", Operation: acl.DescribeConfigs, Permission: acl.Deny},
	}
	if len(bs) != len(want) {
		t.Fatalf("%d bindings: %v", len(bs), bs)
	}
	for i := range want {
		if bs[i] != want[i] {
			t.Errorf("binding %d: %v, want %v", i, bs[i], want[i])
		}
	}
	if bs, err := parseACLFlags(t, "--allow-principal", "User:ops", "--cluster").bindings(); err != nil || len(bs) != 1 ||
		bs[0].ResourceName != acl.ClusterName || bs[0].Operation != acl.All {
		t.Fatalf("--cluster: %v %v", bs, err)
	}
	for _, bad := range [][]string{
		{"--topic", "t"},                                                                    // no principal
		{"--allow-principal", "User:a"},                                                     // no resource
		{"--allow-principal", "alice", "--topic", "t"},                                      // not Type:name
		{"--allow-principal", "User:a", "--topic", "t", "--operation", "fly"},               // unknown operation
		{"--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"}, // not for add
	} {
		if _, err := parseACLFlags(t, bad...).bindings(); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
	fs, err := parseACLFlags(t, "--topic", "orders", "--resource-pattern-type", "match").filters(true)
	if err != nil || len(fs) != 1 || fs[0].PatternType != acl.Match || *fs[0].ResourceName != "orders" || fs[0].Operation != kmsg.ACLOperationAny {
		t.Fatalf("list filter: %+v %v", fs, err)
	}
	if fs, err := parseACLFlags(t).filters(true); err != nil || len(fs) != 1 || fs[0].ResourceType != kmsg.ACLResourceTypeAny || fs[0].PatternType != acl.AnyPat {
		t.Fatalf("list everything: %+v %v", fs, err)
	}
	if _, err := parseACLFlags(t).filters(false); err == nil {
		t.Fatal("remove without a resource accepted")
	}
	var out, errw bytes.Buffer
	if code := aclCommand([]string{"fly"}, nil, &out, &errw); code != exitConfig {
		t.Fatalf("unknown subcommand: exit %d", code)
	}
	if code := aclCommand([]string{"add", "--topic", "t"}, nil, &out, &errw); code != exitConfig {
		t.Fatalf("add without a principal: exit %d", code)
	}
}
