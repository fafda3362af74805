package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// rawFrame encodes one Mux frame carrying msg for group.
func rawFrame(t testing.TB, kind byte, reqID uint64, group string, msg any) []byte {
	t.Helper()
	e := &enc{b: make([]byte, frameHeaderBytes)}
	e.u64(uint64(len(group)))
	e.b = append(e.b, group...)
	if !encodeRPC(e, msg) {
		t.Fatalf("cannot encode %T", msg)
	}
	binary.BigEndian.PutUint32(e.b[0:4], uint32(len(e.b)-4))
	e.b[4] = kind
	binary.BigEndian.PutUint64(e.b[5:13], reqID)
	return e.b
}

func rawPreface(version, mode byte, id string) []byte {
	return append(append([]byte(muxMagic), version, mode, byte(len(id))), id...)
}

// dialRaw opens a raw connection to m and sends the preface.
func dialRaw(t *testing.T, m *Mux, preface []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", string(m.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(preface); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedByPeer reports whether the far side closes c within a few
// seconds (reading whatever it answered first).
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

func validConfig() []byte {
	return raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{
		{ID: "1", Address: "127.0.0.1:1"}, {ID: "2", Address: "127.0.0.1:2"}}})
}

// TestMuxRefusesForgedFrames: issue 19's forged replication frames never
// reach raft. Each case runs on a fresh connection; the group's raft
// (its consumer channel) must see nothing but the one valid request.
func TestMuxRefusesForgedFrames(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMux(Config{Listener: ln, Logger: slog.New(slog.DiscardHandler), LocalID: "3",
		Admit: func(id string) error {
			if id == "1" || id == "2" {
				return nil
			}
			return ErrRefused
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	g := newTestGroup(t, m, MetadataGroup)
	h1 := raft.RPCHeader{ProtocolVersion: 3, ID: []byte("1"), Addr: []byte("127.0.0.1:1")}
	ae := func(term uint64, entries ...*raft.Log) *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{RPCHeader: h1, Term: term, Leader: h1.Addr, PrevLogEntry: 10, PrevLogTerm: 1, Entries: entries, LeaderCommitIndex: 10}
	}
	cases := []struct {
		name    string
		preface []byte
		frame   []byte
	}{
		{"transport version 1 (no identity)", append([]byte(muxMagic), 1, muxModeRPC), rawFrame(t, kindAppendEntries, 1, MetadataGroup, ae(2))},
		{"a node neither voter nor broker", rawPreface(muxProtocolVersion, muxModeRPC, "9"), rawFrame(t, kindAppendEntries, 1, MetadataGroup, ae(2))},
		{"no identity", rawPreface(muxProtocolVersion, muxModeRPC, ""), rawFrame(t, kindForward, 1, "", &rawMsg{b: []byte(`{}`)})},
		{"configuration entry 0xc1", rawPreface(muxProtocolVersion, muxModeRPC, "1"),
			rawFrame(t, kindAppendEntries, 1, MetadataGroup, ae(2, &raft.Log{Index: 11, Term: 2, Type: raft.LogConfiguration, Data: []byte{0xc1}}))},
		{"configuration without voters", rawPreface(muxProtocolVersion, muxModeRPC, "1"),
			rawFrame(t, kindAppendEntries, 1, MetadataGroup, ae(2, &raft.Log{Index: 11, Term: 2, Type: raft.LogConfiguration,
				Data: raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Nonvoter, ID: "1", Address: "a"}}})}))},
		{"entry of unknown type", rawPreface(muxProtocolVersion, muxModeRPC, "1"),
			rawFrame(t, kindAppendEntries, 1, MetadataGroup, ae(2, &raft.Log{Index: 11, Term: 2, Type: raft.LogType(77)}))},
		{"entries out of order", rawPreface(muxProtocolVersion, muxModeRPC, "1"),
			rawFrame(t, kindAppendEntries, 1, MetadataGroup, ae(2, &raft.Log{Index: 13, Term: 2, Type: raft.LogCommand}))},
		{"term above int32", rawPreface(muxProtocolVersion, muxModeRPC, "1"), rawFrame(t, kindAppendEntries, 1, MetadataGroup, ae(math.MaxInt32+1))},
		{"heartbeat term above int32", rawPreface(muxProtocolVersion, muxModeRPC, "1"),
			rawFrame(t, kindHeartbeats, 1, "", &beatRequests{beats: []beat{{group: MetadataGroup, req: &raft.AppendEntriesRequest{RPCHeader: h1, Term: 1 << 40}}}})},
		{"vote term above int32", rawPreface(muxProtocolVersion, muxModeRPC, "1"),
			rawFrame(t, kindRequestVote, 1, MetadataGroup, &raft.RequestVoteRequest{RPCHeader: h1, Term: 1 << 33})},
		{"another node's ID in the header", rawPreface(muxProtocolVersion, muxModeRPC, "2"), rawFrame(t, kindAppendEntries, 1, MetadataGroup, ae(2))},
		{"snapshot whose configuration does not decode", rawPreface(muxProtocolVersion, muxModeSnapshot, "1"),
			rawFrame(t, kindInstallSnapshot, 1, MetadataGroup, &raft.InstallSnapshotRequest{RPCHeader: h1, SnapshotVersion: 1, Term: 2,
				LastLogIndex: 20, LastLogTerm: 2, Configuration: []byte{0xc1}, ConfigurationIndex: 1, Size: 25})},
		{"snapshot of version 0", rawPreface(muxProtocolVersion, muxModeSnapshot, "1"),
			rawFrame(t, kindInstallSnapshot, 1, MetadataGroup, &raft.InstallSnapshotRequest{RPCHeader: h1, Term: 2,
				LastLogIndex: 20, LastLogTerm: 2, Peers: []byte{0xc1}, Size: 25})},
	}
	for _, tc := range cases {
		c := dialRaw(t, m, tc.preface)
		c.Write(tc.frame)
		c.Write(make([]byte, 25)) // a snapshot's payload
		if !closedByPeer(c) {
			t.Errorf("%s: connection not closed", tc.name)
		}
		select {
		case rpc := <-g.Consumer():
			t.Fatalf("%s: raft was handed %T", tc.name, rpc.Command)
		default:
		}
	}
	if n := m.peersRefused.Load(); n != 3 {
		t.Errorf("peers refused: %d, want 3", n)
	}
	if n := m.framesRefused.Load(); n != uint64(len(cases)-3) {
		t.Errorf("frames refused: %d, want %d", n, len(cases)-3)
	}

	// A valid request from an admitted node reaches raft.
	c := dialRaw(t, m, rawPreface(muxProtocolVersion, muxModeRPC, "1"))
	c.Write(rawFrame(t, kindAppendEntries, 7, MetadataGroup, ae(2, &raft.Log{Index: 11, Term: 2, Type: raft.LogConfiguration, Data: validConfig()})))
	select {
	case rpc := <-g.Consumer():
		if _, ok := rpc.Command.(*raft.AppendEntriesRequest); !ok {
			t.Fatalf("raft was handed %T", rpc.Command)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a valid AppendEntries did not reach raft")
	}
}

