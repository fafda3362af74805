package replication

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The metadata quorum as Kafka's DescribeQuorum (API 55) reports it, so
// that kafka-metadata-quorum describe --status / --replication work.
//
// Kafka's KRaft leader knows each voter's fetch offset because voters
// fetch from it; hashicorp/raft keeps its followers' match indexes to
// itself. So the controller asks every member of the metadata group over
// the Mux (a forwarded request, quorumSelf) for its own last log index,
// which is its log end offset (a raft index, as Kafka's offsets in
// __cluster_metadata are record offsets: comparable among the replicas,
// not with Kafka's). LastFetchTimestamp is when the controller's Mux last
// heard from that broker; LastCaughtUpTimestamp is the time of its
// answer when its log reached the commit index read before asking, else
// -1 (unknown). A broker that is not the controller forwards the whole
// request to it.

// QuorumReplica is one member of the metadata quorum.
type QuorumReplica struct {
	NodeID int32 `json:"id"`
	// Addr is its replication listener (controller.quorum.voters).
	Addr string `json:"addr"`
	// LogEndOffset is its raft log's last index; -1 when it did not answer.
	LogEndOffset int64 `json:"leo"`
	// LastFetch and LastCaughtUp are Unix milliseconds; -1 = unknown.
	LastFetch    int64 `json:"fetch"`
	LastCaughtUp int64 `json:"caughtUp"`
}

// QuorumState is the metadata quorum as its leader sees it.
type QuorumState struct {
	LeaderID      int32           `json:"leader"`
	LeaderEpoch   int32           `json:"epoch"` // the raft term
	HighWatermark int64           `json:"hw"`    // the commit index
	Voters        []QuorumReplica `json:"voters"`
	Observers     []QuorumReplica `json:"observers"` // non-voters
}

// quorumSelfAnswer is one member's own raft position.
type quorumSelfAnswer struct {
	LastIndex uint64 `json:"last"`
}

// quorumAskTimeout bounds the controller's question to each member.
const quorumAskTimeout = 2 * time.Second

// Quorum returns the metadata quorum's state, from the controller
// (forwarded to it when this broker is not). ErrNotController when there
// is none or it cannot be reached.
func (q *metadataQuorum) Quorum(ctx context.Context) (QuorumState, error) {
	if q.closed.Load() {
		return QuorumState{}, ErrShuttingDown
	}
	if q.raft.State() == raft.Leader {
		return q.quorumLocal(ctx)
	}
	timeout := 2 * quorumAskTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	resp, err := q.forward(forwardRequest{Quorum: quorumDescribe}, timeout)
	if err != nil {
		return QuorumState{}, err
	}
	if resp.Quorum == nil {
		return QuorumState{}, fmt.Errorf("%w: the controller does not describe the quorum (an older version)", ErrNotController)
	}
	return *resp.Quorum, nil
}

// Forwarded quorum requests (forwardRequest.Quorum).
const (
	quorumDescribe = "describe" // to the controller: the whole QuorumState
	quorumSelf     = "self"     // to a member: its quorumSelfAnswer
)

// handleQuorum answers a forwarded quorum request.
func (q *metadataQuorum) handleQuorum(kind string) forwardResponse {
	var resp forwardResponse
	switch kind {
	case quorumSelf:
		resp.Index = q.raft.LastIndex()
	case quorumDescribe:
		if q.raft.State() != raft.Leader {
			err := fmt.Errorf("%w: not the metadata leader", ErrNotController)
			resp.Err, resp.Msg = sentinelName(err), err.Error()
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*quorumAskTimeout)
		defer cancel()
		qs, err := q.quorumLocal(ctx)
		if err != nil {
			resp.Err, resp.Msg = sentinelName(err), err.Error()
			break
		}
		resp.Quorum = &qs
	default:
		err := fmt.Errorf("replication: unknown quorum request %q", kind)
		resp.Err, resp.Msg = sentinelName(err), err.Error()
	}
	return resp
}

// quorumLocal builds the QuorumState on the controller.
func (q *metadataQuorum) quorumLocal(ctx context.Context) (QuorumState, error) {
	f := q.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return QuorumState{}, fmt.Errorf("%w: %v", ErrNotController, err)
	}
	term, _ := strconv.ParseUint(q.raft.Stats()["term"], 10, 32)
	commit := q.raft.CommitIndex()
	qs := QuorumState{LeaderID: q.cfg.NodeID, LeaderEpoch: int32(term), HighWatermark: int64(commit)}
	self := serverID(q.cfg.NodeID)
	servers := f.Configuration().Servers
	replicas := make([]QuorumReplica, len(servers))
	var wg sync.WaitGroup
	for i, srv := range servers {
		r := &replicas[i]
		r.NodeID, r.Addr = parseServerID(srv.ID), string(srv.Address)
		r.LogEndOffset, r.LastFetch, r.LastCaughtUp = -1, -1, -1
		if srv.ID == self {
			now := time.Now().UnixMilli()
			r.LogEndOffset, r.LastFetch, r.LastCaughtUp = int64(q.raft.LastIndex()), now, now
			continue
		}
		if at := q.mux.PeerHeardAt(srv.Address); !at.IsZero() {
			r.LastFetch = at.UnixMilli()
		}
		wg.Add(1)
		go func(addr raft.ServerAddress) {
			defer wg.Done()
			last, err := q.askQuorumSelf(ctx, addr)
			if err != nil {
				return
			}
			r.LogEndOffset = int64(last)
			if last >= commit {
				r.LastCaughtUp = time.Now().UnixMilli()
			}
		}(srv.Address)
	}
	wg.Wait()
	for i, srv := range servers {
		if srv.Suffrage == raft.Voter {
			qs.Voters = append(qs.Voters, replicas[i])
		} else {
			qs.Observers = append(qs.Observers, replicas[i])
		}
	}
	for _, l := range [][]QuorumReplica{qs.Voters, qs.Observers} {
		sort.Slice(l, func(i, j int) bool { return l[i].NodeID < l[j].NodeID })
	}
	return qs, nil
}

// askQuorumSelf asks the member at addr for its raft log's last index.
func (q *metadataQuorum) askQuorumSelf(ctx context.Context, addr raft.ServerAddress) (uint64, error) {
	timeout := quorumAskTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	body, err := json.Marshal(forwardRequest{Quorum: quorumSelf})
	if err != nil {
		return 0, err
	}
	out, err := q.mux.Forward(addr, body, timeout)
	if err != nil {
		return 0, err
	}
	var resp forwardResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return 0, err
	}
	if resp.Err != "" {
		return 0, sentinelError(resp.Err, resp.Msg)
	}
	return resp.Index, nil
}
