package replication

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/replication/raftconf"
	"github.com/strata-io/strata/replication/raftstore"
	"github.com/strata-io/strata/replication/transport"
)

// The broker's metadata Raft group (doc.go, "Raft design"): setup,
// catching up, proposing commands and forwarding them to the controller.
// What an applied command does on this broker's disk is the replicas'
// (partition_effects.go).

const (
	metadataGroupID      = "__metadata"
	metadataSnapshotDir  = "metadata-snapshots"
	metadataApplyTimeout = 10 * time.Second
	defaultStartTimeout  = 2 * time.Minute
)

// singleVoterTiming is for a metadata group whose only voter is this
// broker: no peer to wait for, so a restart elects itself at once.
var singleVoterTiming = raftconf.Timing{Heartbeat: 50 * time.Millisecond, Election: 50 * time.Millisecond, Commit: 50 * time.Millisecond, Lease: 50 * time.Millisecond}

func serverID(node int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(node))) }

func parseServerID(id raft.ServerID) int32 {
	n, err := strconv.ParseInt(string(id), 10, 32)
	if err != nil {
		return -1
	}
	return int32(n)
}

// openRaft opens the metadata group's stores and transport and starts its
// raft instance (bootstrapping the voters on a fresh store).
func (q *metadataQuorum) openRaft() (err error) {
	cfg := q.cfg
	voters := cfg.Voters
	single := len(voters) == 0 || (len(voters) == 1 && voters[0].NodeID == cfg.NodeID)
	if cfg.ReplicationListener == nil && !single {
		return fmt.Errorf("replication: %d metadata voters but no replication listener", len(voters))
	}
	advertise := cfg.ReplicationAdvertise
	if advertise == "" && cfg.ReplicationListener == nil {
		advertise = "local:0" // never dialed: this node is the only voter
	}
	if len(voters) == 0 {
		addr := advertise
		if addr == "" {
			addr = cfg.ReplicationListener.Addr().String()
		}
		voters = []Voter{{NodeID: cfg.NodeID, Addr: addr}}
	}
	self := false
	servers := make([]raft.Server, 0, len(voters))
	for _, v := range voters {
		if v.NodeID == cfg.NodeID {
			self = true
		}
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: serverID(v.NodeID), Address: raft.ServerAddress(v.Addr)})
	}
	switch {
	case self && cfg.BrokerOnly:
		return fmt.Errorf("replication: node.id %d is a metadata voter but process.roles is broker", cfg.NodeID)
	case !self && !cfg.BrokerOnly:
		return fmt.Errorf("replication: node.id %d is not among the metadata voters (a broker-only node needs process.roles=broker)", cfg.NodeID)
	}

	var closers []func() error
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
	}()
	if cfg.ReplicationListener != nil {
		closers = append(closers, cfg.ReplicationListener.Close)
	}
	rlog, err := raftstore.OpenLogFile(cfg.FS, cfg.DataDir, q.logger)
	if err != nil {
		return err
	}
	closers = append(closers, rlog.Close)
	stable, err := q.openRaftStable(cfg.DataDir, "metadata")
	if err != nil {
		return err
	}
	snaps, err := raftstore.OpenSnapshotStore(cfg.FS, filepath.Join(cfg.DataDir, metadataSnapshotDir), 2)
	if err != nil {
		return err
	}
	mux, err := transport.NewMux(transport.Config{Listener: cfg.ReplicationListener, Advertise: advertise, Dial: cfg.ReplicationDial, Logger: q.cfg.Logger,
		LocalID: string(serverID(cfg.NodeID)), Admit: q.admitPeer, AdmitFrom: q.admitPeerFrom, TLS: cfg.ReplicationTLS, CheckForward: q.checkForward,
		ExpectPeer: q.expectPeer})
	if err != nil {
		return err
	}
	closers = append(closers[:0], mux.Close, rlog.Close) // the Mux owns the listener now
	trans, err := mux.Group(metadataGroupID)
	if err != nil {
		return err
	}
	timing := raftconf.MetadataTiming
	if single {
		timing = singleVoterTiming
	}
	conf := raftconf.New(serverID(cfg.NodeID), timing, q.cfg.Logger)
	// Metadata commands are rare and an image is cheap to snapshot: keep
	// the log short.
	conf.TrailingLogs = 1024
	conf.SnapshotThreshold = 1024
	fsm := newMetadataFSM(q.logger, &q.img, q.local.onApply)
	existing, err := raft.HasExistingState(rlog, stable, snaps)
	if err != nil {
		return err
	}
	if !existing && !cfg.BrokerOnly { // a broker-only node is added by the controller (metadata_roles.go)
		if err := raft.BootstrapCluster(conf, rlog, stable, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
			return fmt.Errorf("replication: bootstrap metadata quorum: %w", err)
		}
	}
	r, err := raft.NewRaft(conf, fsm, rlog, stable, snaps, trans)
	if err != nil {
		return fmt.Errorf("replication: start metadata raft: %w", err)
	}
	// AppendEntries to a voter that is down wait for it to come back
	// rather than pile up failures that raft backs off from, and a voter
	// behind is sent the rest at once, not 64 entries per CommitTimeout
	// (transport/catchup.go).
	trans.SetCatchUp(r)
	q.raft, q.mux, q.rlog, q.fsm, q.fresh = r, mux, rlog, fsm, !existing
	mux.SetForwardHandler(q.handleForward)
	return nil
}

