package protocol

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The registry: one registration per Kafka API, made by the init function
// of the file that handles it (NN_name.go, NN the API key), carrying the
// versions served, the handler, how the request runs beside the others on
// its connection and its ACL rule (acl_rules.go). Dispatch (handle), the
// barrier rule (isBarrier), authorization (authz.enforce), the ApiVersions
// answer and the API list in doc.go all come from it.

// order says how a request runs beside the others on its connection
// (doc.go, "Connections").
type order bool

const (
	// concurrent requests (reads) run beside each other and beside a
	// later barrier.
	concurrent order = false
	// barrier requests (they change state) run alone, in request order:
	// each starts once every earlier barrier has finished.
	barrier order = true
)

// apiEntry is one registered API.
type apiEntry struct {
	min, max int16
	ok       bool
	barrier  bool
	handle   func(s *Server, ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	// authorize is the API's ACL rule (aclRule), run before handle when
	// ACLs are on.
	authorize aclRule[kmsg.Request]
	open      bool   // the rule is anyone: no authorization at all
	file      string // the file that registered it
}

// apis is the registry, indexed by key. Written only by init functions.
var apis [256]apiEntry

// register registers the versions served for key, how its requests run
// (ord), its handler, a method expression such as (*Server).handleFetch
// whose request type must be key's, and its ACL rule: a method expression
// such as (*authz).fetch taking the same request type, or a shared rule
// taking any request (needsCluster, needsGroup, fillsOps, anyone:
// acl_rules.go). A bad or repeated registration is a programmer error:
// panic at init.
func register[R, A kmsg.Request](key, min, max int16, ord order, h func(*Server, context.Context, R) (kmsg.Response, error), rule aclRule[A]) {
	if key < 0 || int(key) >= len(apis) || min > max || min < 0 || h == nil || rule == nil {
		panic(fmt.Sprintf("protocol: bad registration key %d v%d-v%d", key, min, max))
	}
	if apis[key].ok {
		panic(fmt.Sprintf("protocol: api key %d registered twice", key))
	}
	r := kmsg.RequestForKey(key)
	if r == nil || r.MaxVersion() < max {
		panic(fmt.Sprintf("protocol: kmsg cannot encode key %d v%d", key, max))
	}
	if _, ok := r.(R); !ok {
		panic(fmt.Sprintf("protocol: handler for key %d takes %T", key, *new(R)))
	}
	if _, ok := r.(A); !ok {
		panic(fmt.Sprintf("protocol: ACL rule for key %d takes %T", key, *new(A)))
	}
	_, file, _, _ := runtime.Caller(1)
	apis[key] = apiEntry{
		min: min, max: max, ok: true, barrier: bool(ord), file: filepath.Base(file),
		handle: func(s *Server, ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
			return h(s, ctx, req.(R))
		},
		authorize: func(z *authz, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
			return rule(z, req.(A))
		},
		open: reflect.ValueOf(rule).Pointer() == reflect.ValueOf(anyone).Pointer(),
	}
}

// registered returns the registered keys in order.
func registered() []int16 {
	var keys []int16
	for k := range apis {
		if apis[k].ok {
			keys = append(keys, int16(k))
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// versionSupported reports whether key at version is served.
func versionSupported(key, version int16) bool {
	if key < 0 || int(key) >= len(apis) {
		return false
	}
	r := apis[key]
	return r.ok && version >= r.min && version <= r.max
}

// handle runs the handler for kreq. A nil response with a nil error means
// "send nothing" (acks=0 Produce); an error closes the connection.
func (s *Server) handle(ctx context.Context, kreq kmsg.Request) (kmsg.Response, error) {
	if k := kreq.Key(); k >= 0 && int(k) < len(apis) && apis[k].ok {
		// ACLs (authorizer.go, acl_rules.go): the API's registered rule;
		// deny answers the request whole, after completes the handler's
		// response.
		deny, after := s.authzFor(ctx).enforce(kreq)
		if deny != nil {
			return deny, nil
		}
		resp, err := apis[k].handle(s, ctx, kreq)
		if after != nil && resp != nil && err == nil {
			after(resp)
		}
		return resp, err
	}
	return nil, fmt.Errorf("%w: %s has no handler", ErrUnknownKey, kmsg.NameForKey(kreq.Key()))
}

// isBarrier reports whether a request changes state, so it runs alone in
// request order on its connection (doc.go).
func isBarrier(kreq kmsg.Request) bool {
	k := kreq.Key()
	return k >= 0 && int(k) < len(apis) && apis[k].barrier
}
