package transport

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestMuxSurvivesPanics: a panic in code a peer's request reaches -- a
// forwarded request's handler, a group's heartbeat handler run on the
// connection's reader -- fails that request or connection, is counted,
// and the Mux (and the process) goes on serving.
func TestMuxSurvivesPanics(t *testing.T) {
	a, b := newTestMux(t), newTestMux(t)
	before := Panics.Load()

	b.SetForwardHandler(func(req []byte) ([]byte, error) {
		if string(req) == "boom" {
			var m map[string]int
			m["x"]++ // panics
		}
		return append([]byte("ok:"), req...), nil
	})
	if _, err := a.Forward(b.Addr(), []byte("boom"), 5*time.Second); !errors.Is(err, ErrRemote) {
		t.Fatalf("forward to a panicking handler: %v", err)
	}
	if resp, err := a.Forward(b.Addr(), []byte("again"), 5*time.Second); err != nil || string(resp) != "ok:again" {
		t.Fatalf("forward after the panic: %q %v", resp, err)
	}

	ga := newTestGroup(t, a, "g")
	gb := newTestGroup(t, b, "g")
	gb.SetHeartbeatHandler(func(rpc raft.RPC) { panic("heartbeat handler") })
	hb := &raft.AppendEntriesRequest{RPCHeader: testHeader("a"), Term: 3, Leader: []byte("a")}
	var resp raft.AppendEntriesResponse
	if err := ga.AppendEntries("b", b.Addr(), hb, &resp); err == nil {
		t.Fatal("a heartbeat whose handler panicked was answered")
	}
	if n := Panics.Load() - before; n != 2 {
		t.Fatalf("%d panics counted, want 2", n)
	}
	// The Mux still serves: a vote goes through on a new connection.
	stop := make(chan struct{})
	defer close(stop)
	go serveEcho(gb, stop, nil)
	var rv raft.RequestVoteResponse
	if err := ga.RequestVote("b", b.Addr(), &raft.RequestVoteRequest{RPCHeader: testHeader("a"), Term: 4}, &rv); err != nil || !rv.Granted {
		t.Fatalf("vote after the panics: %+v %v", rv, err)
	}
}
