package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/strata-io/strata/internal/testwait"
)

func testHeader(id string) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte("127.0.0.1:1")}
}

// sampleRPCs returns one filled value of every request and response type.
func sampleRPCs() []any {
	h := testHeader("1")
	return []any{
		&raft.AppendEntriesRequest{RPCHeader: h, Term: 7, Leader: []byte("127.0.0.1:1"), PrevLogEntry: 41, PrevLogTerm: 6,
			Entries: []*raft.Log{
				{Index: 42, Term: 7, Type: raft.LogCommand, Data: []byte("batch"), Extensions: []byte{1}, AppendedAt: time.Unix(0, 1700000000123456789)},
				{Index: 43, Term: 7, Type: raft.LogNoop},
			}, LeaderCommitIndex: 40},
		&raft.AppendEntriesResponse{RPCHeader: h, Term: 7, LastLog: 43, Success: true, NoRetryBackoff: true},
		&beatRequests{beats: []beat{
			{group: "t-0", req: &raft.AppendEntriesRequest{RPCHeader: h, Term: 7, Leader: []byte("127.0.0.1:1")}},
			{group: "t-1", req: &raft.AppendEntriesRequest{RPCHeader: h, Term: 3}},
		}},
		&beatAnswers{results: []beatResult{
			{resp: raft.AppendEntriesResponse{RPCHeader: h, Term: 7, LastLog: 43, Success: true}},
			{err: &remoteBeatError{msg: "unknown raft group t-1"}},
		}},
		&raft.RequestVoteRequest{RPCHeader: h, Term: 8, Candidate: []byte("c"), LastLogIndex: 43, LastLogTerm: 7, LeadershipTransfer: true},
		&raft.RequestVoteResponse{RPCHeader: h, Term: 8, Peers: []byte("p"), Granted: true},
		&raft.RequestPreVoteRequest{RPCHeader: h, Term: 9, LastLogIndex: 43, LastLogTerm: 7},
		&raft.RequestPreVoteResponse{RPCHeader: h, Term: 9, Granted: true},
		&raft.InstallSnapshotRequest{RPCHeader: h, SnapshotVersion: 1, Term: 9, Leader: []byte("l"), LastLogIndex: 100, LastLogTerm: 9,
			Peers: []byte("x"), Configuration: []byte("cfg"), ConfigurationIndex: 3, Size: 1 << 20},
		&raft.InstallSnapshotResponse{RPCHeader: h, Term: 9, Success: true},
		&raft.TimeoutNowRequest{RPCHeader: h},
		&raft.TimeoutNowResponse{RPCHeader: h},
	}
}

func TestCodecRoundTripsEveryRPC(t *testing.T) {
	for _, v := range sampleRPCs() {
		e := &enc{}
		if !encodeRPC(e, v) {
			t.Fatalf("%T: not encodable", v)
		}
		got := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := decodeRPC(e.b, got); err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("%T: round trip\n got %+v\nwant %+v", v, got, v)
		}
		// Every strict prefix must fail cleanly, never panic or succeed.
		for n := 0; n < len(e.b); n++ {
			again := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			if err := decodeRPC(e.b[:n], again); err == nil {
				t.Fatalf("%T: prefix of %d/%d bytes decoded", v, n, len(e.b))
			}
		}
	}
}

func TestCodecRefusesHugeCounts(t *testing.T) {
	e := &enc{}
	e.header(testHeader("1"))
	e.u64(1)       // term
	e.bytes(nil)   // leader
	e.u64(0)       // prev entry
	e.u64(0)       // prev term
	e.u64(1 << 40) // entry count
	e.b = append(e.b, make([]byte, 32)...)
	err := decodeRPC(e.b, new(raft.AppendEntriesRequest))
	if !errors.Is(err, ErrCodec) {
		t.Fatalf("got %v, want ErrCodec", err)
	}
}

