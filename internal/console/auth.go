package console

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
	"github.com/strata-io/strata/internal/auth"
)

// Admin actions off loopback: who asks, and may they.
//
// An admin request from a loopback address is the local operator's, as
// before (unless Auth.Always). Any other must authenticate with HTTP
// basic auth as a SCRAM user of the cluster (`strata user set`, Kafka's
// AlterUserScramCredentials): the password is checked against the stored
// credential the way a SCRAM exchange would (the salted password's client
// key must hash to the stored key), so the console keeps no users of its
// own and never sees a stored password. The principal is then User:NAME,
// as on a SASL connection, and when ACLs are on (Auth.Authorizer, the
// broker's authorizer.class.name) the action needs the Kafka ACLs its
// Kafka requests would need, decided by the broker's own authorizer over
// the replicated bindings (internal/acl): see each action's checks in
// api.go.

// Auth configures the authentication and authorization of admin actions.
type Auth struct {
	// Always makes loopback requests authenticate too (a host shared
	// with other users, or a proxy on the same host in front of the
	// console: every request then comes from loopback).
	Always bool
	// Credential looks up a user's SCRAM credential for a mechanism
	// (replication.Broker.ScramCredential); nil: nobody can authenticate.
	Credential func(user, mech string) (auth.ScramCredential, bool)
	// Authorizer and ACLs decide an authenticated principal's actions
	// when ACLs are on; a nil Authorizer allows every authenticated
	// principal everything, as Kafka without an authorizer.
	Authorizer *acl.Authorizer
	ACLs       func() *acl.Set
}

// identity is who sends an admin request: the principal, "" for the
// trusted local operator (loopback, no credentials).
type identity struct {
	principal string
	host      string
}

type identityKey struct{}

// authenticate decides who sends r. ok false: refused, with the status
// and the reason.
func (c *Console) authenticate(r *http.Request) (id identity, status int, why string) {
	id.host = remoteHost(r.RemoteAddr)
	user, pass, basic := r.BasicAuth()
	if basic {
		if !c.checkPassword(user, pass) {
			return id, http.StatusUnauthorized, "authentication failed: invalid credentials"
		}
		id.principal = "User:" + user
		return id, 0, ""
	}
	if isLoopback(r.RemoteAddr) && !c.opts.Auth.Always {
		return id, 0, ""
	}
	where := "off loopback"
	if isLoopback(r.RemoteAddr) {
		where = "here (strata.console.admin.auth=always)"
	}
	return id, http.StatusUnauthorized, "admin actions " + where + " need a SCRAM user's name and password (strata user set)"
}

// checkPassword reports whether password is user's, against the user's
// SCRAM credentials (SHA-512 first). An unknown user costs the same
// derivation, so the time does not tell whether the user exists.
func (c *Console) checkPassword(user, password string) bool {
	lookup := c.opts.Auth.Credential
	found := false
	ok := false
	for _, mech := range []string{auth.MechScramSHA512, auth.MechScramSHA256} {
		if lookup == nil {
			break
		}
		cred, has := lookup(user, mech)
		if !has {
			continue
		}
		found = true
		got, err := auth.NewScramCredential(mech, password, cred.Salt, cred.Iterations)
		if err == nil && subtle.ConstantTimeCompare(got.StoredKey, cred.StoredKey) == 1 {
			ok = true
		}
		break
	}
	if !found {
		auth.NewScramCredential(auth.MechScramSHA256, password, []byte("strata-console-no-such-user"), auth.MinScramIterations)
	}
	return ok
}

// check is one Kafka ACL an action needs.
type check struct {
	op   kmsg.ACLOperation
	rt   kmsg.ACLResourceType
	name string
}

// authorize refuses the action unless the request's principal holds
// every check's ACL (always allowed: the local operator, and everyone
// when ACLs are off).
func (c *Console) authorize(ctx context.Context, checks ...check) error {
	id, _ := ctx.Value(identityKey{}).(identity)
	a := c.opts.Auth.Authorizer
	if id.principal == "" || a == nil {
		return nil
	}
	var set *acl.Set
	if c.opts.Auth.ACLs != nil {
		set = c.opts.Auth.ACLs()
	}
	if set == nil {
		set = acl.NewSet(nil)
	}
	req := acl.Request{Principal: id.principal, Host: id.host}
	for _, ch := range checks {
		if !a.Authorize(set, req, ch.op, ch.rt, ch.name) {
			return &httpError{http.StatusForbidden, fmt.Sprintf("%s: %s may not %s %s %q", authErrName(ch.rt), id.principal,
				acl.OpName(ch.op), ch.rt.String(), ch.name)}
		}
	}
	return nil
}

// authErrName is Kafka's error for a denied resource type.
func authErrName(rt kmsg.ACLResourceType) string {
	switch rt {
	case acl.Topic:
		return "TOPIC_AUTHORIZATION_FAILED"
	case acl.Group:
		return "GROUP_AUTHORIZATION_FAILED"
	case acl.TransactionalID:
		return "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
	}
	return "CLUSTER_AUTHORIZATION_FAILED"
}

func remoteHost(remote string) string {
	if i := strings.LastIndexByte(remote, ':'); i >= 0 {
		return strings.Trim(remote[:i], "[]")
	}
	return remote
}
