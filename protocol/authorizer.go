package protocol

import (
	"context"
	"net"
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// The authorizer (ACLs, Kafka's StandardAuthorizer): on when
// Config.Authorizer is set (authorizer.class.name, cmd/strata). Every
// request is checked once, in handle (dispatch.go), by the rule its API
// registered with its handler (register; acl_rules.go) before the handler
// runs: a rule either answers the whole request with an authorization
// error, or takes the resources the principal may not touch out of the
// request and adds them back to the response with Kafka's error
// (TOPIC_AUTHORIZATION_FAILED and so on), or hides what the principal may
// not describe from the response. The bindings are the replicated
// metadata's (replication/metadata_acls.go), so every broker decides
// alike.

// authorizer returns the authorizer, nil when ACLs are off.
func (s *Server) authorizer() *acl.Authorizer { return s.cfg.Authorizer }

// requester is who sends the request on ctx's connection: its principal
// and its IP address. A request without a connection (a test calling a
// handler) is the broker's own.
func requester(ctx context.Context) (acl.Request, bool) {
	c := connFrom(ctx)
	if c == nil {
		return acl.Request{}, false
	}
	host := ""
	if a, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok {
		host = a.IP.String()
	} else if h, _, err := net.SplitHostPort(c.nc.RemoteAddr().String()); err == nil {
		host = h
	}
	return acl.Request{Principal: c.Principal(), Host: host}, true
}

// authz is one request's authorization: who asks, and the bindings.
type authz struct {
	a   *acl.Authorizer
	set *acl.Set
	r   acl.Request
	s   *Server
}

func (s *Server) authzFor(ctx context.Context) *authz {
	a := s.authorizer()
	if a == nil {
		return nil
	}
	r, ok := requester(ctx)
	if !ok {
		return nil
	}
	var set *acl.Set
	if s.broker != nil {
		set = s.broker.ACLs()
	}
	return &authz{a: a, set: set, r: r, s: s}
}

// refresh loads the current bindings: for a check after a handler that
// waited (a long poll), so an ACL removed meanwhile counts.
func (z *authz) refresh() {
	if z.s.broker != nil {
		z.set = z.s.broker.ACLs()
	}
}

// ok reports whether the requester may perform op on the resource.
func (z *authz) ok(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return z == nil || z.a.Authorize(z.set, z.r, op, rt, name)
}

func (z *authz) cluster(op kmsg.ACLOperation) bool { return z.ok(op, acl.Cluster, acl.ClusterName) }

// ops is the authorized-operations bitfield of a resource for the
// requester.
func (z *authz) ops(rt kmsg.ACLResourceType, name string) int32 {
	if z == nil {
		return acl.Bitfield(acl.OperationsFor[rt])
	}
	return acl.Bitfield(z.a.Operations(z.set, z.r, rt, name, acl.OperationsFor[rt]))
}

// topicName names a topic by ID ("" when unknown).
func (z *authz) topicName(id [16]byte) string {
	if z.s.broker == nil {
		return ""
	}
	t, ok := z.s.broker.TopicByID(id)
	if !ok {
		return ""
	}
	return t.Name
}

// errorResponse is kreq's response with its top-level ErrorCode (and
// ErrorMessage where it has one) set to code: the answer to a request
// denied as a whole whose response carries one error.
func errorResponse(kreq kmsg.Request, code int16) kmsg.Response {
	resp := kreq.ResponseKind()
	resp.SetVersion(kreq.GetVersion())
	v := reflect.ValueOf(resp).Elem()
	if f := v.FieldByName("ErrorCode"); f.IsValid() && f.Kind() == reflect.Int16 {
		f.SetInt(int64(code))
	}
	if f := v.FieldByName("ErrorMessage"); f.IsValid() && f.Type() == reflect.TypeOf((*string)(nil)) {
		if e := kerr.ErrorForCode(code); e != nil {
			msg := e.Error()
			f.Set(reflect.ValueOf(&msg))
		}
	}
	return resp
}

var (
	errTopicAuth   = kerr.TopicAuthorizationFailed.Code
	errGroupAuth   = kerr.GroupAuthorizationFailed.Code
	errClusterAuth = kerr.ClusterAuthorizationFailed.Code
	errTxnAuth     = kerr.TransactionalIDAuthorizationFailed.Code
)