func FuzzDecodeRPC(f *testing.F) {
	for _, v := range sampleRPCs() {
		e := &enc{}
		encodeRPC(e, v)
		f.Add(e.b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// A follower decodes AppendEntries without copying the entries'
		// data out of the frame: the result must be the same.
		var copied, owned raft.AppendEntriesRequest
		errCopied := decodeRPC(b, &copied)
		errOwned := decodeAppendEntriesOwned(append([]byte(nil), b...), &owned)
		if (errCopied == nil) != (errOwned == nil) || (errCopied == nil && !reflect.DeepEqual(copied, owned)) {
			t.Fatalf("owned decoding differs: %v / %v", errCopied, errOwned)
		}
		for _, v := range sampleRPCs() {
			target := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			if err := decodeRPC(b, target); err == nil {
				// Whatever decodes must encode back to the same bytes.
				e := &enc{}
				encodeRPC(e, target)
				again := reflect.New(reflect.TypeOf(v).Elem()).Interface()
				if err := decodeRPC(e.b, again); err != nil || !reflect.DeepEqual(again, target) {
					t.Fatalf("%T: re-encode mismatch: %v", v, err)
				}
			}
		}
	})
}

// newTestPair starts two Muxes, a and b, each with the group "g".
func newTestPair(t *testing.T) (a, b *Mux, ga, gb *Group) {
	t.Helper()
	a, b = newTestMux(t), newTestMux(t)
	return a, b, newTestGroup(t, a, "g"), newTestGroup(t, b, "g")
}

// newTestMux starts a Mux on 127.0.0.1 closed at the end of the test.
func newTestMux(t *testing.T) *Mux {
	t.Helper()
	return newTestMuxTimeout(t, 2*time.Second)
}

