package quota

import (
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
	"strings"
)

// Entity types, as Kafka names them (ClientQuotaEntity).
const (
	TypeUser     = "user"
	TypeClientID = "client-id"
	TypeIP       = "ip"
)

// Config keys (Kafka's QuotaConfigs).
const (
	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ControllerMutationRate = "controller_mutation_rate"
	ConnectionCreationRate = "connection_creation_rate"
)

// Errors of validation; the protocol answers them INVALID_REQUEST, as
// Kafka's ClientQuotaControlManager and ClientQuotasImage do, except
// ErrUnsupportedType (UNSUPPORTED_VERSION in a DescribeClientQuotas
// filter, INVALID_REQUEST in an alteration).
var (
	ErrInvalid         = errors.New("quota: invalid")
	ErrUnsupportedType = errors.New("quota: unsupported entity type")
)

// Limits on what a Set holds (it is replicated and kept in memory by
// every broker).
const (
	MaxEntities = 100000
	MaxNameLen  = 1024
)

// Part is one component of an entity: absent (Set false), the default
// (Default), or a name.
type Part struct {
	Set     bool   `json:"set,omitempty"`
	Default bool   `json:"default,omitempty"`
	Name    string `json:"name,omitempty"`
}

// Named is a Part naming name; Default the default part.
func Named(name string) Part { return Part{Set: true, Name: name} }

// DefaultPart is the <default> component.
var DefaultPart = Part{Set: true, Default: true}

// NamePtr is the part's name as the wire carries it: nil for the default.
func (p Part) NamePtr() *string {
	if p.Default {
		return nil
	}
	n := p.Name
	return &n
}

func (p Part) String() string {
	if p.Default {
		return "<default>"
	}
	return p.Name
}

// Entity is a quota entity. Comparable: it keys maps. Field names are on
// disk (metadata log and snapshots).
type Entity struct {
	User     Part `json:"user,omitempty"`
	ClientID Part `json:"clientId,omitempty"`
	IP       Part `json:"ip,omitempty"`
}

func (e Entity) String() string {
	var parts []string
	if e.User.Set {
		parts = append(parts, "user="+e.User.String())
	}
	if e.ClientID.Set {
		parts = append(parts, "client-id="+e.ClientID.String())
	}
	if e.IP.Set {
		parts = append(parts, "ip="+e.IP.String())
	}
	return strings.Join(parts, ",")
}

// Components lists the entity's (type, name) pairs in a fixed order; name
// nil is the default.
func (e Entity) Components() [][2]*string {
	var out [][2]*string
	add := func(t string, p Part) {
		if p.Set {
			tt := t
			out = append(out, [2]*string{&tt, p.NamePtr()})
		}
	}
	add(TypeUser, e.User)
	add(TypeClientID, e.ClientID)
	add(TypeIP, e.IP)
	return out
}

// size is the number of components.
func (e Entity) size() int {
	n := 0
	for _, p := range []Part{e.User, e.ClientID, e.IP} {
		if p.Set {
			n++
		}
	}
	return n
}

// NewEntity builds an entity from (type, name) pairs as AlterClientQuotas
// carries them, with Kafka's checks: not empty, no type twice, known
// types, no empty name, and a combination Kafka allows (user, client-id,
// user and client-id, or ip alone; an IP must parse).
func NewEntity(types []string, names []*string) (Entity, error) {
	var e Entity
	if len(types) == 0 {
		return e, fmt.Errorf("%w: Invalid empty client quota entity", ErrInvalid)
	}
	for i, t := range types {
		var p *Part
		switch t {
		case TypeUser:
			p = &e.User
		case TypeClientID:
			p = &e.ClientID
		case TypeIP:
			p = &e.IP
		default:
			return e, fmt.Errorf("%w: Unhandled client quota entity type: %s", ErrInvalid, t)
		}
		if p.Set {
			return e, fmt.Errorf("%w: Invalid empty client quota entity, duplicate entity entry %s", ErrInvalid, t)
		}
		if names[i] == nil {
			*p = DefaultPart
			continue
		}
		if *names[i] == "" {
			return e, fmt.Errorf("%w: Empty %s not supported", ErrInvalid, t)
		}
		if len(*names[i]) > MaxNameLen {
			return e, fmt.Errorf("%w: %s name longer than %d bytes", ErrInvalid, t, MaxNameLen)
		}
		*p = Named(*names[i])
	}
	if err := e.Check(); err != nil {
		return e, err
	}
	return e, nil
}

