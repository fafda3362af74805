package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// strata acl: ACLs (CreateAcls, DescribeAcls, DeleteAcls) with
// kafka-acls.sh's flags.

const aclUsage = `Usage: strata acl add|list|remove [flags]

ACLs (Kafka's model; the broker needs authorizer.class.name=` + StandardAuthorizerClass + `).
The flags are kafka-acls.sh's:

  strata acl add --allow-principal User:alice --operation Read --operation Describe --topic orders
  strata acl add --allow-principal User:alice --operation Read --group orders-app
  strata acl add --deny-principal User:bob --deny-host 10.0.0.7 --operation Write --topic orders
  strata acl add --allow-principal User:etl --operation All --topic logs- --resource-pattern-type prefixed
  strata acl add --allow-principal User:admin --operation Alter --cluster
  strata acl list [--topic orders] [--principal User:alice] [--resource-pattern-type match]
  strata acl remove --allow-principal User:alice --operation Read --topic orders

Resources: --topic, --group, --transactional-id, --delegation-token, --user (each
repeatable; * is every one), --cluster. --resource-pattern-type: literal (default),
prefixed; list and remove also any (the default of list) and match (what applies to
the named resource). Operations: All, Read, Write, Create, Delete, Alter, Describe,
ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens,
DescribeTokens, TwoPhaseCommit. --allow-host/--deny-host default to * (every host).
remove without --operation or principals removes every ACL of the resources.

Flags:
`

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type aclFlags struct {
	topics, groups, txnIDs, tokens, users stringList
	cluster                               bool
	pattern                               string
	allowPrincipals, denyPrincipals       stringList
	allowHosts, denyHosts                 stringList
	operations                            stringList
	principal                             string
	force                                 bool
}

func (f *aclFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.topics, "topic", "a topic (repeatable; * for all)")
	fs.Var(&f.groups, "group", "a consumer or share group (repeatable)")
	fs.Var(&f.txnIDs, "transactional-id", "a transactional ID (repeatable)")
	fs.Var(&f.tokens, "delegation-token", "a delegation token ID (repeatable)")
	fs.Var(&f.users, "user", "a user, as a resource (repeatable)")
	fs.BoolVar(&f.cluster, "cluster", false, "the cluster")
	fs.StringVar(&f.pattern, "resource-pattern-type", "", "literal, prefixed; list/remove also any, match")
	fs.Var(&f.allowPrincipals, "allow-principal", "principal to allow, User:name or User:* (repeatable)")
	fs.Var(&f.denyPrincipals, "deny-principal", "principal to deny (repeatable)")
	fs.Var(&f.allowHosts, "allow-host", "host (IP) the allow applies from; default *")
	fs.Var(&f.denyHosts, "deny-host", "host (IP) the deny applies from; default *")
	fs.Var(&f.operations, "operation", "operation (repeatable); default All")
	fs.StringVar(&f.principal, "principal", "", "list: only ACLs of this principal")
	fs.BoolVar(&f.force, "force", false, "accepted for kafka-acls.sh compatibility (no prompt is asked)")
}

type aclResource struct {
	rt   kmsg.ACLResourceType
	name string
}

func (f *aclFlags) resources() []aclResource {
	var out []aclResource
	for _, l := range []struct {
		rt    kmsg.ACLResourceType
		names []string
	}{{acl.Topic, f.topics}, {acl.Group, f.groups}, {acl.TransactionalID, f.txnIDs}, {acl.DelegationToken, f.tokens}, {acl.User, f.users}} {
		for _, n := range l.names {
			out = append(out, aclResource{l.rt, n})
		}
	}
	if f.cluster {
		out = append(out, aclResource{acl.Cluster, acl.ClusterName})
	}
	return out
}

func (f *aclFlags) patternType(def kmsg.ACLResourcePatternType, filter bool) (kmsg.ACLResourcePatternType, error) {
	if f.pattern == "" {
		return def, nil
	}
	pt, err := kmsg.ParseACLResourcePatternType(f.pattern)
	if err != nil || pt == kmsg.ACLResourcePatternTypeUnknown || !filter && pt != acl.Literal && pt != acl.Prefixed {
		if filter {
			return 0, fmt.Errorf("--resource-pattern-type %q: expected literal, prefixed, any or match", f.pattern)
		}
		return 0, fmt.Errorf("--resource-pattern-type %q: expected literal or prefixed", f.pattern)
	}
	return pt, nil
}