// TestMuxRefusesAnswersWithHugeTerms: an answer carrying a term above
// int32 fails its call instead of reaching raft (which would step down
// and persist that term).
func TestMuxRefusesAnswersWithHugeTerms(t *testing.T) {
	a, b := newTestMux(t), newTestMux(t)
	ga := newTestGroup(t, a, "g")
	gb := newTestGroup(t, b, "g")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case rpc := <-gb.Consumer():
				rpc.Respond(&raft.RequestVoteResponse{Term: 1 << 40, Granted: true}, nil)
			case <-stop:
				return
			}
		}
	}()
	var resp raft.RequestVoteResponse
	err := ga.RequestVote("b", b.Addr(), &raft.RequestVoteRequest{Term: 3}, &resp)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("vote answer with term 2^40: %v", err)
	}
}

// FuzzMuxDecode feeds arbitrary bodies to the Mux's decoders and, for
// whatever its checks accept, raft's own decoders: nothing may panic, and
// what is accepted encodes back to a body that decodes to the same value.
func FuzzMuxDecode(f *testing.F) {
	for _, v := range sampleRPCs() {
		e := &enc{}
		encodeRPC(e, v)
		f.Add(rpcKindOf(v), e.b)
	}
	e := &enc{}
	encodeRPC(e, &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 1, PrevLogTerm: 1,
		Entries: []*raft.Log{{Index: 2, Term: 2, Type: raft.LogConfiguration, Data: validConfig()}}})
	f.Add(byte(kindAppendEntries), e.b)
	e = &enc{}
	encodeRPC(e, &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 1, PrevLogTerm: 1,
		Entries: []*raft.Log{{Index: 2, Term: 2, Type: raft.LogConfiguration, Data: []byte{0xc1}}}})
	f.Add(byte(kindAppendEntries), e.b)
	f.Fuzz(func(t *testing.T, kind byte, body []byte) {
		for _, v := range fuzzTargets(kind) {
			if err := decodeRPC(body, v); err != nil {
				continue
			}
			if err := checkRequest(v, ""); err != nil {
				continue
			}
			if err := checkResponse(v); err != nil {
				continue
			}
			// raft's decoders behind the checks: these panic on what
			// raft cannot take.
			switch m := v.(type) {
			case *raft.AppendEntriesRequest:
				for _, l := range m.Entries {
					if l.Type == raft.LogConfiguration {
						raft.DecodeConfiguration(l.Data)
					}
				}
			case *raft.InstallSnapshotRequest:
				raft.DecodeConfiguration(m.Configuration)
			}
			e := &enc{}
			if !encodeRPC(e, v) {
				t.Fatalf("cannot encode %T", v)
			}
			again := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			if err := decodeRPC(e.b, again); err != nil {
				t.Fatalf("%T re-encoded does not decode: %v", v, err)
			}
			if !bytes.Equal(e.b, reencode(t, again)) {
				t.Fatalf("%T does not round-trip", v)
			}
		}
	})
}

func reencode(t *testing.T, v any) []byte {
	e := &enc{}
	if !encodeRPC(e, v) {
		t.Fatalf("cannot encode %T", v)
	}
	return e.b
}

// rpcKindOf is a fuzz seed's kind byte (any value: fuzzTargets maps it).
func rpcKindOf(v any) byte {
	for k := byte(0); k < 16; k++ {
		for _, t := range fuzzTargets(k) {
			if reflect.TypeOf(t) == reflect.TypeOf(v) {
				return k
			}
		}
	}
	return 0
}

// fuzzTargets returns fresh values of the types a kind byte selects.
func fuzzTargets(kind byte) []any {
	switch kind % 8 {
	case 0:
		return []any{new(raft.AppendEntriesRequest), new(raft.AppendEntriesResponse)}
	case 1:
		return []any{new(raft.RequestVoteRequest), new(raft.RequestVoteResponse)}
	case 2:
		return []any{new(raft.RequestPreVoteRequest), new(raft.RequestPreVoteResponse)}
	case 3:
		return []any{new(raft.InstallSnapshotRequest), new(raft.InstallSnapshotResponse)}
	case 4:
		return []any{new(beatRequests), new(beatAnswers)}
	case 5:
		return []any{new(raft.TimeoutNowRequest), new(raft.TimeoutNowResponse)}
	case 6:
		return []any{new(rawMsg)}
	}
	return []any{new(raft.AppendEntriesRequest)}
}
