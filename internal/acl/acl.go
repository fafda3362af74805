// Package acl is Kafka's access-control model: bindings of a resource
// pattern (resource type, name, LITERAL or PREFIXED) to an entry
// (principal, host, operation, ALLOW or DENY), the filters of
// DescribeAcls and DeleteAcls (ANY and MATCH), and the authorization rule
// of Kafka's StandardAuthorizer:
//
//   - a super user (super.users) may do anything;
//   - the ACLs that apply to a resource are those whose pattern matches it:
//     LITERAL with its name or with "*", PREFIXED with a prefix of its name;
//   - among those naming the principal (or User:*) and the client's host
//     (or *), a DENY for the operation (or ALL) denies, whatever allows;
//   - else an ALLOW for the operation, for ALL, or for an operation that
//     implies it (READ, WRITE, DELETE and ALTER imply DESCRIBE;
//     ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
//   - else, when no ACL at all applies to the resource (for any principal),
//     allow.everyone.if.no.acl.found decides (default false); else denied.
//
// The codes are Kafka's (kmsg's enums), so bindings go to and from the
// wire unchanged.
package acl

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Resource types, pattern types, operations and permissions (Kafka's codes).
const (
	Topic           = kmsg.ACLResourceTypeTopic
	Group           = kmsg.ACLResourceTypeGroup
	Cluster         = kmsg.ACLResourceTypeCluster
	TransactionalID = kmsg.ACLResourceTypeTransactionalId
	DelegationToken = kmsg.ACLResourceTypeDelegationToken
	User            = kmsg.ACLResourceTypeUser

	Literal  = kmsg.ACLResourcePatternTypeLiteral
	Prefixed = kmsg.ACLResourcePatternTypePrefixed
	Match    = kmsg.ACLResourcePatternTypeMatch
	AnyPat   = kmsg.ACLResourcePatternTypeAny

	All             = kmsg.ACLOperationAll
	Read            = kmsg.ACLOperationRead
	Write           = kmsg.ACLOperationWrite
	Create          = kmsg.ACLOperationCreate
	Delete          = kmsg.ACLOperationDelete
	Alter           = kmsg.ACLOperationAlter
	Describe        = kmsg.ACLOperationDescribe
	ClusterAction   = kmsg.ACLOperationClusterAction
	DescribeConfigs = kmsg.ACLOperationDescribeConfigs
	AlterConfigs    = kmsg.ACLOperationAlterConfigs
	IdempotentWrite = kmsg.ACLOperationIdempotentWrite
	CreateTokens    = kmsg.ACLOperationCreateTokens
	DescribeTokens  = kmsg.ACLOperationDescribeTokens
	// TwoPhaseCommit is Kafka 4's TWO_PHASE_COMMIT (KIP-939), which kmsg
	// does not name.
	TwoPhaseCommit kmsg.ACLOperation = 15

	Allow = kmsg.ACLPermissionTypeAllow
	Deny  = kmsg.ACLPermissionTypeDeny
)

// ClusterName is the only name of the CLUSTER resource.
const ClusterName = "kafka-cluster"

// Wildcard is the LITERAL resource name, principal and host matching all.
const (
	Wildcard          = "*"
	WildcardPrincipal = "User:*"
)

// Binding is one ACL.
type Binding struct {
	ResourceType kmsg.ACLResourceType        `json:"rt"`
	ResourceName string                      `json:"name"`
	PatternType  kmsg.ACLResourcePatternType `json:"pt"`
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	Operation    kmsg.ACLOperation           `json:"op"`
	Permission   kmsg.ACLPermissionType      `json:"perm"`
}

func (b Binding) String() string {
	return fmt.Sprintf("(%s:%s:%s, %s from %s %s %s)", b.ResourceType, b.PatternType, b.ResourceName,
		b.Principal, b.Host, b.Permission, b.Operation)
}

// Limits on a binding's strings.
const (
	MaxNameLen = 1024
	MaxSetSize = 100000
)

// Validate checks a binding to create, as Kafka's CreateAcls does: a
// concrete resource type, pattern (LITERAL or PREFIXED), operation and
// permission; a non-empty resource name (kafka-cluster for CLUSTER); a
// principal of the form Type:name; a host.
func (b Binding) Validate() error {
	switch {
	case b.ResourceType < Topic || b.ResourceType > User:
		return fmt.Errorf("invalid resource type %s", b.ResourceType)
	case b.PatternType != Literal && b.PatternType != Prefixed:
		return fmt.Errorf("invalid pattern type %s: LITERAL or PREFIXED", b.PatternType)
	case b.Operation < All || b.Operation > TwoPhaseCommit:
		return fmt.Errorf("invalid operation %s", b.Operation)
	case b.Permission != Allow && b.Permission != Deny:
		return fmt.Errorf("invalid permission type %s", b.Permission)
	case b.ResourceName == "" || len(b.ResourceName) > MaxNameLen:
		return errors.New("resource name must not be empty")
	case b.ResourceType == Cluster && b.ResourceName != ClusterName:
		return fmt.Errorf("the CLUSTER resource is named %s", ClusterName)
	case b.PatternType == Prefixed && b.ResourceName == Wildcard:
		return errors.New("a PREFIXED pattern cannot be the wildcard *")
	case len(b.Principal) > MaxNameLen || len(b.Host) > MaxNameLen:
		return errors.New("principal or host too long")
	case b.Host == "":
		return errors.New("host must not be empty")
	}
	if t, n, ok := strings.Cut(b.Principal, ":"); !ok || t == "" || n == "" {
		return fmt.Errorf("invalid principal %q: expected Type:name (User:alice)", b.Principal)
	}
	return nil
}

// Filter selects bindings (DescribeAcls, DeleteAcls): ANY matches every
// value of a field, a nil string every string.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Validate checks a filter: no UNKNOWN field.
func (f Filter) Validate() error {
	if f.ResourceType == kmsg.ACLResourceTypeUnknown || f.PatternType == kmsg.ACLResourcePatternTypeUnknown ||
		f.Operation == kmsg.ACLOperationUnknown || f.Permission == kmsg.ACLPermissionTypeUnknown {
		return errors.New("filter has an UNKNOWN element")
	}
	if f.ResourceType > User || f.PatternType > Prefixed || f.Operation > TwoPhaseCommit || f.Permission > Allow {
		return errors.New("filter has an unknown element")
	}
	return nil
}

// Matches reports whether b passes the filter. The pattern follows
// Kafka: LITERAL or PREFIXED match that pattern type with the name
// exactly; ANY either pattern type with the name exactly; MATCH the
// bindings that would apply to a resource of that name (LITERAL with the
// name or *, PREFIXED with a prefix of it).
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != AnyPat && f.PatternType != Match && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		if f.PatternType == Match {
			if b.PatternType == Literal && b.ResourceName != name && b.ResourceName != Wildcard ||
				b.PatternType == Prefixed && !strings.HasPrefix(name, b.ResourceName) {
				return false
			}
		} else if name != b.ResourceName {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal || f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission
}

// resKey indexes bindings by resource pattern.
type resKey struct {
	rt   kmsg.ACLResourceType
	pt   kmsg.ACLResourcePatternType
	name string
}

// Set is an immutable set of bindings, indexed for authorization.
type Set struct {
	all   []Binding // sorted, distinct
	byRes map[resKey][]Binding
	// prefixed notes the resource types with PREFIXED bindings, whose
	// prefixes are looked up.
	prefixed map[kmsg.ACLResourceType]bool
}

// NewSet returns the set of bs (duplicates dropped).
func NewSet(bs []Binding) *Set {
	s := &Set{byRes: map[resKey][]Binding{}, prefixed: map[kmsg.ACLResourceType]bool{}}
	seen := make(map[Binding]bool, len(bs))
	for _, b := range bs {
		if seen[b] {
			continue
		}
		seen[b] = true
		s.all = append(s.all, b)
	}
	sort.Slice(s.all, func(i, j int) bool { return less(s.all[i], s.all[j]) })
	for _, b := range s.all {
		k := resKey{b.ResourceType, b.PatternType, b.ResourceName}
		s.byRes[k] = append(s.byRes[k], b)
		if b.PatternType == Prefixed {
			s.prefixed[b.ResourceType] = true
		}
	}
	return s
}

func less(a, b Binding) bool {
	if a.ResourceType != b.ResourceType {
		return a.ResourceType < b.ResourceType
	}
	if a.PatternType != b.PatternType {
		return a.PatternType < b.PatternType
	}
	if a.ResourceName != b.ResourceName {
		return a.ResourceName < b.ResourceName
	}
	if a.Principal != b.Principal {
		return a.Principal < b.Principal
	}
	if a.Host != b.Host {
		return a.Host < b.Host
	}
	if a.Operation != b.Operation {
		return a.Operation < b.Operation
	}
	return a.Permission < b.Permission
}

// Len is the number of bindings.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.all)
}

