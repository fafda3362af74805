package protocol

import (
	"log/slog"
	"net"

	"github.com/strata-io/strata/replication"
)

// STUB: fixes the API cmd codes against; the protocol work replaces it.

// Config configures the Kafka listener.
type Config struct {
	MaxRequestBytes    int32        // socket.request.max.bytes (default 100 MiB); larger frames close the connection
	MaxInFlightPerConn int          // pipelined requests read ahead per connection (default 64)
	Logger             *slog.Logger // nil = slog.Default()
}

// Server serves the Kafka protocol for one broker.
type Server struct{}

// NewServer returns a server answering for b.
func NewServer(cfg Config, b *replication.Broker) *Server { panic("stub") }

// Serve accepts connections on ln until Close; it returns nil after Close.
func (s *Server) Serve(ln net.Listener) error { panic("stub") }

// Close stops accepting, closes every connection (finishing responses in
// flight where it can) and waits for the connection goroutines.
func (s *Server) Close() error { panic("stub") }