func newTestMuxTimeout(t *testing.T, rpcTimeout time.Duration) *Mux {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMux(Config{Listener: ln, Logger: slog.New(slog.DiscardHandler), RPCTimeout: rpcTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func newTestGroup(t *testing.T, m *Mux, id string) *Group {
	t.Helper()
	g, err := m.Group(id)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// serveEcho answers every RPC of g until stop: AppendEntries with
// LastLog = PrevLogEntry + len(Entries), votes granted, snapshots read
// fully (the bytes go to snap).
func serveEcho(g *Group, stop chan struct{}, snap chan<- []byte) {
	for {
		select {
		case rpc := <-g.Consumer():
			switch cmd := rpc.Command.(type) {
			case *raft.AppendEntriesRequest:
				rpc.Respond(&raft.AppendEntriesResponse{Term: cmd.Term, LastLog: cmd.PrevLogEntry + uint64(len(cmd.Entries)), Success: true}, nil)
			case *raft.RequestVoteRequest:
				rpc.Respond(&raft.RequestVoteResponse{Term: cmd.Term, Granted: true}, nil)
			case *raft.RequestPreVoteRequest:
				rpc.Respond(&raft.RequestPreVoteResponse{Term: cmd.Term, Granted: true}, nil)
			case *raft.TimeoutNowRequest:
				rpc.Respond(&raft.TimeoutNowResponse{}, nil)
			case *raft.InstallSnapshotRequest:
				b, err := io.ReadAll(rpc.Reader)
				if snap != nil {
					snap <- b
				}
				rpc.Respond(&raft.InstallSnapshotResponse{Term: cmd.Term, Success: err == nil}, err)
			}
		case <-stop:
			return
		}
	}
}

func TestMuxCarriesEveryRPCToItsGroup(t *testing.T) {
	a, b := newTestMuxTimeout(t, 5*time.Second), newTestMux(t)
	ga := newTestGroup(t, a, "topic-0")
	gb := newTestGroup(t, b, "topic-0")
	newTestGroup(t, b, "topic-1") // a second group must not see topic-0's RPCs
	stop := make(chan struct{})
	defer close(stop)
	snaps := make(chan []byte, 1)
	go serveEcho(gb, stop, snaps)

	var aeResp raft.AppendEntriesResponse
	req := sampleRPCs()[0].(*raft.AppendEntriesRequest)
	if err := ga.AppendEntries("b", b.Addr(), req, &aeResp); err != nil {
		t.Fatal(err)
	}
	if !aeResp.Success || aeResp.LastLog != 43 || aeResp.Term != 7 {
		t.Fatalf("append entries answer %+v", aeResp)
	}
	var rv raft.RequestVoteResponse
	if err := ga.RequestVote("b", b.Addr(), &raft.RequestVoteRequest{Term: 3}, &rv); err != nil || !rv.Granted || rv.Term != 3 {
		t.Fatalf("vote %+v %v", rv, err)
	}
	var pv raft.RequestPreVoteResponse
	if err := ga.RequestPreVote("b", b.Addr(), &raft.RequestPreVoteRequest{Term: 4}, &pv); err != nil || !pv.Granted {
		t.Fatalf("pre-vote %+v %v", pv, err)
	}
	var tn raft.TimeoutNowResponse
	if err := ga.TimeoutNow("b", b.Addr(), &raft.TimeoutNowRequest{}, &tn); err != nil {
		t.Fatal(err)
	}

	data := bytes.Repeat([]byte("segment-bytes-"), 100000)
	var is raft.InstallSnapshotResponse
	// A request raft could send: the Mux refuses others (validate.go).
	snapReq := &raft.InstallSnapshotRequest{Term: 5, SnapshotVersion: 1, LastLogIndex: 10, LastLogTerm: 5, ConfigurationIndex: 1,
		Configuration: raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{ID: "a", Address: "127.0.0.1:1"}}}),
		Size:          int64(len(data))}
	if err := ga.InstallSnapshot("b", b.Addr(), snapReq, &is, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if !is.Success || !bytes.Equal(<-snaps, data) {
		t.Fatal("snapshot not delivered intact")
	}

	// An RPC for a group the peer does not run is refused (after
	// unknownGroupWait), not lost.
	gx := newTestGroup(t, a, "no-such-group")
	err := gx.AppendEntries("b", b.Addr(), &raft.AppendEntriesRequest{Term: 1}, &aeResp)
	if !errors.Is(err, ErrRemote) {
		t.Fatalf("unknown group: got %v, want ErrRemote", err)
	}
}

func TestMuxHeartbeatTakesTheFastPath(t *testing.T) {
	_, b, ga, gb := newTestPair(t)
	var beats atomic.Int32
	gb.SetHeartbeatHandler(func(rpc raft.RPC) {
		beats.Add(1)
		rpc.Respond(&raft.AppendEntriesResponse{Term: rpc.Command.(*raft.AppendEntriesRequest).Term, Success: true}, nil)
	})
	hb := &raft.AppendEntriesRequest{RPCHeader: testHeader("a"), Term: 2}
	for i := 0; i < 10; i++ {
		var resp raft.AppendEntriesResponse
		if err := ga.AppendEntries("b", b.Addr(), hb, &resp); err != nil || !resp.Success {
			t.Fatalf("heartbeat %d: %+v %v", i, resp, err)
		}
	}
	// All ten reach the handler; once the group is steady they are
	// answered at once and travel in the next round
	// (TestMuxVouchesForSteadyHeartbeats), so wait for that round.
	testwait.For(t, 2*time.Second, func() bool { return beats.Load() == 10 }, "%d heartbeats on the fast path, want 10", beats.Load())
	if n := len(gb.Consumer()); n != 0 {
		t.Fatalf("%d heartbeats queued for the raft loop", n)
	}
}

func TestMuxPipelineKeepsOrder(t *testing.T) {
	_, b, ga, gb := newTestPair(t)
	stop := make(chan struct{})
	defer close(stop)
	go serveEcho(gb, stop, nil)
	p, err := ga.AppendEntriesPipeline("b", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 300 // more than pipelineDepth: sending must apply back-pressure, not fail
	go func() {
		for i := 0; i < n; i++ {
			req := &raft.AppendEntriesRequest{Term: 1, PrevLogEntry: uint64(i), Entries: []*raft.Log{{Index: uint64(i + 1), Data: []byte("x")}}}
			if _, err := p.AppendEntries(req, new(raft.AppendEntriesResponse)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < n; i++ {
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatal(err)
			}
			if f.Request().PrevLogEntry != uint64(i) || f.Response().LastLog != uint64(i+1) {
				t.Fatalf("future %d: request %d, answer %d", i, f.Request().PrevLogEntry, f.Response().LastLog)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("future %d not done", i)
		}
	}
}

func TestMuxSharesFewConnectionsAmongManyGroups(t *testing.T) {
	a, b := newTestMux(t), newTestMux(t)
	stop := make(chan struct{})
	defer close(stop)
	const groups = 200
	for i := 0; i < groups; i++ {
		id := "g" + strconv.Itoa(i)
		newTestGroup(t, a, id)
		go serveEcho(newTestGroup(t, b, id), stop, nil)
	}
	for i := 0; i < groups; i++ {
		a.mu.Lock()
		g := a.groups["g"+strconv.Itoa(i)]
		a.mu.Unlock()
		var resp raft.AppendEntriesResponse
		if err := g.AppendEntries("b", b.Addr(), &raft.AppendEntriesRequest{Term: 1}, &resp); err != nil {
			t.Fatal(err)
		}
	}
	b.mu.Lock()
	inbound := len(b.inbound)
	b.mu.Unlock()
	if inbound > a.cfg.ConnsPerPeer {
		t.Fatalf("%d connections for %d groups, want at most %d", inbound, groups, a.cfg.ConnsPerPeer)
	}
}

func TestMuxClosesConnectionsThatSendGarbage(t *testing.T) {
	m := newTestMux(t)
	newTestGroup(t, m, "g")
	for name, payload := range map[string][]byte{
		"bad preface":     []byte("HTTP/1.1 GET /\r\n\r\n"),
		"huge frame":      append([]byte("STRX\x01\x00"), 0xff, 0xff, 0xff, 0xff),
		"bad group len":   append([]byte("STRX\x01\x00"), 0, 0, 0, 12, kindAppendEntries, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0x7f),
		"undecodable rpc": append([]byte("STRX\x01\x00"), 0, 0, 0, 12, kindAppendEntries, 0, 0, 0, 0, 0, 0, 0, 1, 1, 'g', 0xff),
		"response kind":   append([]byte("STRX\x01\x00"), 0, 0, 0, 11, kindResponse, 0, 0, 0, 0, 0, 0, 0, 1, 1, 'g'),
	} {
		c, err := net.Dial("tcp", string(m.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		c.Write(payload)
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		_, err = bufio.NewReader(c).ReadByte()
		if err == nil || errTimeout(err) != nil {
			t.Errorf("%s: connection not closed: %v", name, err)
		}
		c.Close()
	}
}

// errTimeout returns err if it is a timeout, nil otherwise.
func errTimeout(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return nil
}

// A request for a group the peer opens a moment later (a new partition's
// first election reaching a replica that has not applied the metadata
// yet) waits for it instead of failing.
func TestMuxWaitsForAGroupAboutToOpen(t *testing.T) {
	a, b := newTestMuxTimeout(t, 5*time.Second), newTestMux(t)
	ga := newTestGroup(t, a, "new-0")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		time.Sleep(200 * time.Millisecond)
		gb, err := b.Group("new-0")
		if err != nil {
			t.Error(err)
			return
		}
		serveEcho(gb, stop, nil)
	}()
	var rv raft.RequestVoteResponse
	start := time.Now()
	if err := ga.RequestVote("b", b.Addr(), &raft.RequestVoteRequest{RPCHeader: testHeader("a"), Term: 3}, &rv); err != nil || !rv.Granted {
		t.Fatalf("vote for a group opened 200 ms later: %+v %v", rv, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("answered after %v, before the group existed", d)
	}
	// A group that never opens is refused after unknownGroupWait.
	gx := newTestGroup(t, a, "never")
	start = time.Now()
	err := gx.RequestVote("b", b.Addr(), &raft.RequestVoteRequest{RPCHeader: testHeader("a"), Term: 3}, &rv)
	if !errors.Is(err, ErrRemote) {
		t.Fatalf("vote for a group that never opens: %v", err)
	}
	if d := time.Since(start); d < unknownGroupWait-100*time.Millisecond || d > unknownGroupWait+time.Second {
		t.Fatalf("refused after %v, want about %v", d, unknownGroupWait)
	}
}

// Heartbeats of many groups to one peer travel together: one frame per
// round, every heartbeat answered by its own group's handler; a group the
// peer does not have, or one without a handler, is answered on its own.
func TestMuxCoalescesHeartbeats(t *testing.T) {
	a, b := newTestMux(t), newTestMux(t)
	const groups = 200
	var senders []*Group
	var mu sync.Mutex
	beats := map[string]int{}
	for i := 0; i < groups; i++ {
		id := "p-" + strconv.Itoa(i)
		senders = append(senders, newTestGroup(t, a, id))
		gb := newTestGroup(t, b, id)
		gb.SetHeartbeatHandler(func(rpc raft.RPC) {
			req := rpc.Command.(*raft.AppendEntriesRequest)
			mu.Lock()
			beats[id]++
			mu.Unlock()
			// Odd terms stand for a follower at a newer term, which refuses.
			rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term + 1, Success: req.Term%2 == 0}, nil)
		})
	}
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	for i, g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			term := uint64(i + 1)
			var resp raft.AppendEntriesResponse
			err := g.AppendEntries("b", b.Addr(), &raft.AppendEntriesRequest{RPCHeader: testHeader("a"), Term: term, Leader: []byte(a.Addr())}, &resp)
			switch {
			case err != nil:
				errs <- fmt.Errorf("group %d: %w", i, err)
			case resp.Term != term+1 || resp.Success != (term%2 == 0):
				errs <- fmt.Errorf("group %d got the answer %+v", i, resp)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(beats) != groups {
		t.Fatalf("%d groups heard a heartbeat, want %d", len(beats), groups)
	}
	for id, n := range beats {
		if n != 1 {
			t.Fatalf("group %s heard %d heartbeats, want 1", id, n)
		}
	}
	if sent, frames := a.beatsSent.Load(), a.beatFrames.Load(); sent != groups || frames > groups/10 {
		t.Fatalf("%d heartbeats in %d frames: not coalesced", sent, frames)
	}

	// A group the peer does not run is refused alone.
	lone := newTestGroup(t, a, "absent")
	var resp raft.AppendEntriesResponse
	err := lone.AppendEntries("b", b.Addr(), &raft.AppendEntriesRequest{RPCHeader: testHeader("a"), Term: 2}, &resp)
	if !errors.Is(err, ErrRemote) {
		t.Fatalf("heartbeat to a group the peer lacks: %v", err)
	}
	// A group without a heartbeat handler answers through its raft loop.
	ga := newTestGroup(t, a, "loop")
	gb := newTestGroup(t, b, "loop")
	stop := make(chan struct{})
	defer close(stop)
	go serveEcho(gb, stop, nil)
	if err := ga.AppendEntries("b", b.Addr(), &raft.AppendEntriesRequest{RPCHeader: testHeader("a"), Term: 4}, &resp); err != nil || !resp.Success || resp.Term != 4 {
		t.Fatalf("heartbeat through the raft loop: %+v %v", resp, err)
	}
	// A peer that is gone fails the heartbeat within the RPC timeout (the
	// group being steady, the first may be answered with the last answer
	// while the connection's end is noticed: TestMuxVouchesForSteadyHeartbeats).
	b.Close()
	start := time.Now()
	for ga.AppendEntries("b", b.Addr(), &raft.AppendEntriesRequest{RPCHeader: testHeader("a"), Term: 4}, &resp) == nil {
		if time.Since(start) > RepeatLiveness {
			t.Fatal("heartbeats to a closed peer still succeed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("heartbeat to a closed peer failed only after %v", d)
	}
}

// An idle leader's commit-index update that repeats what the follower
// acknowledged is answered by the pipeline (commit.go); one
// that says anything new reaches the follower.
func TestMuxPipelineAnswersRepeatedCommitUpdates(t *testing.T) {
	a, b, ga, gb := newTestPair(t)
	stop := make(chan struct{})
	defer close(stop)
	var seen atomic.Int32
	go func() {
		for {
			select {
			case rpc := <-gb.Consumer():
				cmd := rpc.Command.(*raft.AppendEntriesRequest)
				if !isHeartbeat(cmd) {
					seen.Add(1)
				}
				rpc.Respond(&raft.AppendEntriesResponse{Term: cmd.Term, LastLog: cmd.PrevLogEntry + uint64(len(cmd.Entries)), Success: cmd.Term < 9}, nil)
			case <-stop:
				return
			}
		}
	}()
	p, err := ga.AppendEntriesPipeline("b", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send := func(req *raft.AppendEntriesRequest) *raft.AppendEntriesResponse {
		t.Helper()
		if _, err := p.AppendEntries(req, new(raft.AppendEntriesResponse)); err != nil {
			t.Fatal(err)
		}
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatal(err)
			}
			if f.Request() != req {
				t.Fatal("futures out of order")
			}
			return f.Response()
		case <-time.After(5 * time.Second):
			t.Fatal("no answer")
		}
		return nil
	}
	// Repeats are answered here only while b answers heartbeat rounds.
	beat := func() {
		t.Helper()
		if err := ga.AppendEntries("b", b.Addr(), &raft.AppendEntriesRequest{Term: 2, Leader: []byte("a")}, new(raft.AppendEntriesResponse)); err != nil {
			t.Fatal(err)
		}
	}
	beat()
	entries := &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 4, PrevLogTerm: 1, LeaderCommitIndex: 4,
		Entries: []*raft.Log{{Index: 5, Term: 2, Data: []byte("x")}, {Index: 6, Term: 2, Data: []byte("y")}}}
	steps := []struct {
		req  *raft.AppendEntriesRequest
		sent bool // reaches the follower
	}{
		{entries, true},
		// The commit index moved: news.
		{&raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 6, PrevLogTerm: 2, LeaderCommitIndex: 6}, true},
		// Repeats of it: answered here.
		{&raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 6, PrevLogTerm: 2, LeaderCommitIndex: 6}, false},
		{&raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 6, PrevLogTerm: 2, LeaderCommitIndex: 6}, false},
		// Another previous entry, term or commit index: sent.
		{&raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 5, PrevLogTerm: 2, LeaderCommitIndex: 6}, true},
		{&raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 5, PrevLogTerm: 2, LeaderCommitIndex: 6}, true},
		{&raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 5, PrevLogTerm: 2, LeaderCommitIndex: 6}, false},
		// Silence from b's broker: sent.
		{nil, true},
		{&raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 5, PrevLogTerm: 2, LeaderCommitIndex: 6}, false},
		// A refused request forgets what was known: its repeat is sent.
		{&raft.AppendEntriesRequest{Term: 9, PrevLogEntry: 5, PrevLogTerm: 2, LeaderCommitIndex: 6}, true},
		{&raft.AppendEntriesRequest{Term: 9, PrevLogEntry: 5, PrevLogTerm: 2, LeaderCommitIndex: 6}, true},
	}
	for i, s := range steps {
		if s.req == nil {
			a.mu.Lock()
			a.peers[b.Addr()].heard.Store(0)
			a.mu.Unlock()
			before := seen.Load()
			resp := send(&raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 5, PrevLogTerm: 2, LeaderCommitIndex: 6})
			if !resp.Success || seen.Load() == before {
				t.Fatalf("step %d: answer %+v", i, resp)
			}
			beat()
			continue
		}
		before := seen.Load()
		resp := send(s.req)
		if sent := seen.Load() > before; sent != s.sent {
			t.Fatalf("step %d: reached the follower %v, want %v", i, sent, s.sent)
		}
		if want := s.req.Term < 9; resp.Success != want || resp.Term != s.req.Term {
			t.Fatalf("step %d: answer %+v", i, resp)
		}
	}
	if got := a.commitRepeats.Load(); got != 4 {
		t.Fatalf("commitRepeats = %d, want 4", got)
	}
}

