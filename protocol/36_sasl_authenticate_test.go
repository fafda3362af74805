package protocol

import (
	"testing"
	"time"

	"github.com/strata-io/strata/internal/auth"
)

type expiringExchange struct{ exp time.Time }

func (expiringExchange) Step([]byte) ([]byte, bool, string, error) { return nil, true, "User:x", nil }
func (e expiringExchange) Expiry() time.Time                       { return e.exp }

// TestSessionLifetime: KIP-368's lifetime is connections.max.reauth.ms, at
// most what is left of an expiring credential, as Kafka's broker computes
// it.
func TestSessionLifetime(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	plain := auth.Plain(nil)
	for _, c := range []struct {
		name   string
		reauth time.Duration
		ex     auth.Authenticator
		want   time.Duration
	}{
		{"no setting, no expiry", 0, plain, 0},
		{"setting only", time.Minute, plain, time.Minute},
		{"token shorter", time.Hour, expiringExchange{now.Add(time.Minute)}, time.Minute},
		{"setting shorter", time.Minute, expiringExchange{now.Add(time.Hour)}, time.Minute},
		{"token only", 0, expiringExchange{now.Add(time.Hour)}, time.Hour},
		{"token already expired", time.Minute, expiringExchange{now.Add(-time.Second)}, time.Millisecond},
	} {
		if got := sessionLifetime(c.reauth, c.ex, now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
