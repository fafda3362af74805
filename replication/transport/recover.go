package transport

import (
	"fmt"
	"net"
	"runtime/debug"
	"sync/atomic"
)

// The Mux's goroutines serve network input: a panic on one (a bug some
// peer's bytes triggered, here or in raft code they call, such as a
// group's heartbeat handler) ends that connection or request, not the
// process (issue 19, item 7). Each is counted (Panics) and logged
// with its stack. Validation (validate.go) is what keeps bad
// input away from raft's own goroutines, which panic on purpose.

// Panics counts the panics Mux goroutines recovered from.
var Panics atomic.Int64

func (m *Mux) panicked(what string, r any) {
	Panics.Add(1)
	m.logger.Error("raft transport: "+what+" panicked", "panic", r, "stack", string(debug.Stack()))
}

// recoverConn is deferred by a goroutine serving a connection or one of
// its requests: a panic is logged and ends the goroutine (a connection's
// reader then closes it: serve's deferred forget).
func (m *Mux) recoverConn(what string, remote net.Addr) {
	if r := recover(); r != nil {
		if remote != nil {
			what += " from " + remote.String()
		}
		m.panicked(what, r)
	}
}

// guard runs fn, turning a panic into an error (a forwarded request's
// handler: the peer gets an error answer).
func (m *Mux) guard(what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			m.panicked(what, r)
			err = fmt.Errorf("%s panicked: %v", what, r)
		}
	}()
	return fn()
}
