package protocol

import (
	"context"
	"errors"

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
//
// Version notes:
//   - v1: SessionLifetimeMillis, always 0 (no re-authentication, KIP-368,
//     yet: connections.max.reauth.ms is not served).
//   - v2: flexible.
func init() { register(36, 0, 2, barrier, (*Server).handleSaslAuthenticate) }

func (s *Server) handleSaslAuthenticate(ctx context.Context, req *kmsg.SASLAuthenticateRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := connFrom(ctx)
	if c == nil || !c.sec.sasl() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	c.auth.mu.Lock()
	defer c.auth.mu.Unlock()
	if c.auth.done || c.auth.exchange == nil {
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
		if !errors.Is(err, auth.ErrBadMessage) {
			msg = "Authentication failed during authentication due to invalid credentials with SASL mechanism " + c.auth.mech
		}
		resp.ErrorMessage = &msg
		c.auth.failed = true
		c.log.Info("SASL authentication failed", "mechanism", c.auth.mech, "err", err)
		return resp, nil
	}
	resp.SASLAuthBytes = out
	if done {
		c.auth.done, c.auth.principal, c.auth.exchange = true, principal, nil
		c.log.Debug("authenticated", "principal", principal, "mechanism", c.auth.mech)
	}
	return resp, nil
}
