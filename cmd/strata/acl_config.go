package main

import (
	"fmt"
	"strings"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/protocol"
)

// ACLs (protocol/authorizer.go): off unless authorizer.class.name names
// Kafka's KRaft authorizer, whose rules Strata implements
// (internal/acl); the bindings are replicated metadata (CreateAcls).

// StandardAuthorizerClass is Kafka's KRaft authorizer, the switch that
// turns ACLs on.
const StandardAuthorizerClass = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

var aclSettings = []setting{
	{"authorizer.class.name", "", "Turns ACLs on: " + StandardAuthorizerClass + " (Kafka's KRaft authorizer, whose rules Strata implements). Empty: no authorization, every request is allowed and the ACL APIs answer SECURITY_DISABLED."},
	{"super.users", "", "Principals allowed everything whatever the ACLs say, separated by ';' (User:admin;User:broker). Only with authorizer.class.name."},
	{"allow.everyone.if.no.acl.found", "false", "With ACLs on, allow a request on a resource no ACL applies to (Kafka's default false: such a resource is for super users only)."},
}

// aclConfig is the parsed authorizer settings (nil Authorizer: off).
type aclConfig struct {
	Authorizer *acl.Authorizer
}

func (a aclConfig) apply(pc *protocol.Config) { pc.Authorizer = a.Authorizer }

func parseACLSettings(merged map[string]rawValue, cfg *Config) error {
	bad := func(name, why string) error { return badSetting(merged, name, why) }
	class := strings.TrimSpace(merged["authorizer.class.name"].value)
	allow := strings.TrimSpace(merged["allow.everyone.if.no.acl.found"].value)
	if allow != "true" && allow != "false" {
		return bad("allow.everyone.if.no.acl.found", "expected true or false")
	}
	supers := map[string]bool{}
	for _, p := range strings.Split(merged["super.users"].value, ";") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if t, n, ok := strings.Cut(p, ":"); !ok || t == "" || n == "" {
			return bad("super.users", fmt.Sprintf("%q is not a principal Type:name (User:admin)", p))
		}
		supers[p] = true
	}
	switch class {
	case "":
		cfg.ACLs = aclConfig{}
		return nil
	case StandardAuthorizerClass:
	case "kafka.security.authorizer.AclAuthorizer":
		return bad("authorizer.class.name", "AclAuthorizer is ZooKeeper's (removed in Kafka 4.0); use "+StandardAuthorizerClass)
	default:
		return bad("authorizer.class.name", "only "+StandardAuthorizerClass+" is supported")
	}
	cfg.ACLs = aclConfig{Authorizer: &acl.Authorizer{SuperUsers: supers, AllowIfNoACL: allow == "true"}}
	return nil
}
