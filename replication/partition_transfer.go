package replication

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication/transport"
)

// Moving partition leadership (doc.go, "Leaders and epochs"): ElectLeaders
// (preferred) and a broker's controlled shutdown hand leadership over with
// raft's leadership transfer: the leader brings the target up to date,
// tells it to start an election at once, and steps down; the target's new
// term is the new leader epoch, reported as any election is.

const (
	// transferTimeout bounds one leadership transfer.
	transferTimeout = 10 * time.Second
	// shutdownHandoffTimeout bounds a broker's handing its leaderships away
	// when it stops (SIGTERM), for all partitions together.
	shutdownHandoffTimeout = 15 * time.Second
)

// transferRequest asks the broker leading a partition to hand its
// leadership to node (forwarded over the Mux). Field names are on the wire.
type transferRequest struct {
	TopicID   [16]byte `json:"t"`
	Partition int32    `json:"p"`
	To        int32    `json:"to"`
}

// transferLocal hands tp's leadership, led here, to node.
func (r *partitionReplicas) transferLocal(tp log.TopicPartition, node int32) error {
	g := r.group(tp)
	if g == nil {
		return fmt.Errorf("%w: %s is not hosted here", ErrNotLeader, tp)
	}
	if g.raft.State() != raft.Leader {
		return fmt.Errorf("%w: %s", ErrNotLeader, tp)
	}
	addr, err := r.meta.peerAddr(node)
	if err != nil {
		return err
	}
	if err := g.raft.LeadershipTransferToServer(serverID(node), addr).Error(); err != nil {
		return fmt.Errorf("%w: %s: transfer to %d: %v", ErrPreferredLeaderNotAvailable, tp, node, err)
	}
	return nil
}

// transfer moves topic-partition's leadership to node, through whichever
// broker leads it now.
func (r *partitionReplicas) transfer(ctx context.Context, t *TopicInfo, partition int32, node int32) error {
	pi := t.Partitions[partition]
	tp := log.TopicPartition{Topic: t.Name, Partition: partition}
	if pi.Leader == r.cfg.NodeID {
		return r.transferLocal(tp, node)
	}
	if pi.Leader < 0 {
		return fmt.Errorf("%w: %s has no leader", ErrPreferredLeaderNotAvailable, tp)
	}
	addr, err := r.meta.peerAddr(pi.Leader)
	if err != nil {
		return err
	}
	body, err := json.Marshal(forwardRequest{Transfer: &transferRequest{TopicID: t.ID, Partition: partition, To: node}})
	if err != nil {
		return err
	}
	timeout := transferTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	out, err := r.mux.Forward(addr, body, timeout)
	if err != nil {
		return fmt.Errorf("%w: %s: leader %d: %v", ErrPreferredLeaderNotAvailable, tp, pi.Leader, err)
	}
	var resp forwardResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return fmt.Errorf("%w: leader answer: %v", ErrPreferredLeaderNotAvailable, err)
	}
	if resp.Err != "" {
		return fmt.Errorf("%w: %s: at leader %d: %s", ErrPreferredLeaderNotAvailable, tp, pi.Leader, resp.Msg)
	}
	return nil
}

// handleTransfer runs a forwarded transferRequest.
func (r *partitionReplicas) handleTransfer(req *transferRequest) forwardResponse {
	var resp forwardResponse
	t, ok := r.meta.img.Load().byID[req.TopicID]
	var err error
	if !ok || req.Partition < 0 || int(req.Partition) >= len(t.Partitions) {
		err = fmt.Errorf("%w: topic id %x partition %d", ErrUnknownTopicOrPartition, req.TopicID, req.Partition)
	} else {
		err = r.transferLocal(log.TopicPartition{Topic: t.Name, Partition: req.Partition}, req.To)
	}
	if err != nil {
		resp.Err, resp.Msg = sentinelName(err), err.Error()
	}
	return resp
}

// handOffLeaderships moves every leadership of a group with other voters
// away from this broker (controlled shutdown; a full log directory,
// partition_disk_space.go), so producers find a new leader in a metadata refresh
// instead of an election timeout. It is
// bounded by shutdownHandoffTimeout and by ctx's deadline, whichever
// comes first: transfers still running then are left to finish or fail
// on their own (raft bounds each by an election timeout).
//
// Each group's leadership goes to a voter whose broker was heard from
// within repeatLiveness (the Mux's liveness signal), spread over those:
// raft's own choice, the most up-to-date follower, may be a broker that
// stopped answering, and the transfer would then hold the group (refusing
// produces) for an election timeout and fail. A group with no live
// voter but this one is not handed over: it cannot elect anyone anyway.
func (r *partitionReplicas) handOffLeaderships(ctx context.Context, reason string) {
	r.groupsMu.RLock()
	var led []*partitionGroup
	for _, g := range r.groups {
		if len(g.voters) > 1 && g.raft.State() == raft.Leader {
			led = append(led, g)
		}
	}
	r.groupsMu.RUnlock()
	if len(led) == 0 || r.mux == nil {
		return
	}
	start := time.Now()
	bound := time.NewTimer(shutdownHandoffTimeout)
	defer bound.Stop()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var mu sync.Mutex
	moved, stranded := 0, 0
	started := 0
dispatch:
	for i, g := range led {
		target, addr, ok := r.liveTransferTarget(g, i)
		if !ok {
			stranded++
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-bound.C:
			break dispatch
		case <-ctx.Done():
			break dispatch
		}
		started++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := g.raft.LeadershipTransferToServer(target, addr).Error(); err == nil {
				mu.Lock()
				moved++
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-bound.C:
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	r.logger.Info("partition leaderships handed off", "reason", reason, "led", len(led), "started", started, "moved", moved,
		"no_live_replica", stranded, "took", time.Since(start).Round(time.Millisecond))
}

// liveTransferTarget picks the voter of g, other than this broker, to hand
// g's leadership to: the i-th (modulo) of those whose broker was heard
// from within handoffFresh, else within repeatLiveness.
func (r *partitionReplicas) liveTransferTarget(g *partitionGroup, i int) (raft.ServerID, raft.ServerAddress, bool) {
	f := g.raft.GetConfiguration()
	if f.Error() != nil {
		return "", "", false
	}
	self := serverID(r.cfg.NodeID)
	for _, within := range []time.Duration{handoffFresh, transport.RepeatLiveness} {
		var live []raft.Server
		for _, srv := range f.Configuration().Servers {
			if srv.Suffrage == raft.Voter && srv.ID != self && r.mux.PeerHeardWithin(srv.Address, within) {
				live = append(live, srv)
			}
		}
		if len(live) > 0 {
			srv := live[i%len(live)]
			return srv.ID, srv.Address, true
		}
	}
	return "", "", false
}

// handoffFresh is how recently a peer must have been heard from to be
// preferred as the target of a leadership handed off at shutdown: a
// follower of a group led here answers its heartbeats every 200-400 ms
// (HeartbeatTimeout/10 to /5 of a partition group), while a peer that
// stopped a moment ago is still within repeatLiveness, and a transfer to
// it fails only after an election timeout.
const handoffFresh = 500 * time.Millisecond