// admitPeer decides whether a broker that names itself id when it
// connects to the replication listener may use it: a metadata voter
// (controller.quorum.voters; every broker is one today) or
// a broker registered in the metadata. Everyone else is refused before a
// byte of their requests is read (transport/server.go). Without TLS the ID is the
// peer's claim; with TLS (BrokerConfig.ReplicationTLS) admitPeer is not
// asked: the node certificate authenticates and admits (transport/tls.go).
func (q *metadataQuorum) admitPeer(id string) error {
	node := parseServerID(raft.ServerID(id))
	if node < 0 || serverID(node) != raft.ServerID(id) {
		return fmt.Errorf("%w: %q is not a node ID", transport.ErrRefused, id)
	}
	for _, v := range q.cfg.Voters {
		if v.NodeID == node {
			return nil
		}
	}
	if img := q.img.Load(); img != nil {
		if _, ok := img.brokers[node]; ok {
			return nil
		}
	}
	return fmt.Errorf("%w: node %d is neither a metadata voter nor a registered broker", transport.ErrRefused, node)
}

// waitCaughtUp waits until the metadata group has a leader and this
// broker's image holds everything the controller had applied when this
// broker started: on the leader, a Barrier; elsewhere a read index asked
// of the controller (readIndex), then the wait until this broker's image
// has applied as many commands. Until then the broker serves nothing
// (NewBroker has not returned: no readiness, Metadata or coordinator
// loading). A broker's own commit index is no such bound: back from an
// outage it learns the leader's commit index only up to the last entry
// it holds, so the entries it missed looked applied here (issue 15: a
// restarted broker answered Metadata with the leaders it had before it
// was killed and loaded a group coordinator from them).
func (q *metadataQuorum) waitCaughtUp() error {
	timeout := q.cfg.StartTimeout
	if timeout <= 0 {
		timeout = defaultStartTimeout
	}
	start := time.Now()
	deadline := start.Add(timeout)
	lastLog := start
	want := int64(-1) // commands applied at the controller (readIndex); -1: not known yet
	var askErr error
	var nextAsk time.Time // a failed ask is repeated 100 ms later
	legacy := false       // the controller does not answer read indexes
	joined := !q.cfg.BrokerOnly
	for time.Now().Before(deadline) {
		if !joined && time.Now().After(nextAsk) {
			// A broker-only node asks the controller to add it (metadata_roles.go).
			if askErr = q.joinQuorum(min(time.Until(deadline), metadataApplyTimeout)); askErr == nil {
				joined = true
			} else {
				nextAsk = time.Now().Add(200 * time.Millisecond)
			}
		}
		switch _, id := q.raft.LeaderWithID(); {
		case q.raft.State() == raft.Leader:
			if err := q.raft.Barrier(metadataApplyTimeout).Error(); err == nil {
				return nil
			}
		case id == "":
		case legacy:
			if ci := q.raft.CommitIndex(); ci > 0 && q.raft.AppliedIndex() >= ci {
				return nil
			}
		case want < 0:
			if time.Now().Before(nextAsk) {
				break
			}
			n, err := q.readIndex(min(time.Until(deadline), metadataApplyTimeout))
			switch {
			case err == nil:
				want = n
			case errors.Is(err, errRejected):
				// A controller from before read indexes refuses the
				// request as a command of no type.
				q.logger.Warn("the controller does not answer read indexes; starting once this broker applied its own commit index", "err", err)
				legacy = true
			default:
				askErr, nextAsk = err, time.Now().Add(100*time.Millisecond)
			}
		default:
			if got := q.img.Load().applied; got >= want {
				q.logger.Info("metadata caught up with the controller", "commands", got, "controller_commands", want,
					"took", time.Since(start).Round(time.Millisecond))
				return nil
			}
		}
		if time.Since(lastLog) > 5*time.Second {
			q.logger.Info("waiting for the metadata quorum", "voters", len(q.cfg.Voters), "state", q.raft.State().String(),
				"commands", q.img.Load().applied, "controller_commands", want, "err", askErr)
			lastLog = time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	if want >= 0 {
		return fmt.Errorf("%w: metadata not caught up after %v (%d commands applied, the controller had %d)",
			ErrNotController, timeout, q.img.Load().applied, want)
	}
	return fmt.Errorf("%w: no metadata quorum after %v", ErrNotController, timeout)
}

// readIndex asks the controller how many metadata commands it has
// applied once everything committed before the question is applied
// there (a Barrier: handleReadIndex). image.applied counts the same on
// every broker at the same place in the log, snapshots included, so this
// broker has caught up with that point once its image counts as many.
func (q *metadataQuorum) readIndex(timeout time.Duration) (int64, error) {
	resp, err := q.forward(forwardRequest{ReadIndex: true}, timeout)
	if err != nil {
		return 0, err
	}
	return resp.Applied, nil
}

// handleReadIndex answers readIndex on the controller.
func (q *metadataQuorum) handleReadIndex() forwardResponse {
	var resp forwardResponse
	var err error
	if q.raft.State() != raft.Leader {
		err = fmt.Errorf("%w: not the metadata leader", ErrNotController)
	} else if err = q.waitFuture(q.raft.Barrier(metadataApplyTimeout)); err != nil {
		switch {
		case errors.Is(err, raft.ErrRaftShutdown):
			err = ErrShuttingDown
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
			err = fmt.Errorf("%w: %v", ErrNotController, err)
		}
	}
	if err != nil {
		resp.Err, resp.Msg = sentinelName(err), err.Error()
		return resp
	}
	resp.Index, resp.Applied = q.raft.CommitIndex(), q.img.Load().applied
	return resp
}

// commitLocked validates c against the current image, has it committed
// by the metadata group (proposed here when this broker is the
// controller, forwarded to the controller otherwise) and waits until it is
// applied here; it returns the image after it (already published). mu
// must be held: it makes validation and proposal one step for this
// broker's writers.
func (q *metadataQuorum) commitLocked(c Command) (*image, error) {
	_, img, err := q.commitCmdLocked(c)
	return img, err
}

// commitCmdLocked is commitLocked returning the command as committed (a
// forwarded producer-ID block gets its start from the controller).
func (q *metadataQuorum) commitCmdLocked(c Command) (Command, *image, error) {
	if _, err := q.img.Load().Apply(c); err != nil {
		return c, nil, err
	}
	if err := q.rlog.Err(); err != nil {
		return c, nil, err // this broker's metadata log is broken: no writes
	}
	if q.raft.State() == raft.Leader {
		img, _, err := q.proposeLocked(c)
		return c, img, err
	}
	resp, err := q.forwardToController(c)
	if err != nil {
		return c, nil, err
	}
	c.ProducerIDStart = resp.PIDStart
	// Read your writes: the caller looks the result up in this broker's
	// image next.
	deadline := time.Now().Add(metadataApplyTimeout)
	for q.fsm.applied.Load() < resp.Index {
		if time.Now().After(deadline) {
			return c, nil, fmt.Errorf("%w: command committed at %d but not applied here yet", ErrNotController, resp.Index)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return c, q.img.Load(), nil
}

// proposeLocked proposes c on this broker, the metadata leader, and waits
// for it to be applied; it returns the image after it and its raft index.
func (q *metadataQuorum) proposeLocked(c Command) (*image, uint64, error) {
	if err := q.rlog.Err(); err != nil {
		return nil, 0, err
	}
	data, err := encodeCommandEntry(c)
	if err != nil {
		return nil, 0, err
	}
	proposed := time.Now()
	f := q.raft.Apply(data, metadataApplyTimeout)
	if err := q.waitFuture(f); err != nil {
		if serr := q.rlog.Err(); serr != nil {
			// The log failed under this or another command (a broker
			// registration in the background) and raft stepped down
			// because of it: the storage error is the cause, not the
			// lost leadership.
			return nil, 0, serr
		}
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return nil, 0, fmt.Errorf("%w: %v", ErrNotController, err)
		}
		if errors.Is(err, raft.ErrRaftShutdown) {
			return nil, 0, ErrShuttingDown
		}
		q.logger.Error("metadata command not committed", "command", c.Type.String(), "err", err)
		return nil, 0, err
	}
	metaCommitLatency.Observe(time.Since(proposed))
	select {
	case q.announce <- struct{}{}:
	default: // a wake-up is pending already
	}
	res, ok := f.Response().(fsmResult)
	if !ok {
		return nil, 0, fmt.Errorf("replication: metadata entry applied without a result")
	}
	return res.img, f.Index(), res.err
}

// announceCommits tells the other brokers at once that a proposal
// committed. A follower learns the commit index from the next
// AppendEntries: the next entry, or up to twice metadataTiming.Commit later
// (200 ms) when none comes. Every broker answers Metadata, leader-epoch
// checks and coordinator lookups from its own image, so for that long the
// others still named the old leader of a partition that moved, or did not
// know a topic just created. After a proposal commits, the controller
// appends a barrier: its AppendEntries goes out at once and carries the
// commit index. Proposals that commit while a barrier is on its way share
// the next one, so a burst costs one or two barriers. Ends when the broker
// closes.
func (q *metadataQuorum) announceCommits() {
	defer close(q.announceDone)
	for {
		select {
		case <-q.stop:
			return
		case <-q.announce:
		}
		if q.raft.State() != raft.Leader {
			continue
		}
		if err := q.waitFuture(q.raft.Barrier(metadataApplyTimeout)); err != nil && !errors.Is(err, raft.ErrRaftShutdown) &&
			!errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrLeadershipLost) {
			q.logger.Warn("metadata commit announcement failed", "err", err)
		}
	}
}

// waitFuture waits for f, or until the broker closes: a raft shutting
// down never answers an entry still in its apply queue, and a caller left
// waiting on it would hold Close (the Mux waits for forwarded requests).
func (q *metadataQuorum) waitFuture(f raft.Future) error { return waitFutureOr(f, q.stop) }

// waitFutureOr waits for f or for stop to close, whichever comes first
// (an answer that is already there wins); after stop, ErrRaftShutdown.
// The goroutine waiting on f is left behind if raft never answers.
func waitFutureOr(f raft.Future, stop <-chan struct{}) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-stop:
		select {
		case err := <-done: // answered meanwhile
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}

// forwardToController sends c to the metadata leader over the Mux and
// returns its answer; a refusal comes back as the controller's sentinel.
func (q *metadataQuorum) forwardToController(c Command) (forwardResponse, error) {
	return q.forward(forwardRequest{Command: c}, metadataApplyTimeout)
}

// forward sends r to the metadata leader over the Mux and returns its
// answer; a refusal comes back as the controller's sentinel.
func (q *metadataQuorum) forward(r forwardRequest, timeout time.Duration) (forwardResponse, error) {
	var resp forwardResponse
	addr, id := q.raft.LeaderWithID()
	if id == "" {
		return resp, fmt.Errorf("%w: no metadata leader", ErrNotController)
	}
	req, err := json.Marshal(r)
	if err != nil {
		return resp, err
	}
	out, err := q.mux.Forward(addr, req, timeout)
	if err != nil {
		return resp, fmt.Errorf("%w: forward to controller %s: %v", ErrNotController, id, err)
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return resp, fmt.Errorf("%w: controller answer: %v", ErrNotController, err)
	}
	if resp.Err != "" {
		return resp, sentinelError(resp.Err, resp.Msg)
	}
	return resp, nil
}

// forwardRequest is a metadata write a broker sends to the controller
// over the Mux; field names are on the wire between brokers.
type forwardRequest struct {
	Command Command `json:"command"`
	// Transfer, when set, is a leadership transfer for the partition's
	// leader (partition_transfer.go) instead of a metadata command.
	Transfer *transferRequest `json:"transfer,omitempty"`
	// ReadIndex, when set, asks for the controller's read index
	// (readIndex) instead.
	ReadIndex bool `json:"readIndex,omitempty"`
	// Quorum, when set, asks about the metadata quorum (metadata_describe_quorum.go).
	Quorum string `json:"quorum,omitempty"`
	// Ext, when set, is a request for the handler registered under that
	// name (metadata_controller_ext.go), Payload its body.
	Ext     string          `json:"ext,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// ExtAny: the Ext request is for this broker, controller or not
	// (AskBroker).
	ExtAny bool `json:"extAny,omitempty"`
	// Join, when set, asks the controller to add a broker-only node to
	// the metadata group as a non-voter (metadata_roles.go).
	Join *joinRequest `json:"join,omitempty"`
}

type forwardResponse struct {
	Err      string `json:"err,omitempty"` // a sentinel's name (sentinels)
	Msg      string `json:"msg,omitempty"`
	Index    uint64 `json:"index"` // raft index of the committed command; a read index's commit index
	PIDStart int64  `json:"pidStart,omitempty"`
	// Applied is a read index's answer: the commands the controller's
	// image has applied (image.applied).
	Applied int64 `json:"applied,omitempty"`
	// Quorum answers a quorumDescribe request (metadata_describe_quorum.go).
	Quorum *QuorumState `json:"quorum,omitempty"`
	// Payload answers an Ext request.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// sentinels are the errors a forwarded write can come back with, by name.
var sentinels = map[string]error{
	"rejected": errRejected, "unknown_topic": ErrUnknownTopicOrPartition, "topic_exists": ErrTopicExists,
	"invalid_topic": ErrInvalidTopic, "invalid_partitions": ErrInvalidPartitions,
	"invalid_rf": ErrInvalidReplicationFactor, "invalid_assignment": ErrInvalidReplicaAssignment,
	"invalid_config": ErrInvalidConfig, "not_controller": ErrNotController, "shutting_down": ErrShuttingDown,
	"storage": ErrMetadataStorage,
}

func sentinelName(err error) string {
	// The specific sentinel first: a rejected command can also wrap one
	// (a create of a topic that exists is TOPIC_ALREADY_EXISTS).
	for name, s := range sentinels {
		if s != errRejected && errors.Is(err, s) {
			return name
		}
	}
	if errors.Is(err, errRejected) {
		return "rejected"
	}
	return "not_controller" // unknown: the client retries
}

func sentinelError(name, msg string) error {
	s, ok := sentinels[name]
	if !ok {
		s = ErrNotController
	}
	if s == ErrTopicExists {
		// Refused by the controller's image: also a rejected command.
		return fmt.Errorf("%w (at the controller: %s): %w", s, msg, errRejected)
	}
	return fmt.Errorf("%w (at the controller: %s)", s, msg)
}

// handleForward runs a write another broker forwarded (Mux goroutine).
func (q *metadataQuorum) handleForward(body []byte) ([]byte, error) {
	var req forwardRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("replication: bad forwarded request: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), metadataApplyTimeout)
	defer cancel()
	var resp forwardResponse
	if req.Transfer != nil {
		return json.Marshal(q.local.handleTransfer(req.Transfer))
	}
	if req.ReadIndex {
		return json.Marshal(q.handleReadIndex())
	}
	if req.Quorum != "" {
		return json.Marshal(q.handleQuorum(req.Quorum))
	}
	if req.Join != nil {
		return json.Marshal(q.handleJoin(req.Join))
	}
	if req.Ext != "" {
		return json.Marshal(q.handleExt(req.Ext, req.Payload, req.ExtAny))
	}
	if req.Command.Type == CmdPartitionLeaders || req.Command.Type == CmdReassignDone {
		// Not under the writer lock (commitReports): a writer holding it
		// may be waiting for these very reports.
		var err error
		if q.raft.State() != raft.Leader {
			err = fmt.Errorf("%w: leadership moved", ErrNotController)
		} else {
			_, resp.Index, err = q.proposeLocked(req.Command)
		}
		if err != nil {
			resp.Err, resp.Msg = sentinelName(err), err.Error()
		}
		return json.Marshal(resp)
	}
	err := q.lockWriter(ctx)
	if err == nil {
		c := req.Command
		if c.Type == CmdAllocateProducerIDs {
			// The block starts where the controller's image says; the
			// forwarding broker's image may be behind.
			c.ProducerIDStart = q.img.Load().nextProducerID
			resp.PIDStart = c.ProducerIDStart
		}
		if _, err = q.img.Load().Apply(c); err == nil {
			if q.raft.State() != raft.Leader {
				err = fmt.Errorf("%w: leadership moved", ErrNotController)
			} else {
				_, resp.Index, err = q.proposeLocked(c)
			}
		}
		q.mu.Unlock()
	}
	if err != nil {
		resp.Err, resp.Msg = sentinelName(err), err.Error()
	}
	return json.Marshal(resp)
}

// migrateMetadataLog carries the commands of a foundation-era
// metadata.log into a fresh metadata group (single voter only), once.
func (q *metadataQuorum) migrateMetadataLog() error {
	path := filepath.Join(q.cfg.DataDir, metadataLogName)
	if _, err := q.cfg.FS.Stat(path); err != nil {
		return nil
	}
	mlog, cmds, err := openMetadataLog(q.cfg.FS, q.cfg.DataDir, q.logger)
	if err != nil {
		return err
	}
	mlog.Close()
	if q.fresh && len(cmds) > 0 {
		if q.raft.State() != raft.Leader {
			return fmt.Errorf("replication: %s from a single-node broker cannot join a multi-voter quorum", metadataLogName)
		}
		for i, c := range cmds {
			if _, err := q.commitLocked(c); err != nil && !errors.Is(err, errRejected) {
				return fmt.Errorf("replication: migrate %s command %d: %w", metadataLogName, i, err)
			}
		}
		q.logger.Info("metadata.log migrated into the metadata raft log", "commands", len(cmds))
	}
	if err := q.cfg.FS.Rename(path, path+".migrated"); err != nil {
		return fmt.Errorf("%w: rename %s: %v", ErrMetadataStorage, path, err)
	}
	return raftstore.SyncDir(q.cfg.FS, q.cfg.DataDir)
}

// MetadataLeader is the node this broker follows as the metadata group's
// leader (the active controller, controller-only or not), -1 when
// unknown. ControllerID is what clients are told instead.
func (q *metadataQuorum) MetadataLeader() int32 {
	if q.raft == nil {
		return -1
	}
	_, id := q.raft.LeaderWithID()
	if id == "" {
		return -1
	}
	return parseServerID(id)
}

// ControllerID is the metadata group's current leader as clients are told
// (reachableController), -1 when unknown.
func (q *metadataQuorum) ControllerID() int32 {
	if q.raft == nil {
		return -1
	}
	_, id := q.raft.LeaderWithID()
	if id == "" {
		return -1
	}
	return q.reachableController(parseServerID(id))
}

// controllerDiskErr refuses a metadata change that creates partitions
// (CreateTopics, CreatePartitions) while this broker is the controller
// and its data directory is below its free-space threshold. Kafka's
// controller answers a metadata log it cannot write with
// UNKNOWN_SERVER_ERROR and the failure's message, and resigns
// (QuorumController: an unexpected fault renounces leadership): here a
// controller with other voters hands its leadership over at once and
// answers NOT_CONTROLLER (the client retries at the new controller); a
// lone controller answers UNKNOWN_SERVER_ERROR (ErrMetadataStorage) with
// the reason. KAFKA_STORAGE_ERROR is not among CreateTopics' errors.
func (q *metadataQuorum) controllerDiskErr() error {
	r := q.raft
	if !q.disk.full.Load() || r == nil || r.State() != raft.Leader {
		return nil
	}
	if metadataVoters(r) > 1 {
		go func() {
			if err := r.LeadershipTransfer().Error(); err == nil {
				q.logger.Info("controller moved off a full log directory")
			}
		}()
		return fmt.Errorf("%w: this controller's log directory is below strata.log.dir.min.free.bytes; the controller moves to another voter", ErrNotController)
	}
	return fmt.Errorf("%w: the controller's log directory %s has %d usable bytes, below strata.log.dir.min.free.bytes=%d",
		ErrMetadataStorage, q.cfg.DataDir, q.disk.free.Load(), q.cfg.MinFreeBytes)
}