func (f *aclFlags) ops(def kmsg.ACLOperation) ([]kmsg.ACLOperation, error) {
	if len(f.operations) == 0 {
		return []kmsg.ACLOperation{def}, nil
	}
	var out []kmsg.ACLOperation
	for _, s := range f.operations {
		op, err := acl.ParseOp(s)
		if err != nil || op == kmsg.ACLOperationAny {
			return nil, fmt.Errorf("--operation %q: unknown operation", s)
		}
		out = append(out, op)
	}
	return out, nil
}

// entries are the (principal, host, permission) triples of the flags.
type aclEntry struct {
	principal, host string
	perm            kmsg.ACLPermissionType
}

func (f *aclFlags) entries() []aclEntry {
	var out []aclEntry
	hosts := func(h []string) []string {
		if len(h) == 0 {
			return []string{acl.Wildcard}
		}
		return h
	}
	for _, p := range f.allowPrincipals {
		for _, h := range hosts(f.allowHosts) {
			out = append(out, aclEntry{p, h, acl.Allow})
		}
	}
	for _, p := range f.denyPrincipals {
		for _, h := range hosts(f.denyHosts) {
			out = append(out, aclEntry{p, h, acl.Deny})
		}
	}
	return out
}

func aclCommand(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, aclUsage)
		return exitOK
	}
	sub := args[0]
	fs := flag.NewFlagSet("acl "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, aclUsage); fs.PrintDefaults() }
	var a adminFlags
	a.register(fs, environ)
	var f aclFlags
	f.register(fs)
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return parseExit(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "strata acl %s: unexpected arguments %q\n", sub, pos)
		return exitConfig
	}
	var run func(ctx context.Context, cl *kgo.Client) error
	switch sub {
	case "add":
		bindings, err := f.bindings()
		if err != nil {
			fmt.Fprintln(stderr, "strata acl add:", err)
			return exitConfig
		}
		run = func(ctx context.Context, cl *kgo.Client) error { return aclAdd(ctx, cl, bindings, stdout) }
	case "list":
		filters, err := f.filters(true)
		if err != nil {
			fmt.Fprintln(stderr, "strata acl list:", err)
			return exitConfig
		}
		run = func(ctx context.Context, cl *kgo.Client) error { return aclList(ctx, cl, filters, stdout) }
	case "remove":
		filters, err := f.filters(false)
		if err != nil {
			fmt.Fprintln(stderr, "strata acl remove:", err)
			return exitConfig
		}
		run = func(ctx context.Context, cl *kgo.Client) error { return aclRemove(ctx, cl, filters, stdout) }
	default:
		fmt.Fprintf(stderr, "strata acl: unknown subcommand %q\n\n%s", sub, aclUsage)
		return exitConfig
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(a.bootstrap, ",")...), kgo.RetryTimeout(a.timeout))
	if err != nil {
		fmt.Fprintln(stderr, "strata acl:", err)
		return exitError
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	if err := run(ctx, cl); err != nil {
		fmt.Fprintf(stderr, "strata acl %s: %v\n", sub, err)
		return exitError
	}
	return exitOK
}

