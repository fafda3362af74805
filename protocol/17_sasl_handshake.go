package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/auth"
)

// SaslHandshake: v0-1
//
// Behaviour:
//   - On a SASL listener (SASL_PLAINTEXT, SASL_SSL), before
//     authentication: the mechanism must be one of the listener's
//     sasl.enabled.mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512,
//     OAUTHBEARER), else
//     UNSUPPORTED_SASL_MECHANISM; the answer lists the enabled mechanisms.
//     The client then sends SaslAuthenticate.
//   - Once authenticated with a session lifetime (KIP-368,
//     connections.max.reauth.ms or an OAUTHBEARER token's exp), v1 starts
//     a re-authentication with the same mechanism; another mechanism is
//     ILLEGAL_SASL_STATE and the connection closes.
//   - On other listeners, or once authenticated without a lifetime:
//     ILLEGAL_SASL_STATE (as Kafka answers it).
//   - The reader handles it before reading the next request
//     (listener_security.go).
//
// Version notes:
//   - v0 is listed because librdkafka takes SaslHandshake support from
//     v0 being in the range (Kafka 4 keeps it for that reason), then uses
//     v1. After a v0 handshake Kafka expects raw SASL tokens without
//     request framing (pre-KIP-152 clients); Strata does not, so such a
//     client's next frame fails to parse and the connection closes.
//   - v1: SaslAuthenticate carries the exchange.
func init() { register(17, 0, 1, barrier, (*Server).handleSaslHandshake, anyone) }

func (s *Server) handleSaslHandshake(ctx context.Context, req *kmsg.SASLHandshakeRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	c := connFrom(ctx)
	if c == nil || !c.sec.sasl() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	resp.SupportedMechanisms = append([]string(nil), c.sec.Mechanisms...)
	c.auth.mu.Lock()
	defer c.auth.mu.Unlock()
	reauth := false
	if c.auth.done {
		// KIP-368: a re-authentication, with the same mechanism, once
		// the session has a lifetime.
		if c.auth.expiry.IsZero() || c.auth.exchange != nil || req.Version < 1 {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			return resp, nil
		}
		if req.Mechanism != c.auth.mech {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			c.auth.failed = true
			c.log.Info("closing connection: re-authentication with another SASL mechanism", "was", c.auth.mech, "mechanism", req.Mechanism)
			return resp, nil
		}
		reauth = true
	}
	if !slices.Contains(c.sec.Mechanisms, req.Mechanism) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, nil
	}
	var ex auth.Authenticator
	switch req.Mechanism {
	case auth.MechPlain:
		ex = auth.Plain(c.sec.PlainUsers)
	case auth.MechScramSHA256, auth.MechScramSHA512:
		lookup := c.sec.Scram
		if lookup == nil {
			lookup = s.scramLookup
		}
		var err error
		if ex, err = auth.Scram(req.Mechanism, lookup); err != nil {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return resp, nil
		}
	case auth.MechOAuthBearer:
		if c.sec.OAuth == nil {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return resp, nil
		}
		ex = auth.OAuthBearer(c.sec.OAuth)
	default:
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, nil
	}
	c.auth.mech, c.auth.exchange, c.auth.reauth = req.Mechanism, ex, reauth
	return resp, nil
}
