package e2e

import (
	"crypto/tls"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// TestSecurityGarbageBodies sends every API key, at its highest version,
// with a garbage body, on unauthenticated and on authenticated (SASL PLAIN
// over TLS) connections of a SASL_SSL listener: the broker answers or
// closes the connection, never panics, and still serves clients.
func TestSecurityGarbageBodies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	sb := startSecureBroker(t)
	rng := rand.New(rand.NewPCG(uint64(testwait.SeedOr(t, 19)), 36)) // logged; STRATA_SEED tries other garbage
	dial := func(authenticate bool) net.Conn {
		t.Helper()
		conn, err := tls.Dial("tcp", sb.saslSSL, sb.tlsConfig(false))
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		if authenticate {
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Version, hs.Mechanism = 1, "PLAIN"
			if rawRequest(t, conn, hs, 1) == nil {
				t.Fatal("SaslHandshake not answered")
			}
			au := kmsg.NewPtrSASLAuthenticateRequest()
			au.Version = 2
			au.SASLAuthBytes = []byte("\x00" + plainUser + "\x00" + plainPass)
			body := rawRequest(t, conn, au, 2)
			if body == nil {
				t.Fatal("SaslAuthenticate not answered")
			}
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			resp.Version = 2
			if err := resp.ReadFrom(body[5:]); err != nil || resp.ErrorCode != 0 { // after the correlation ID and the v1 header's tags
				t.Fatalf("SaslAuthenticate: %v %+v", err, resp)
			}
		}
		return conn
	}
	for _, authenticated := range []bool{false, true} {
		for key := int16(0); key <= 92; key++ {
			req := kmsg.RequestForKey(key)
			if req == nil {
				continue
			}
			req.SetVersion(req.MaxVersion())
			conn := dial(authenticated)
			garbage := make([]byte, 1+rng.IntN(64))
			for i := range garbage {
				garbage[i] = byte(rng.Uint32())
			}
			// A frame with a valid header and a garbage body.
			var frame []byte
			frame = append(frame, byte(key>>8), byte(key), byte(req.GetVersion()>>8), byte(req.GetVersion()), 0, 0, 0, 9, 0, 5)
			frame = append(frame, "probe"...)
			if req.IsFlexible() || key == 18 {
				frame = append(frame, 0)
			}
			frame = append(frame, garbage...)
			conn.Write(append([]byte{byte(len(frame) >> 24), byte(len(frame) >> 16), byte(len(frame) >> 8), byte(len(frame))}, frame...))
			buf := make([]byte, 1<<16)
			n, _ := conn.Read(buf) // an answer (an error code) or the close
			conn.Close()
			if !authenticated && key != 17 && key != 18 && key != 36 && n > 0 {
				t.Fatalf("%s before authentication was answered (%d bytes)", kmsg.NameForKey(key), n)
			}
		}
	}
	// Still serving, and nothing panicked.
	cl := dial(true)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	if rawRequest(t, cl, md, 3) == nil {
		t.Fatal("an authenticated Metadata after the garbage was not answered")
	}
	cl.Close()
	if logs := sb.logText(); strings.Contains(logs, "panic") {
		t.Fatalf("the broker panicked:\n%s", logs)
	}
}