// bindings are the ACLs add creates: every resource x entry x operation.
func (f *aclFlags) bindings() ([]acl.Binding, error) {
	res := f.resources()
	if len(res) == 0 {
		return nil, errors.New("name a resource: --topic, --group, --transactional-id, --delegation-token, --user or --cluster")
	}
	ents := f.entries()
	if len(ents) == 0 {
		return nil, errors.New("name a principal: --allow-principal or --deny-principal")
	}
	pt, err := f.patternType(acl.Literal, false)
	if err != nil {
		return nil, err
	}
	ops, err := f.ops(acl.All)
	if err != nil {
		return nil, err
	}
	var out []acl.Binding
	for _, r := range res {
		for _, e := range ents {
			for _, op := range ops {
				b := acl.Binding{ResourceType: r.rt, ResourceName: r.name, PatternType: pt,
					Principal: e.principal, Host: e.host, Operation: op, Permission: e.perm}
				if err := b.Validate(); err != nil {
					return nil, err
				}
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// filters are list's (forList) or remove's filters: per resource (every
// resource when none is named, list only), per entry (any principal and
// host when none is named), per operation (ANY when none is named).
func (f *aclFlags) filters(forList bool) ([]acl.Filter, error) {
	res := f.resources()
	if len(res) == 0 && !forList {
		return nil, errors.New("name a resource: --topic, --group, --transactional-id, --delegation-token, --user or --cluster")
	}
	def := acl.Literal
	if forList {
		def = acl.AnyPat
	}
	pt, err := f.patternType(def, true)
	if err != nil {
		return nil, err
	}
	var ops []kmsg.ACLOperation
	if forList {
		ops = []kmsg.ACLOperation{kmsg.ACLOperationAny}
	} else if ops, err = f.ops(kmsg.ACLOperationAny); err != nil {
		return nil, err
	}
	type ent struct {
		principal, host *string
		perm            kmsg.ACLPermissionType
	}
	var ents []ent
	for _, e := range f.entries() {
		e := e
		ents = append(ents, ent{&e.principal, &e.host, e.perm})
	}
	if forList && f.principal != "" {
		p := f.principal
		ents = []ent{{&p, nil, kmsg.ACLPermissionTypeAny}}
	}
	if len(ents) == 0 {
		ents = []ent{{nil, nil, kmsg.ACLPermissionTypeAny}}
	}
	if len(res) == 0 {
		res = []aclResource{{rt: kmsg.ACLResourceTypeAny}}
	}
	var out []acl.Filter
	for _, r := range res {
		for _, e := range ents {
			for _, op := range ops {
				fl := acl.Filter{ResourceType: r.rt, PatternType: pt, Principal: e.principal, Host: e.host, Operation: op, Permission: e.perm}
				if r.rt != kmsg.ACLResourceTypeAny {
					name := r.name
					fl.ResourceName = &name
				}
				out = append(out, fl)
			}
		}
	}
	return out, nil
}

func formatBinding(b acl.Binding) string {
	return fmt.Sprintf("%s:%s:%s\t%s\t%s\t%s\t%s", b.ResourceType, b.PatternType, b.ResourceName,
		b.Principal, b.Host, b.Permission, acl.OpName(b.Operation))
}

func aclErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	if msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

func aclAdd(ctx context.Context, cl *kgo.Client, bs []acl.Binding, stdout io.Writer) error {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bs {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
		c.Principal, c.Host, c.Operation, c.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	var failed []error
	for i, r := range resp.Results {
		if i >= len(bs) {
			break
		}
		if err := aclErr(r.ErrorCode, r.ErrorMessage); err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", formatBinding(bs[i]), err))
			continue
		}
		fmt.Fprintln(stdout, "added", formatBinding(bs[i]))
	}
	if len(resp.Results) != len(bs) {
		failed = append(failed, fmt.Errorf("%d answers for %d ACLs", len(resp.Results), len(bs)))
	}
	return errors.Join(failed...)
}

func toFilter(f acl.Filter) (rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) {
	return f.ResourceType, f.ResourceName, f.PatternType, f.Principal, f.Host, f.Operation, f.Permission
}

func aclList(ctx context.Context, cl *kgo.Client, fs []acl.Filter, stdout io.Writer) error {
	seen := map[acl.Binding]bool{}
	var all []acl.Binding
	for _, f := range fs {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType = toFilter(f)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := aclErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
			return err
		}
		for _, r := range resp.Resources {
			for _, a := range r.ACLs {
				b := acl.Binding{ResourceType: r.ResourceType, ResourceName: r.ResourceName, PatternType: r.ResourcePatternType,
					Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.PermissionType}
				if !seen[b] {
					seen[b] = true
					all = append(all, b)
				}
			}
		}
	}
	fmt.Fprintln(stdout, "RESOURCE\tPRINCIPAL\tHOST\tPERMISSION\tOPERATION")
	for _, b := range acl.NewSet(all).All() {
		fmt.Fprintln(stdout, formatBinding(b))
	}
	return nil
}

func aclRemove(ctx context.Context, cl *kgo.Client, fs []acl.Filter, stdout io.Writer) error {
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, f := range fs {
		df := kmsg.NewDeleteACLsRequestFilter()
		df.ResourceType, df.ResourceName, df.ResourcePatternType, df.Principal, df.Host, df.Operation, df.PermissionType = toFilter(f)
		req.Filters = append(req.Filters, df)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	var failed []error
	n := 0
	for _, r := range resp.Results {
		if err := aclErr(r.ErrorCode, r.ErrorMessage); err != nil {
			failed = append(failed, err)
			continue
		}
		for _, m := range r.MatchingACLs {
			if err := aclErr(m.ErrorCode, m.ErrorMessage); err != nil {
				failed = append(failed, err)
				continue
			}
			n++
			fmt.Fprintln(stdout, "removed", formatBinding(acl.Binding{ResourceType: m.ResourceType, ResourceName: m.ResourceName,
				PatternType: m.ResourcePatternType, Principal: m.Principal, Host: m.Host, Operation: m.Operation, Permission: m.PermissionType}))
		}
	}
	if n == 0 && len(failed) == 0 {
		fmt.Fprintln(stdout, "no ACL matched")
	}
	return errors.Join(failed...)
}