// All returns the bindings, sorted (the caller must not change them).
func (s *Set) All() []Binding {
	if s == nil {
		return nil
	}
	return s.all
}

// Has reports whether b is in the set.
func (s *Set) Has(b Binding) bool {
	if s == nil {
		return false
	}
	for _, x := range s.byRes[resKey{b.ResourceType, b.PatternType, b.ResourceName}] {
		if x == b {
			return true
		}
	}
	return false
}

// Select returns the bindings matching f, sorted.
func (s *Set) Select(f Filter) []Binding {
	var out []Binding
	for _, b := range s.All() {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// With returns the set plus add, minus remove.
func (s *Set) With(add, remove []Binding) *Set {
	gone := make(map[Binding]bool, len(remove))
	for _, b := range remove {
		gone[b] = true
	}
	var bs []Binding
	for _, b := range s.All() {
		if !gone[b] {
			bs = append(bs, b)
		}
	}
	return NewSet(append(bs, add...))
}

// applying calls f with each binding that applies to the resource (rt,
// name) until f returns false.
func (s *Set) applying(rt kmsg.ACLResourceType, name string, f func(Binding) bool) {
	if s == nil {
		return
	}
	for _, b := range s.byRes[resKey{rt, Literal, name}] {
		if !f(b) {
			return
		}
	}
	if name != Wildcard {
		for _, b := range s.byRes[resKey{rt, Literal, Wildcard}] {
			if !f(b) {
				return
			}
		}
	}
	if !s.prefixed[rt] {
		return
	}
	for i := 1; i <= len(name); i++ {
		for _, b := range s.byRes[resKey{rt, Prefixed, name[:i]}] {
			if !f(b) {
				return
			}
		}
	}
}

// Implies reports whether an ALLOW for granted allows op.
func Implies(granted, op kmsg.ACLOperation) bool {
	if granted == op || granted == All {
		return true
	}
	switch op {
	case Describe:
		return granted == Read || granted == Write || granted == Delete || granted == Alter
	case DescribeConfigs:
		return granted == AlterConfigs
	}
	return false
}

// Request is who asks: the principal ("User:alice") and the client's
// address ("127.0.0.1").
type Request struct {
	Principal string
	Host      string
}

func (r Request) matches(b Binding) bool {
	return (b.Principal == r.Principal || b.Principal == WildcardPrincipal) && (b.Host == r.Host || b.Host == Wildcard)
}

// Authorizer decides with a set of bindings.
type Authorizer struct {
	// SuperUsers are principals allowed everything (super.users).
	SuperUsers map[string]bool
	// AllowIfNoACL allows a resource no ACL applies to
	// (allow.everyone.if.no.acl.found).
	AllowIfNoACL bool
}

// Authorize reports whether r may perform op on the resource (rt, name).
func (a *Authorizer) Authorize(s *Set, r Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if a.SuperUsers[r.Principal] {
		return true
	}
	found, denied, allowed := false, false, false
	s.applying(rt, name, func(b Binding) bool {
		found = true
		if !r.matches(b) {
			return true
		}
		if b.Permission == Deny && (b.Operation == op || b.Operation == All) {
			denied = true
			return false
		}
		if b.Permission == Allow && Implies(b.Operation, op) {
			allowed = true
		}
		return true
	})
	switch {
	case denied:
		return false
	case allowed:
		return true
	}
	return !found && a.AllowIfNoACL
}

// AuthorizeAny reports whether r may perform op on at least one resource
// of type rt (Kafka's authorizeByResourceType, as InitProducerId uses for
// WRITE on any topic): an ALLOW naming r for some pattern that no DENY
// naming r covers (a LITERAL DENY of the same name, or a PREFIXED DENY of
// a prefix of it; a LITERAL * DENY covers all).
func (a *Authorizer) AuthorizeAny(s *Set, r Request, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if a.SuperUsers[r.Principal] {
		return true
	}
	var denies, allows []Binding
	any := false
	for _, b := range s.All() {
		if b.ResourceType != rt {
			continue
		}
		any = true
		if !r.matches(b) {
			continue
		}
		if b.Permission == Deny && (b.Operation == op || b.Operation == All) {
			denies = append(denies, b)
		} else if b.Permission == Allow && Implies(b.Operation, op) {
			allows = append(allows, b)
		}
	}
	if !any {
		return a.AllowIfNoACL
	}
	covered := func(al Binding) bool {
		for _, d := range denies {
			switch {
			case d.PatternType == Literal && d.ResourceName == Wildcard:
				return true
			case d.PatternType == Literal && al.PatternType == Literal && d.ResourceName == al.ResourceName:
				return true
			case d.PatternType == Prefixed && strings.HasPrefix(al.ResourceName, d.ResourceName):
				return true
			}
		}
		return false
	}
	for _, al := range allows {
		if !covered(al) {
			return true
		}
	}
	return false
}

// Operations lists the operations r may perform on the resource among
// ops (the authorized-operations fields).
func (a *Authorizer) Operations(s *Set, r Request, rt kmsg.ACLResourceType, name string, ops []kmsg.ACLOperation) []kmsg.ACLOperation {
	var out []kmsg.ACLOperation
	for _, op := range ops {
		if a.Authorize(s, r, op, rt, name) {
			out = append(out, op)
		}
	}
	return out
}

// OperationsFor are the operations that apply to each resource type, as
// the authorized-operations fields list them.
var OperationsFor = map[kmsg.ACLResourceType][]kmsg.ACLOperation{
	Topic:           {Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs},
	Group:           {Read, Delete, Describe, DescribeConfigs, AlterConfigs},
	Cluster:         {Create, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens},
	TransactionalID: {Write, Describe, TwoPhaseCommit},
	DelegationToken: {Describe},
	User:            {CreateTokens, DescribeTokens},
}

// Bitfield encodes ops as Kafka's authorized-operations int32 (bit n set
// for operation code n).
func Bitfield(ops []kmsg.ACLOperation) int32 {
	var v int32
	for _, op := range ops {
		v |= 1 << uint(op)
	}
	return v
}

// OpName is op's Kafka name (kmsg's, plus TWO_PHASE_COMMIT).
func OpName(op kmsg.ACLOperation) string {
	if op == TwoPhaseCommit {
		return "TWO_PHASE_COMMIT"
	}
	return op.String()
}

// ParseOp parses an operation name as Kafka's tools write it (Read,
// DESCRIBE_CONFIGS, DescribeConfigs, TwoPhaseCommit).
func ParseOp(s string) (kmsg.ACLOperation, error) {
	n := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	if n == "twophasecommit" {
		return TwoPhaseCommit, nil
	}
	op, err := kmsg.ParseACLOperation(n)
	if err != nil {
		return 0, fmt.Errorf("unknown operation %q", s)
	}
	return op, nil
}
