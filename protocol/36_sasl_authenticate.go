package protocol

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/auth"
)

// SaslAuthenticate: v0-2
//
// Behaviour:
//   - Carries the SASL exchange of the mechanism SaslHandshake chose
//     (internal/auth): PLAIN in one step, SCRAM in two. When the exchange
//     completes the connection is authenticated as User:<name>.
//   - A refused exchange (wrong password, unknown user, malformed
//     message) is SASL_AUTHENTICATION_FAILED with a message that does
//     not say whether the user exists; the connection closes after the
//     answer, as Kafka's does.
//   - Without a SaslHandshake first, on a non-SASL listener or once
//     authenticated: ILLEGAL_SASL_STATE.
//   - OAUTHBEARER: a refused token is answered (no error) with RFC 7628's
//     JSON error {"status":"invalid_token"} as the server's challenge; the
//     client's dummy 0x01 then gets SASL_AUTHENTICATION_FAILED with that
//     message and the connection closes (Kafka's flow). Why the token was
//     refused is logged, not told.
//   - KIP-368: the session lifetime is connections.max.reauth.ms, at most
//     what is left of an OAUTHBEARER token (sessionLifetime). A request
//     other than SaslHandshake/SaslAuthenticate after it closes the
//     connection (conn.go); a re-authentication (SaslHandshake v1 then
//     SaslAuthenticate on the same connection) must end with the same
//     principal, else SASL_AUTHENTICATION_FAILED and the connection closes.
//
// Version notes:
//   - v1: SessionLifetimeMillis (KIP-368); a v0 client is not told, and
//     its connection closes at the lifetime's end all the same.
//   - v2: flexible.
func init() { register(36, 0, 2, barrier, (*Server).handleSaslAuthenticate, anyone) }

func (s *Server) handleSaslAuthenticate(ctx context.Context, req *kmsg.SASLAuthenticateRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := connFrom(ctx)
	if c == nil || !c.sec.sasl() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	c.auth.mu.Lock()
	defer c.auth.mu.Unlock()
	if c.auth.exchange == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake first"
		if c.auth.done {
			msg = "already authenticated"
		}
		resp.ErrorMessage = &msg
		c.auth.failed = true
		return resp, nil
	}
	out, done, principal, err := c.auth.exchange.Step(req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := err.Error()
		var refused *auth.RefusedError
		if errors.As(err, &refused) {
			msg = refused.Message
			if r, ok := c.auth.exchange.(interface{ Refusal() string }); ok {
				err = fmt.Errorf("%w: %s", err, r.Refusal())
			}
		} else if !errors.Is(err, auth.ErrBadMessage) {
			msg = "Authentication failed during authentication due to invalid credentials with SASL mechanism " + c.auth.mech
		}
		resp.ErrorMessage = &msg
		c.auth.failed = true
		c.log.Info("SASL authentication failed", "mechanism", c.auth.mech, "err", err)
		return resp, nil
	}
	resp.SASLAuthBytes = out
	if done {
		if c.auth.reauth && principal != c.auth.principal {
			// Kafka refuses a change of principal on re-authentication.
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := "Cannot change principals during re-authentication from " + c.auth.principal + ": " + principal
			resp.ErrorMessage, resp.SASLAuthBytes = &msg, nil
			c.auth.failed = true
			c.log.Info("closing connection: re-authentication as another principal", "was", c.auth.principal, "principal", principal)
			return resp, nil
		}
		lifetime := sessionLifetime(c.sec.ReauthAfter, c.auth.exchange, time.Now())
		c.auth.expiry = time.Time{}
		if lifetime > 0 {
			c.auth.expiry = time.Now().Add(lifetime)
			resp.SessionLifetimeMillis = max(lifetime.Milliseconds(), 1)
		}
		c.auth.done, c.auth.principal, c.auth.exchange, c.auth.reauth = true, principal, nil, false
		c.log.Debug("authenticated", "principal", principal, "mechanism", c.auth.mech, "session_lifetime", lifetime)
	}
	return resp, nil
}

// sessionLifetime is KIP-368's session lifetime: connections.max.reauth.ms
// (0: none), shortened to what is left of an expiring credential (an
// OAUTHBEARER token), as Kafka's broker computes it. An already expired
// credential gets 1 ms: the next request other than a re-authentication
// closes the connection.
func sessionLifetime(reauth time.Duration, ex auth.Authenticator, now time.Time) time.Duration {
	e, ok := ex.(auth.Expiring)
	if !ok || e.Expiry().IsZero() {
		return max(reauth, 0)
	}
	left := max(e.Expiry().Sub(now), time.Millisecond)
	if reauth > 0 {
		return min(reauth, left)
	}
	return left
}
