package protocol

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/replication"
)

// startServer serves b on a fresh 127.0.0.1 port and returns its address.
func startServer(t testing.TB, cfg Config, b *replication.Broker) (*Server, string) {
	t.Helper()
	return startServerWith(t, cfg, func(int32) *replication.Broker { return b })
}

// startServerWith listens first and then asks mk for the broker, given the
// listener's port.
func startServerWith(t testing.TB, cfg Config, mk func(port int32) *replication.Broker) (*Server, string) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testLogOut(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(cfg, mk(int32(ln.Addr().(*net.TCPAddr).Port)))
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if n := s.panics.Load(); n != 0 {
			t.Errorf("%d handler panics recovered", n)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return s, ln.Addr().String()
}

// rawConn speaks the wire protocol by hand, for exact version and framing
// checks.
type rawConn struct {
	t    testing.TB
	nc   net.Conn
	corr int32
	fmt  *kmsg.RequestFormatter
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))}
}

// send writes req at its set version and returns the correlation ID.
func (r *rawConn) send(req kmsg.Request) int32 {
	r.t.Helper()
	r.corr++
	if _, err := r.nc.Write(r.fmt.AppendRequest(nil, req, r.corr)); err != nil {
		r.t.Fatal(err)
	}
	return r.corr
}

// writeFrame writes raw bytes as one size-prefixed frame.
func (r *rawConn) writeFrame(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b)))); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// readFrame reads one response frame; err on EOF / close.
func (r *rawConn) readFrame() ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r.nc, sz[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(sz[:]))
	_, err := io.ReadFull(r.nc, b)
	return b, err
}

// recv reads the response to req (sent with correlation ID corr) and
// decodes it.
func (r *rawConn) recv(req kmsg.Request, corr int32) kmsg.Response {
	r.t.Helper()
	b, err := r.readFrame()
	if err != nil {
		r.t.Fatalf("reading response to %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		r.t.Fatalf("correlation ID %d, want %d", got, corr)
	}
	b = b[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != 18 {
		if len(b) == 0 || b[0] != 0 {
			r.t.Fatalf("expected empty response header tags")
		}
		b = b[1:]
	}
	if err := resp.ReadFrom(b); err != nil {
		r.t.Fatalf("decoding %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// roundTrip sends req and returns its response.
func (r *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	return r.recv(req, r.send(req))
}

// expectClosed asserts the server closes the connection without sending
// anything more.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := r.readFrame()
	if err == nil {
		r.t.Fatalf("expected closed connection, got a %d byte frame", len(b))
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		r.t.Fatal("connection still open")
	}
}

func testLogOut() io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}