// Check checks the entity's combination of types.
func (e Entity) Check() error {
	switch {
	case e.IP.Set && (e.User.Set || e.ClientID.Set), !e.IP.Set && !e.User.Set && !e.ClientID.Set:
		return fmt.Errorf("%w: Invalid quota entity combination", ErrInvalid)
	case e.IP.Set && !e.IP.Default && net.ParseIP(e.IP.Name) == nil:
		return fmt.Errorf("%w: %s is not a valid IP or resolvable host.", ErrInvalid, e.IP.Name)
	}
	for _, p := range []Part{e.User, e.ClientID, e.IP} {
		if p.Set && !p.Default && (p.Name == "" || len(p.Name) > MaxNameLen) {
			return fmt.Errorf("%w: bad name of %d bytes", ErrInvalid, len(p.Name))
		}
	}
	return nil
}

// keyKind is a config's type in Kafka's QuotaConfigs.
type keyKind int

const (
	kindLong keyKind = iota
	kindDouble
	kindInt
)

// CheckValue checks that key may be set to v on e (Kafka's
// validateQuotaKeyValue): a key of e's kind of entity, an integral value
// for the LONG and INT configs. Negative, infinite and NaN values are
// refused too (Kafka stores them; no rate can be measured against them).
func CheckValue(e Entity, key string, v float64) error {
	var kind keyKind
	switch key {
	case ProducerByteRate, ConsumerByteRate:
		kind = kindLong
	case RequestPercentage, ControllerMutationRate:
		kind = kindDouble
	case ConnectionCreationRate:
		kind = kindInt
	default:
		return fmt.Errorf("%w: Invalid configuration key %s", ErrInvalid, key)
	}
	if (kind == kindInt) != e.IP.Set {
		return fmt.Errorf("%w: Invalid configuration key %s", ErrInvalid, key)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("%w: Invalid value %v for %s", ErrInvalid, v, key)
	}
	switch kind {
	case kindLong:
		const eps = 1e-6
		if v > math.MaxInt64 || math.Abs(math.Trunc(v+eps)-v) > eps {
			return fmt.Errorf("%w: Configuration %s must be a Long value", ErrInvalid, key)
		}
	case kindInt:
		if v > math.MaxInt32 || v != math.Trunc(v) {
			return fmt.Errorf("%w: Configuration %s must be an Int value", ErrInvalid, key)
		}
	}
	return nil
}

// Change is one entity's alteration: values set, keys removed.
type Change struct {
	Entity Entity             `json:"entity"`
	Set    map[string]float64 `json:"set,omitempty"`
	Remove []string           `json:"remove,omitempty"`
}

// Set is every entity's quota configs. Immutable once built; the zero
// value and nil are empty.
type Set struct {
	m map[Entity]map[string]float64
	// has counts the entities that set each key, so a quota type nobody
	// configured costs nothing on the request path.
	has map[string]int
}

// Len is the number of entities with configs.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.m)
}

// Has reports whether any entity sets key.
func (s *Set) Has(key string) bool { return s != nil && s.has[key] > 0 }

// Get returns e's configs (do not modify).
func (s *Set) Get(e Entity) map[string]float64 {
	if s == nil {
		return nil
	}
	return s.m[e]
}

// With returns a new set with changes applied, checking each (entity and
// values); a removed key that is not set is no error.
func (s *Set) With(changes []Change) (*Set, error) {
	n := &Set{m: map[Entity]map[string]float64{}, has: map[string]int{}}
	if s != nil {
		for e, c := range s.m {
			n.m[e] = c
		}
	}
	for _, ch := range changes {
		if err := ch.Entity.Check(); err != nil {
			return nil, fmt.Errorf("%s: %w", ch.Entity, err)
		}
		c := make(map[string]float64, len(n.m[ch.Entity])+len(ch.Set))
		for k, v := range n.m[ch.Entity] {
			c[k] = v
		}
		for _, k := range ch.Remove {
			delete(c, k)
		}
		for k, v := range ch.Set {
			if err := CheckValue(ch.Entity, k, v); err != nil {
				return nil, fmt.Errorf("%s: %w", ch.Entity, err)
			}
			c[k] = v
		}
		if len(c) == 0 {
			delete(n.m, ch.Entity)
		} else {
			n.m[ch.Entity] = c
		}
	}
	if len(n.m) > MaxEntities {
		return nil, fmt.Errorf("%w: more than %d quota entities", ErrInvalid, MaxEntities)
	}
	for _, c := range n.m {
		for k := range c {
			n.has[k]++
		}
	}
	return n, nil
}