// A steady group's heartbeat is answered at once with the peer's last
// answer while it still travels (heartbeats.go); a new term, a
// refusal or a broken connection makes the next one wait for its round.
func TestMuxVouchesForSteadyHeartbeats(t *testing.T) {
	a, b, ga, gb := newTestPair(t)
	var heard atomic.Int32
	var refuse atomic.Bool
	gb.SetHeartbeatHandler(func(rpc raft.RPC) {
		req := rpc.Command.(*raft.AppendEntriesRequest)
		heard.Add(1)
		rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, Success: !refuse.Load()}, nil)
	})
	beat := func(term uint64) (raft.AppendEntriesResponse, time.Duration, error) {
		var resp raft.AppendEntriesResponse
		start := time.Now()
		err := ga.AppendEntries("b", b.Addr(), &raft.AppendEntriesRequest{RPCHeader: testHeader("a"), Term: term, Leader: []byte(a.Addr())}, &resp)
		return resp, time.Since(start), err
	}
	// The first heartbeat of a term waits for its round.
	if resp, d, err := beat(3); err != nil || !resp.Success || d < heartbeatCoalesce/2 {
		t.Fatalf("first heartbeat: %+v after %v, %v; want a success after its round", resp, d, err)
	}
	// The next is vouched for at once, and still reaches the follower.
	if resp, d, err := beat(3); err != nil || !resp.Success || d > heartbeatCoalesce/2 {
		t.Fatalf("steady heartbeat: %+v after %v, %v; want the last answer at once", resp, d, err)
	}
	if a.beatsVouched.Load() != 1 {
		t.Fatalf("%d heartbeats vouched for, want 1", a.beatsVouched.Load())
	}
	testwait.For(t, 2*time.Second, func() bool { return heard.Load() >= 2 }, "the vouched heartbeat never reached the follower")
	// A new term waits.
	if _, d, err := beat(4); err != nil || d < heartbeatCoalesce/2 {
		t.Fatalf("heartbeat of a new term answered after %v (%v); want its round", d, err)
	}
	// A refusal is not vouched for: after it travels, the next one waits
	// and sees the refusal itself.
	refuse.Store(true)
	beat(4) // vouched: the refusal travels in its round
	time.Sleep(3 * heartbeatCoalesce)
	if resp, _, err := beat(4); err != nil || resp.Success {
		t.Fatalf("heartbeat after a refusal: %+v, %v; want the refusal", resp, err)
	}
	// A broken connection ends vouching: a peer that is gone fails.
	refuse.Store(false)
	beat(4)
	if resp, _, err := beat(4); err != nil || !resp.Success {
		t.Fatalf("steady again: %+v, %v", resp, err)
	}
	b.Close()
	testwait.For(t, 3*time.Second, func() bool { _, _, err := beat(4); return err != nil }, "heartbeats to a closed peer still succeed")
}

