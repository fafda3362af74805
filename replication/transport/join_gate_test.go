package transport

import (
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
)

// A joining replica's transport refuses vote requests (without raft
// seeing them) and asks for none, until its log reaches the index the
// first leader that contacted it had; then votes go to raft again, and
// the state is persisted so a restart in between keeps the gate. The
// fault harness found what the missing gate does: an empty re-added
// replica granted its vote to a broker catching up with an old
// configuration, which became leader without the committed tail.
func TestJoiningReplicaHoldsItsVotes(t *testing.T) {
	a, b, ga, gb := newTestPair(t)
	var persisted atomic.Uint64
	persisted.Store(1) // openGroup: joining, no state
	var last atomic.Uint64
	gb.SetJoinGate(last.Load, persisted.Load(), func(v uint64) error { persisted.Store(v); return nil }, slog.New(slog.DiscardHandler))
	stop := make(chan struct{})
	defer close(stop)
	var seen atomic.Int32 // vote requests raft (here: serveEcho) saw on b
	go func() {
		for {
			select {
			case rpc := <-gb.Consumer():
				switch cmd := rpc.Command.(type) {
				case *raft.AppendEntriesRequest:
					rpc.Respond(&raft.AppendEntriesResponse{Term: cmd.Term, Success: true}, nil)
				case *raft.RequestVoteRequest:
					seen.Add(1)
					rpc.Respond(&raft.RequestVoteResponse{Term: cmd.Term, Granted: true}, nil)
				case *raft.RequestPreVoteRequest:
					seen.Add(1)
					rpc.Respond(&raft.RequestPreVoteResponse{Term: cmd.Term, Granted: true}, nil)
				}
			case <-stop:
				return
			}
		}
	}()
	vote := func() raft.RequestVoteResponse {
		t.Helper()
		var resp raft.RequestVoteResponse
		req := &raft.RequestVoteRequest{RPCHeader: testHeader("1"), Term: 9, LastLogIndex: 5, LastLogTerm: 3}
		if err := ga.RequestVote("2", b.Addr(), req, &resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	preVote := func() raft.RequestPreVoteResponse {
		t.Helper()
		var resp raft.RequestPreVoteResponse
		req := &raft.RequestPreVoteRequest{RPCHeader: testHeader("1"), Term: 9, LastLogIndex: 5, LastLogTerm: 3}
		if err := ga.RequestPreVote("2", b.Addr(), req, &resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// Before any leader: refused, raft not asked (an empty raft grants).
	if r := vote(); r.Granted || r.Term != 9 {
		t.Fatalf("vote to a replica no leader has contacted: %+v", r)
	}
	if r := preVote(); r.Granted {
		t.Fatalf("pre-vote to a replica no leader has contacted: %+v", r)
	}
	// Its own campaign is held back too.
	var own raft.RequestVoteResponse
	if err := gb.RequestVote("1", a.Addr(), &raft.RequestVoteRequest{RPCHeader: testHeader("2"), Term: 4}, &own); err == nil {
		t.Fatal("a joining replica asked for votes")
	}

	// A leader at term 7 whose log ends at 40 contacts it; a heartbeat
	// (no position) does not count.
	var ae raft.AppendEntriesResponse
	if err := ga.AppendEntries("2", b.Addr(), &raft.AppendEntriesRequest{RPCHeader: testHeader("1"), Term: 7, PrevLogEntry: 40, PrevLogTerm: 6, LeaderCommitIndex: 38}, &ae); err != nil {
		t.Fatal(err)
	}
	if v := persisted.Load(); v != 41 {
		t.Fatalf("persisted gate %d, want 41 (index 40 + 1)", v)
	}
	last.Store(39)
	if r := vote(); r.Granted {
		t.Fatalf("vote granted at index 39 of 40: %+v", r)
	}
	// A restart now keeps the gate where it was.
	if g := newJoinGate(41); g == nil || g.until != 40 {
		t.Fatalf("gate after a restart: %+v", g)
	}
	if seen.Load() != 0 {
		t.Fatalf("raft saw %d vote requests while the replica was joining", seen.Load())
	}

	// Caught up: raft decides from now on, and the gate is gone.
	last.Store(40)
	if r := vote(); !r.Granted {
		t.Fatalf("vote after catching up not handed to raft: %+v", r)
	}
	if seen.Load() != 1 {
		t.Fatalf("raft saw %d vote requests after the catch-up, want 1", seen.Load())
	}
	if v := persisted.Load(); v != 0 {
		t.Fatalf("persisted gate %d after the catch-up, want 0", v)
	}
	if gb.joinGateFor() != nil {
		t.Fatal("gate still installed after the catch-up")
	}
	if b.joinVotesRefused.Load() != 3 {
		t.Fatalf("refused votes counted %d, want 3", b.joinVotesRefused.Load())
	}
}