// All lists the set as changes that rebuild it, sorted by entity.
func (s *Set) All() []Change {
	if s == nil {
		return nil
	}
	out := make([]Change, 0, len(s.m))
	for e, c := range s.m {
		out = append(out, Change{Entity: e, Set: c})
	}
	sort.Slice(out, func(i, j int) bool { return entityLess(out[i].Entity, out[j].Entity) })
	return out
}

func partLess(a, b Part) (less, equal bool) {
	if a != b {
		switch {
		case a.Set != b.Set:
			return !a.Set, false
		case a.Default != b.Default:
			return a.Default, false
		default:
			return a.Name < b.Name, false
		}
	}
	return false, true
}

func entityLess(a, b Entity) bool {
	for _, p := range [][2]Part{{a.User, b.User}, {a.ClientID, b.ClientID}, {a.IP, b.IP}} {
		if less, eq := partLess(p[0], p[1]); !eq {
			return less
		}
	}
	return false
}

// Filter component match types (DescribeClientQuotas).
const (
	MatchExact     = 0
	MatchDefault   = 1
	MatchSpecified = 2
)

// FilterComponent is one DescribeClientQuotas filter component.
type FilterComponent struct {
	Type  string
	Match int8
	Name  *string
}

// Describe returns the entities that match the filter and their configs,
// sorted, with Kafka's checks of the filter (ClientQuotasImage.describe):
// ErrInvalid for a bad filter, ErrUnsupportedType for an unknown type.
func (s *Set) Describe(filter []FilterComponent, strict bool) ([]Change, error) {
	type want struct {
		set  bool
		part *Part // nil: any specified name
	}
	var w [3]want // user, client-id, ip
	for _, c := range filter {
		var i int
		switch c.Type {
		case "":
			return nil, fmt.Errorf("%w: Invalid empty entity type.", ErrInvalid)
		case TypeUser:
			i = 0
		case TypeClientID:
			i = 1
		case TypeIP:
			i = 2
		default:
			return nil, fmt.Errorf("%w: Unsupported entity type %s", ErrUnsupportedType, c.Type)
		}
		if w[i].set {
			return nil, fmt.Errorf("%w: Entity type %s cannot appear more than once in the filter.", ErrInvalid, c.Type)
		}
		switch c.Match {
		case MatchExact:
			if c.Name == nil {
				return nil, fmt.Errorf("%w: Request specified MATCH_TYPE_EXACT, but set match string to null.", ErrInvalid)
			}
			p := Named(*c.Name)
			w[i] = want{set: true, part: &p}
		case MatchDefault:
			if c.Name != nil {
				return nil, fmt.Errorf("%w: Request specified MATCH_TYPE_DEFAULT, but also specified a match string.", ErrInvalid)
			}
			p := DefaultPart
			w[i] = want{set: true, part: &p}
		case MatchSpecified:
			if c.Name != nil {
				return nil, fmt.Errorf("%w: Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.", ErrInvalid)
			}
			w[i] = want{set: true}
		default:
			return nil, fmt.Errorf("%w: Unknown match type %d", ErrInvalid, c.Match)
		}
	}
	if w[2].set && (w[0].set || w[1].set) {
		return nil, fmt.Errorf("%w: Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.", ErrInvalid)
	}
	if len(filter) == 0 && strict {
		return nil, nil
	}
	var out []Change
	if s == nil {
		return out, nil
	}
	for e, c := range s.m {
		ok := true
		for i, p := range []Part{e.User, e.ClientID, e.IP} {
			if !w[i].set {
				continue
			}
			// A specified-name match takes a named or a default
			// component alike (Kafka indexes both under the type).
			if !p.Set || w[i].part != nil && *w[i].part != p {
				ok = false
			}
		}
		if ok && strict && e.size() != len(filter) {
			ok = false
		}
		if ok {
			out = append(out, Change{Entity: e, Set: c})
		}
	}
	sort.Slice(out, func(i, j int) bool { return entityLess(out[i].Entity, out[j].Entity) })
	return out, nil
}
