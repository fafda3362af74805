package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// The raft.Transport of one group.

// Group is one Raft group's raft.Transport over the Mux.
type Group struct {
	m         *Mux
	id        string
	consumeCh chan raft.RPC
	shutdown  chan struct{}
	closeOnce sync.Once

	hbMu sync.Mutex
	hb   func(raft.RPC) // protected by hbMu

	catchUp atomic.Pointer[catchUp] // catchup.go
	// watch is the group's raft as the transport follows it (Attach;
	// catchup.go); nil: AppendEntries never wait for a peer.
	watch atomic.Pointer[raftWatch]

	// voteTerm and leadTerm are the highest term this group asked votes
	// for and sent AppendEntries at as a leader: each new one counts an
	// election or a leadership won here (Mux.metaCounts, partCounts;
	// replication's metrics.go).
	voteTerm, leadTerm atomic.Uint64
	// election gates its pre-vote rounds (elections.go).
	election electionGate
	// beatTerm is the highest heartbeat term handled for this group
	// (handleHeartbeats): one above it may make raft persist a new term.
	beatTerm atomic.Uint64
	// lastBeat is when the group last handled a heartbeat (unix nanos).
	lastBeat atomic.Int64
	// join holds a joining replica's votes back (join_gate.go); nil once
	// it has caught up, or when it never joined.
	join atomic.Pointer[joinGate]
	// matches is each follower's last matched index (join_gate.go).
	matches followerMatch
}

// countTerm raises *seen to term and reports whether term was new.
func countTerm(seen *atomic.Uint64, term uint64) bool {
	for {
		old := seen.Load()
		if term <= old {
			return false
		}
		if seen.CompareAndSwap(old, term) {
			return true
		}
	}
}

// raftCounters counts raft events of one kind of group (replication's metrics.go).
type raftCounters struct {
	elections, preVotes, leaderChanges atomic.Uint64
}

// counters is where g's events count: the metadata group's apart from
// the partitions'.
func (g *Group) counters() *raftCounters {
	if g.id == MetadataGroup {
		return &g.m.metaCounts
	}
	return &g.m.partCounts
}

var (
	_ raft.Transport   = (*Group)(nil)
	_ raft.WithPreVote = (*Group)(nil)
	_ raft.WithClose   = (*Group)(nil)
)

// ID is the group id.
func (g *Group) ID() string { return g.id }

func (g *Group) Consumer() <-chan raft.RPC     { return g.consumeCh }
func (g *Group) LocalAddr() raft.ServerAddress { return g.m.addr }

func (g *Group) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	g.hbMu.Lock()
	g.hb = cb
	g.hbMu.Unlock()
}

func (g *Group) heartbeatFn() func(raft.RPC) {
	g.hbMu.Lock()
	defer g.hbMu.Unlock()
	return g.hb
}

func (g *Group) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte {
	return []byte(addr)
}

func (g *Group) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }

// Close unregisters the group and ends its RPCs in flight; raft calls it
// at the end of Shutdown, and partitionGroup.shutdown first, so that raft's
// goroutines do not wait out their RPCs' timeouts.
func (g *Group) Close() error {
	g.closeOnce.Do(func() {
		close(g.shutdown)
		g.m.mu.Lock()
		if g.m.groups[g.id] == g {
			delete(g.m.groups, g.id)
			g.m.noteClosedLocked(g.id)
		}
		g.m.mu.Unlock()
	})
	return nil
}

// Recently closed groups. A request for a group this broker does not have
// waits unknownGroupWait for it to open (dispatch): a new partition's
// first messages can arrive before this broker applied its creation. A
// group closed here (its topic deleted, the replica moved away) is not
// about to open: its requests, from a peer that has not applied the
// deletion yet, are refused at once, or every RPC of the peer's group
// waited 2 s, and the peer's shutdown of that group with it.
const (
	closedGroupMemory = time.Minute
	maxClosedGroups   = 16384
)

// noteClosedLocked records id as closed now (m.mu held), forgetting the
// oldest entries past closedGroupMemory or maxClosedGroups.
func (m *Mux) noteClosedLocked(id string) {
	now := time.Now()
	if len(m.closedGroups) >= maxClosedGroups {
		for k, at := range m.closedGroups {
			if now.Sub(at) > closedGroupMemory || len(m.closedGroups) >= maxClosedGroups {
				delete(m.closedGroups, k)
			}
		}
	}
	m.closedGroups[id] = now
}

