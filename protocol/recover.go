package protocol

import (
	"runtime/debug"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Goroutines a handler starts (a fan-out over partitions) recover their
// own panics: the connection's recover (conn.run) covers only the handler's
// goroutine, and a panic anywhere else ended the process (issue 19,
// item 7). Each panic is a bug, counted (Server.panics, which tests assert
// stays 0) and logged with its stack; it fails the one partition it
// happened in with UNKNOWN_SERVER_ERROR, as Kafka answers an unexpected
// exception.

// recoverPartition is deferred by a goroutine working on one partition of
// a request: a panic sets *code to UNKNOWN_SERVER_ERROR.
func (s *Server) recoverPartition(code *int16, api, topic string, partition int32) {
	if r := recover(); r != nil {
		s.recoverPanicked(code, r, api, topic, partition)
	}
}

// recoverPanicked records a recovered panic r (see recoverPartition).
func (s *Server) recoverPanicked(code *int16, r any, api, topic string, partition int32) {
	s.panics.Add(1)
	*code = kerr.UnknownServerError.Code
	s.log.Error(api+" of a partition panicked; the partition is failed", "topic", topic, "partition", partition,
		"panic", r, "stack", string(debug.Stack()))
}