// Entries' data travel without being copied into the frame when large
// (enc.data, frameWriter.writeParts), small ones inside it; mixed in one
// frame, among frames from other groups on the same connection, every
// byte arrives where it belongs, and a lone entry arrives as its own
// buffer, several entries each as its own.
func TestMuxCarriesLargeEntriesIntact(t *testing.T) {
	a, b := newTestMux(t), newTestMux(t)
	rng := rand.New(rand.NewPCG(1, 2))
	payload := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	sizes := [][]int{{300 << 10}, {10, 200 << 10, 5 << 10, 100, 1 << 20}, {vecMinBytes - 1, vecMinBytes}, {64 << 10, 64 << 10}}
	const groups = 4
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for gi := 0; gi < groups; gi++ {
		id := "big-" + strconv.Itoa(gi)
		ga, gb := newTestGroup(t, a, id), newTestGroup(t, b, id)
		var want [][][]byte
		for _, sz := range sizes {
			var entries [][]byte
			for _, n := range sz {
				entries = append(entries, payload(n))
			}
			want = append(want, entries)
		}
		stop := make(chan struct{})
		t.Cleanup(func() { close(stop) })
		go func() {
			for k := 0; ; k++ {
				select {
				case rpc := <-gb.Consumer():
					req := rpc.Command.(*raft.AppendEntriesRequest)
					if len(req.Entries) != len(want[k]) {
						errs <- fmt.Errorf("%s frame %d: %d entries, want %d", id, k, len(req.Entries), len(want[k]))
					}
					for i, e := range req.Entries {
						if i < len(want[k]) && !bytes.Equal(e.Data, want[k][i]) {
							errs <- fmt.Errorf("%s frame %d entry %d: %d bytes differ from the %d sent", id, k, i, len(e.Data), len(want[k][i]))
						}
						if cap(e.Data) != len(e.Data) {
							errs <- fmt.Errorf("%s frame %d entry %d shares its buffer past its end", id, k, i)
						}
					}
					rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, Success: true}, nil)
				case <-stop:
					return
				}
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k, entries := range want {
				req := &raft.AppendEntriesRequest{RPCHeader: testHeader("a"), Term: 1, PrevLogEntry: uint64(k * 10)}
				for i, d := range entries {
					req.Entries = append(req.Entries, &raft.Log{Index: uint64(k*10 + i + 1), Term: 1, Type: raft.LogCommand, Data: d})
				}
				var resp raft.AppendEntriesResponse
				if err := ga.AppendEntries("b", b.Addr(), req, &resp); err != nil || !resp.Success {
					errs <- fmt.Errorf("%s frame %d: %+v %v", id, k, resp, err)
				}
			}
		}()
	}
	// Every check on the receiving side runs before its RPC is answered,
	// so all errors are in once the senders are done.
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A forwarded request whose handler never returns (it waits on a raft
// future a shut-down raft never answers) does not hold Close: the Mux
// waits fwdCloseWait for it, then leaves it behind. The sender gets an
// error, not a hang.
func TestMuxCloseDoesNotWaitForeverForAForward(t *testing.T) {
	a, b := newTestMux(t), newTestMux(t)
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	b.SetForwardHandler(func([]byte) ([]byte, error) {
		close(entered)
		<-release
		return nil, nil
	})
	fwdErr := make(chan error, 1)
	go func() {
		_, err := a.Forward(b.Addr(), []byte("x"), 30*time.Second)
		fwdErr <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the forward never reached its handler")
	}
	start := time.Now()
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(fwdCloseWait + 10*time.Second):
		t.Fatal("Close waited for a forwarded request that never ends")
	}
	if took := time.Since(start); took < fwdCloseWait {
		t.Fatalf("Close took %v: did not wait for the forward at all", took)
	}
	select {
	case err := <-fwdErr:
		if err == nil {
			t.Fatal("the forward succeeded although its broker closed")
		}
	case <-time.After(35 * time.Second):
		t.Fatal("the sender hangs")
	}
}