// closedRecently reports whether group id was closed here within
// closedGroupMemory and not opened again.
func (m *Mux) closedRecently(id []byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.closedGroups[string(id)]
	return ok && time.Since(at) < closedGroupMemory
}

func (g *Group) closed() bool {
	select {
	case <-g.shutdown:
		return true
	default:
		return false
	}
}

// rpc sends one request and waits for its answer, at most timeout: on
// the control lane when control is set (conn, "Lanes").
func (g *Group) rpc(target raft.ServerAddress, kind byte, req, resp any, control bool, timeout time.Duration) error {
	if g.closed() {
		return ErrClosed
	}
	cc, err := g.m.conn(target, g.id, control || g.id == MetadataGroup)
	if err != nil {
		return err
	}
	cl, err := cc.start(kind, g.id, req, resp)
	if err != nil {
		return err
	}
	return cc.waitOr(cl, timeout, g.shutdown)
}

// voteTimeout bounds a vote or pre-vote RPC (voteRPCTimeout).
func (g *Group) voteTimeout() time.Duration {
	return min(voteRPCTimeout, g.m.cfg.RPCTimeout)
}

func (g *Group) AppendEntries(_ raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if countTerm(&g.leadTerm, args.Term) {
		g.counters().leaderChanges.Add(1)
		// A leader hears no heartbeats: its gap, once it follows
		// again, starts at the next one it handles.
		g.lastBeat.Store(0)
	}
	if isHeartbeat(args) {
		return g.heartbeat(target, args, resp)
	}
	err := g.rpc(target, kindAppendEntries, args, resp, false, g.m.cfg.RPCTimeout)
	if errors.Is(err, errDial) && g.waitPeer(target) {
		// The peer is back: send now rather than fail, which would make
		// raft back off from it (catchup.go).
		err = g.rpc(target, kindAppendEntries, args, resp, false, g.m.cfg.RPCTimeout)
	}
	g.noteMatch(target, args, resp, err)
	return err
}

func (g *Group) RequestVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := g.joinCampaign(); err != nil {
		return err
	}
	if countTerm(&g.voteTerm, args.Term) {
		g.counters().elections.Add(1)
	}
	return g.rpc(target, kindRequestVote, args, resp, true, g.voteTimeout())
}

func (g *Group) RequestPreVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if g.joinCampaign() != nil || !g.admitPreVote() {
		refusePreVote(args, resp)
		return nil
	}
	err := g.rpc(target, kindRequestPreVote, args, resp, true, g.voteTimeout())
	g.endPreVote(err == nil && resp.Granted)
	return err
}

func (g *Group) TimeoutNow(_ raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return g.rpc(target, kindTimeoutNow, args, resp, true, g.m.cfg.RPCTimeout)
}

// InstallSnapshot streams a snapshot on a connection of its own, so that
// a large snapshot never delays the heartbeats of other groups.
func (g *Group) InstallSnapshot(_ raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if g.closed() {
		return ErrClosed
	}
	c, err := g.m.dial(target, muxModeSnapshot)
	if err != nil {
		return err
	}
	defer c.Close()
	timeout := snapshotTimeout(g.m.cfg.RPCTimeout, args.Size)
	c.SetDeadline(time.Now().Add(timeout))
	fw := &frameWriter{c: c, w: bufio.NewWriterSize(c, 256<<10), timeout: timeout}
	fw.waiting.Add(1) // hold the flush until the data follows the frame
	if err := fw.writeMsg(kindInstallSnapshot, 1, []byte(g.id), args); err != nil {
		return err
	}
	n, err := io.Copy(fw.w, io.LimitReader(data, args.Size))
	if err != nil {
		return fmt.Errorf("replication: stream snapshot to %s: %w", target, err)
	}
	if n != args.Size {
		return fmt.Errorf("replication: snapshot for %s is %d bytes, announced %d", target, n, args.Size)
	}
	if err := fw.w.Flush(); err != nil {
		return fmt.Errorf("replication: stream snapshot to %s: %w", target, err)
	}
	f, _, err := readFrame(bufio.NewReader(c), nil)
	if err != nil {
		return fmt.Errorf("replication: snapshot answer from %s: %w", target, err)
	}
	switch f.kind {
	case kindResponse:
		if err := decodeRPC(f.body, resp); err != nil {
			return err
		}
		return checkResponse(resp)
	case kindError:
		return fmt.Errorf("%w: %s", ErrRemote, f.body)
	}
	return fmt.Errorf("%w: response kind %d", ErrCodec, f.kind)
}