// LatencyHist buckets durations by their upper bounds, cumulatively, as
// Prometheus histograms are exported.
func TestLatencyHist(t *testing.T) {
	var h LatencyHist
	for _, d := range []time.Duration{500 * time.Microsecond, time.Millisecond, 30 * time.Millisecond, 3 * time.Second, time.Minute} {
		h.Observe(d)
	}
	buckets, count, sum := h.Snapshot()
	if count != 5 {
		t.Fatalf("count %d, want 5", count)
	}
	for bound, want := range map[float64]uint64{0.001: 2, 0.005: 2, 0.05: 3, 2: 3, 4: 4, 8: 4} {
		if buckets[bound] != want {
			t.Errorf("bucket le=%v holds %d, want %d", bound, buckets[bound], want)
		}
	}
	if want := (500*time.Microsecond + time.Millisecond + 30*time.Millisecond + 3*time.Second + time.Minute).Seconds(); sum < want-1e-9 || sum > want+1e-9 {
		t.Fatalf("sum %v, want %v", sum, want)
	}
}

// A group's RPC in flight ends when its transport closes (a group being
// shut down does not wait out its RPCs' timeouts), and a peer refuses at
// once a request for a group it closed (instead of waiting
// unknownGroupWait for one about to open).
func TestMuxClosedGroupsEndRPCsAtOnce(t *testing.T) {
	a, b := newTestMuxTimeout(t, 5*time.Second), newTestMux(t)
	ga := newTestGroup(t, a, "gone-0")
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		var rv raft.RequestVoteResponse
		// b never opens gone-0: b holds the request unknownGroupWait.
		errc <- ga.RequestVote("b", b.Addr(), &raft.RequestVoteRequest{RPCHeader: testHeader("a"), Term: 3}, &rv)
	}()
	// Close once the request is pending on the connection.
	testwait.For(t, 2*time.Second, func() bool {
		a.mu.Lock()
		p := a.peers[b.Addr()]
		a.mu.Unlock()
		if p == nil {
			return false
		}
		l := p.lanes[len(p.lanes)-1]
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.cc == nil {
			return false
		}
		l.cc.mu.Lock()
		defer l.cc.mu.Unlock()
		return len(l.cc.pending) > 0
	}, "the vote to be in flight")
	ga.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("vote of a closed group: %v, want ErrClosed", err)
		}
		if d := time.Since(start); d > unknownGroupWait-200*time.Millisecond {
			t.Fatalf("vote ended %v after it started: it waited for the peer, not for the close", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("vote of a closed group still waiting after 10 s")
	}

	// b closes a group it had: a's requests for it are refused at once.
	newTestGroup(t, a, "moved-0")
	gb := newTestGroup(t, b, "moved-0")
	gb.Close()
	a.mu.Lock()
	gm := a.groups["moved-0"]
	a.mu.Unlock()
	start = time.Now()
	var rv raft.RequestVoteResponse
	err := gm.RequestVote("b", b.Addr(), &raft.RequestVoteRequest{RPCHeader: testHeader("a"), Term: 3}, &rv)
	if !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "closed here") {
		t.Fatalf("vote for a group the peer closed: %v", err)
	}
	if d := time.Since(start); d > unknownGroupWait/2 {
		t.Fatalf("refused after %v: the peer waited for a group it had closed", d)
	}
}
