package groupcoord

import (
	"context"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/coord"
	"github.com/strata-io/strata/replication"
)

// Coordinator is this broker's group coordinator: it routes each group's
// requests to the shard of the __consumer_offsets partition the group
// hashes to, loading that shard when this broker leads the partition (the
// routing, loading and shard goroutines are the core's, internal/coord).
// Methods are safe for concurrent use; each returns an error only when ctx
// ends first (the connection is going away).
type Coordinator struct {
	cfg    Config
	broker *replication.Broker
	core   *coord.Coordinator[*shard]
}

// New returns a coordinator over broker. Nothing is loaded until a request
// for a group arrives.
func New(cfg Config, broker *replication.Broker) *Coordinator {
	c := &Coordinator{cfg: cfg.withDefaults(), broker: broker}
	c.core = coord.New(coord.Config[*shard]{
		Name:              "group coordinator",
		Topic:             OffsetsTopic,
		NumPartitions:     c.cfg.NumPartitions,
		ReplicationFactor: c.cfg.ReplicationFactor,
		TopicConfigs: map[string]string{
			"cleanup.policy":   "compact",
			"compression.type": "producer",
			"segment.bytes":    strconv.FormatInt(c.cfg.SegmentBytes, 10),
		},
		NewState: func(sh *coord.Shard[*shard]) *shard {
			s := newShard(c, sh.Partition(), sh.Epoch())
			s.core = sh
			return s
		},
		TickInterval: c.cfg.TickInterval,
		LoadTimeout:  c.cfg.LoadTimeout,
		// A shard at the placeholder epoch 0 of a partition whose first
		// leader is not recorded yet (replication/doc.go, "Leaders and
		// epochs") would be replaced at the elected epoch, and the members
		// it took in memory (KIP-394's pending member IDs) lost -- a member
		// rejoining with its ID got UNKNOWN_MEMBER_ID. Clients retry the
		// COORDINATOR_LOAD_IN_PROGRESS this answers instead.
		RequireElectedEpoch: true,
		Clock:               coord.WithNow(c.cfg.Clock, c.cfg.Now),
		Logger:              c.cfg.Logger,
	}, broker)
	return c
}

// Close stops every shard and waits for them. Later requests are answered
// NOT_COORDINATOR.
func (c *Coordinator) Close() { c.core.Close() }

// leads reports whether this broker leads partition p at epoch.
func (c *Coordinator) leads(p, epoch int32) bool { return c.core.Leads(p, epoch) }

// routePartition is route for a known partition of the offsets topic: it
// waits (up to the core's LoadWait) for the shard to load.
func (c *Coordinator) routePartition(pi replication.PartitionInfo) (*shard, int16) {
	return state(c.core.RoutePartition(pi))
}

// shardFor returns the shard of a partition this broker leads, starting
// its load (or a reload at a new leader epoch) without waiting for it.
func (c *Coordinator) shardFor(pi replication.PartitionInfo) (*shard, int16) {
	return state(c.core.ShardFor(pi))
}

func state(sh *coord.Shard[*shard], code int16) (*shard, int16) {
	if sh == nil {
		return nil, code
	}
	return sh.State(), code
}

// do runs fn on groupID's shard and returns what it replies, or the
// routing error code (coord.CallKey: followed once to a new leader epoch
// here).
func (c *Coordinator) do(ctx context.Context, groupID string, fn func(s *shard, e *effects, rid uint64)) (kmsg.Response, int16, error) {
	return coord.CallKey(ctx, c.core, groupID, func(s *shard, reply func(kmsg.Response)) { s.call(fn, reply) })
}

func (c *Coordinator) doOn(ctx context.Context, s *shard, code int16, fn func(s *shard, e *effects, rid uint64)) (kmsg.Response, int16, error) {
	var sh *coord.Shard[*shard]
	if s != nil {
		sh = s.core
	}
	return coord.Call(ctx, sh, code, func(s *shard, reply func(kmsg.Response)) { s.call(fn, reply) })
}

// ensureTopic returns the offsets topic, creating it on first use.
func (c *Coordinator) ensureTopic(ctx context.Context) (replication.TopicInfo, error) {
	return c.core.EnsureTopic(ctx)
}

// FindCoordinator answers FindCoordinator (v0-6, batched keys from v4)
// for group keys, creating the offsets topic on first use. Any other key
// type gets COORDINATOR_NOT_AVAILABLE: share keys (type 2) because Strata
// has no share coordinator (share-partition state lives with the
// partitions, package sharepart); transaction keys are txncoord's, which
// protocol asks instead.
func (c *Coordinator) FindCoordinator(ctx context.Context, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, k := range keys {
		co := c.findOne(ctx, req.CoordinatorType, k)
		if req.Version < 4 {
			resp.ErrorCode, resp.ErrorMessage = co.ErrorCode, co.ErrorMessage
			resp.NodeID, resp.Host, resp.Port = co.NodeID, co.Host, co.Port
			break
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return resp
}

func (c *Coordinator) findOne(ctx context.Context, typ int8, key string) kmsg.FindCoordinatorResponseCoordinator {
	co := kmsg.NewFindCoordinatorResponseCoordinator()
	co.Key, co.NodeID, co.Port = key, -1, -1
	fail := func(e *kerr.Error) kmsg.FindCoordinatorResponseCoordinator {
		co.ErrorCode = e.Code
		msg := e.Message
		co.ErrorMessage = &msg
		return co
	}
	if typ != 0 {
		return fail(kerr.CoordinatorNotAvailable)
	}
	return c.core.Find(ctx, key)
}

// JoinGroup answers JoinGroup (v0-9); it may wait for the rebalance.
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest, clientID, clientHost string) (*kmsg.JoinGroupResponse, error) {
	if req.Group == "" {
		return joinError(req.Version, req.MemberID, kerr.InvalidGroupID.Code), nil
	}
	r, code, err := c.do(ctx, req.Group, func(s *shard, e *effects, rid uint64) {
		if s.sgroups[req.Group] != nil {
			e.reply(rid, joinError(req.Version, req.MemberID, kerr.InconsistentGroupProtocol.Code))
			return
		}
		if cg := s.cgroups[req.Group]; cg != nil {
			if len(cg.members) > 0 {
				e.reply(rid, joinError(req.Version, req.MemberID, kerr.InconsistentGroupProtocol.Code))
				return
			}
			// An empty KIP-848 group becomes a classic one (Kafka
			// converts empty groups the same way); its offsets stay.
			e.records = append(e.records, cg.tombstones()...)
			delete(s.cgroups, req.Group)
		}
		g := s.group(req.Group, true)
		g.join(&s.c.cfg, e, s.c.cfg.Now(), rid, joinArgs{req: req, clientID: clientID, clientHost: clientHost})
		s.dropIfGone(req.Group, g)
	})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return joinError(req.Version, req.MemberID, code), nil
	}
	return r.(*kmsg.JoinGroupResponse), nil
}

// SyncGroup answers SyncGroup (v0-5); followers wait for the leader.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, error) {
	fail := func(code int16) *kmsg.SyncGroupResponse {
		r := req.ResponseKind().(*kmsg.SyncGroupResponse)
		r.ErrorCode = code
		return r
	}
	if req.Group == "" {
		return fail(kerr.InvalidGroupID.Code), nil
	}
	r, code, err := c.do(ctx, req.Group, func(s *shard, e *effects, rid uint64) {
		g := s.group(req.Group, false)
		if g == nil {
			e.reply(rid, fail(kerr.UnknownMemberID.Code))
			return
		}
		g.sync(e, s.c.cfg.Now(), rid, req)
	})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return fail(code), nil
	}
	return r.(*kmsg.SyncGroupResponse), nil
}

// Heartbeat answers Heartbeat (v0-4).
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) (*kmsg.HeartbeatResponse, error) {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	_, code, err := c.do(ctx, req.Group, func(s *shard, e *effects, rid uint64) {
		if g := s.group(req.Group, false); g == nil {
			resp.ErrorCode = kerr.UnknownMemberID.Code
		} else {
			resp.ErrorCode = g.heartbeat(s.c.cfg.Now(), req)
		}
		e.reply(rid, resp)
	})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		resp.ErrorCode = code
	}
	return resp, nil
}

// LeaveGroup answers LeaveGroup (v0-5, batched from v3).
func (c *Coordinator) LeaveGroup(ctx context.Context, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, error) {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	ids := req.Members
	if req.Version < 3 {
		ids = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	_, code, err := c.do(ctx, req.Group, func(s *shard, e *effects, rid uint64) {
		g := s.group(req.Group, false)
		if g == nil {
			resp.ErrorCode = kerr.UnknownMemberID.Code
			e.reply(rid, resp)
			return
		}
		codes := g.leave(e, s.c.cfg.Now(), ids)
		if req.Version < 3 {
			resp.ErrorCode = codes[0]
		} else {
			for i, id := range ids {
				resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: id.MemberID, InstanceID: id.InstanceID, ErrorCode: codes[i]})
			}
		}
		e.reply(rid, resp)
	})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		resp.ErrorCode = code
		resp.Members = nil
	}
	return resp, nil
}

// OffsetCommit answers OffsetCommit (v0-10; topic IDs from v10).
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error) {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	// pre holds a per-partition error found before the group is asked
	// (unknown topic or partition, metadata too large); names the topics.
	names := make([]string, len(req.Topics))
	pre := make([][]int16, len(req.Topics))
	for i, t := range req.Topics {
		rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		pre[i] = make([]int16, len(t.Partitions))
		var info replication.TopicInfo
		var ok bool
		if req.Version >= 10 {
			info, ok = c.broker.TopicByID(t.TopicID)
		} else {
			info, ok = c.broker.Topic(t.Topic)
		}
		names[i] = info.Name
		for j, p := range t.Partitions {
			switch {
			case !ok && req.Version >= 10:
				pre[i][j] = kerr.UnknownTopicID.Code
			case !ok || p.Partition < 0 || int(p.Partition) >= len(info.Partitions):
				pre[i][j] = kerr.UnknownTopicOrPartition.Code
			case p.Metadata != nil && len(*p.Metadata) > c.cfg.MaxMetadataBytes:
				pre[i][j] = kerr.OffsetMetadataTooLarge.Code
			}
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: pre[i][j]})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	setAll := func(code int16) {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if pre[i][j] == 0 {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
	}
	if req.Group == "" {
		setAll(kerr.InvalidGroupID.Code)
		return resp, nil
	}
	generation, memberID := req.Generation, req.MemberID
	if req.Version == 0 {
		generation = -1
	}
	_, code, err := c.do(ctx, req.Group, func(s *shard, e *effects, rid uint64) {
		now := s.c.cfg.Now()
		g := s.group(req.Group, false)
		if cg := s.cgroups[req.Group]; cg != nil && len(cg.members) > 0 {
			// A KIP-848 group: the generation is the member epoch.
			if code := cg.commitCheck(req.Version, generation, memberID); code != 0 {
				setAll(code)
				e.reply(rid, resp)
				return
			}
			g = s.group(req.Group, true)
		} else if g == nil {
			if generation >= 0 {
				if req.Version >= 9 {
					setAll(kerr.GroupIDNotFound.Code)
				} else {
					setAll(kerr.IllegalGeneration.Code)
				}
				e.reply(rid, resp)
				return
			}
			g = s.group(req.Group, true)
		} else if code := g.commitCheck(now, req.Version, generation, memberID, req.InstanceID); code != 0 {
			setAll(code)
			s.dropIfGone(req.Group, g)
			e.reply(rid, resp)
			return
		}
		for i, t := range req.Topics {
			for j, p := range t.Partitions {
				if pre[i][j] != 0 {
					continue
				}
				o := offsetEntry{Offset: p.Offset, LeaderEpoch: -1, CommitMs: now.UnixMilli()}
				if req.Version >= 6 {
					o.LeaderEpoch = p.LeaderEpoch
				}
				if p.Metadata != nil {
					o.Metadata = *p.Metadata
				}
				e.records = append(e.records, g.commit(names[i], p.Partition, o))
			}
		}
		s.dropIfGone(req.Group, g)
		e.reply(rid, resp)
	})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		setAll(code)
	}
	return resp, nil
}

// fetchTopic is one topic of an OffsetFetch, by name (and ID for v10).
type fetchTopic struct {
	name       string
	id         [16]byte
	known      bool
	partitions []int32
}

type fetchedPartition struct {
	partition int32
	o         offsetEntry
	found     bool
	code      int16
}

// fetchGroup reads one group's offsets. topics nil = every committed
// offset. With requireStable (KIP-447) a partition with a transactional
// offset commit still pending gets UNSTABLE_OFFSET_COMMIT (txn_offsets.go).
func (c *Coordinator) fetchGroup(ctx context.Context, group string, topics []fetchTopic, requireStable bool) ([]fetchTopic, [][]fetchedPartition, int16, error) {
	var outT []fetchTopic
	var outP [][]fetchedPartition
	_, code, err := c.do(ctx, group, func(s *shard, e *effects, rid uint64) {
		g := s.group(group, false)
		if topics == nil {
			if g != nil {
				for _, t := range g.sortedOffsetTopics() {
					ft := fetchTopic{name: t, known: true}
					if info, ok := c.broker.Topic(t); ok {
						ft.id = info.ID
					}
					var ps []fetchedPartition
					for _, p := range sortedPartitions(g.offsets[t]) {
						fp := fetchedPartition{partition: p, o: g.offsets[t][p], found: true}
						if requireStable && s.isPending(group, t, p) {
							fp.code = kerr.UnstableOffsetCommit.Code
						}
						ps = append(ps, fp)
					}
					outT, outP = append(outT, ft), append(outP, ps)
				}
			}
		} else {
			for _, t := range topics {
				var ps []fetchedPartition
				for _, p := range t.partitions {
					fp := fetchedPartition{partition: p}
					switch {
					case !t.known:
						fp.code = kerr.UnknownTopicID.Code
					case requireStable && s.isPending(group, t.name, p):
						fp.code = kerr.UnstableOffsetCommit.Code
					case g != nil:
						fp.o, fp.found = g.offset(t.name, p)
					}
					ps = append(ps, fp)
				}
				outT, outP = append(outT, t), append(outP, ps)
			}
		}
		e.reply(rid, nil)
	})
	if err == nil && code == 0 {
		// Read, then confirm this broker still leads the group's
		// partition: a coordinator cut off from its peers answers from
		// memory until its lease runs out, while a new one may already
		// have taken newer commits. Confirmed after the read, the answer
		// holds every commit acknowledged before it.
		if pi, ok := c.core.PartitionOf(group); ok {
			if verr := c.broker.VerifyLeader(ctx, OffsetsTopic, pi.Partition); verr != nil {
				return nil, nil, kerr.NotCoordinator.Code, nil
			}
		}
	}
	return outT, outP, code, err
}

// OffsetFetch answers OffsetFetch (v0-10; several groups from v8).
func (c *Coordinator) OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) (*kmsg.OffsetFetchResponse, error) {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		var topics []fetchTopic
		if req.Topics != nil || req.Version < 2 {
			topics = []fetchTopic{}
			for _, t := range req.Topics {
				topics = append(topics, fetchTopic{name: t.Topic, known: true, partitions: t.Partitions})
			}
		}
		ts, ps, code, err := c.fetchGroup(ctx, req.Group, topics, req.Version >= 7 && req.RequireStable)
		if err != nil {
			return nil, err
		}
		if code == 0 && req.Group == "" {
			code = kerr.InvalidGroupID.Code
		}
		if code != 0 {
			if req.Version >= 2 {
				resp.ErrorCode = code
				return resp, nil
			}
			ts, ps = nil, nil
			for _, t := range req.Topics {
				ts = append(ts, fetchTopic{name: t.Topic})
				var fps []fetchedPartition
				for _, p := range t.Partitions {
					fps = append(fps, fetchedPartition{partition: p, code: code})
				}
				ps = append(ps, fps)
			}
		}
		for i, t := range ts {
			rt := kmsg.OffsetFetchResponseTopic{Topic: t.name}
			for _, p := range ps[i] {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.partition, p.code
				fillFetched(&rp.Offset, &rp.LeaderEpoch, &rp.Metadata, p)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	for _, rg := range req.Groups {
		var topics []fetchTopic
		if rg.Topics != nil {
			topics = []fetchTopic{}
			for _, t := range rg.Topics {
				ft := fetchTopic{name: t.Topic, id: t.TopicID, known: true, partitions: t.Partitions}
				if req.Version >= 10 {
					info, ok := c.broker.TopicByID(t.TopicID)
					ft.name, ft.known = info.Name, ok
				}
				topics = append(topics, ft)
			}
		}
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group = rg.Group
		ts, ps, code, err := c.fetchGroup(ctx, rg.Group, topics, req.RequireStable)
		if err != nil {
			return nil, err
		}
		if code == 0 && rg.Group == "" {
			code = kerr.InvalidGroupID.Code
		}
		g.ErrorCode = code
		if code == 0 {
			for i, t := range ts {
				rt := kmsg.OffsetFetchResponseGroupTopic{Topic: t.name, TopicID: t.id}
				for _, p := range ps[i] {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.ErrorCode = p.partition, p.code
					fillFetched(&rp.Offset, &rp.LeaderEpoch, &rp.Metadata, p)
					rt.Partitions = append(rt.Partitions, rp)
				}
				g.Topics = append(g.Topics, rt)
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func fillFetched(off *int64, epoch *int32, meta **string, p fetchedPartition) {
	*off, *epoch = -1, -1
	md := ""
	if p.found {
		*off, *epoch, md = p.o.Offset, p.o.LeaderEpoch, p.o.Metadata
	}
	*meta = &md
}

// DescribeGroups answers DescribeGroups (v0-6). An unknown group is
// described as Dead (v6+: with GROUP_ID_NOT_FOUND, as Kafka 4 does).
func (c *Coordinator) DescribeGroups(ctx context.Context, req *kmsg.DescribeGroupsRequest) (*kmsg.DescribeGroupsResponse, error) {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group, d.State, d.AuthorizedOperations = id, stateDead.String(), -2147483648
		if id == "" {
			d.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		_, code, err := c.do(ctx, id, func(s *shard, e *effects, rid uint64) {
			if s.cgroups[id] != nil || s.sgroups[id] != nil {
				// Not a classic group (Kafka 4 answers the same).
				if req.Version >= 6 {
					d.ErrorCode = kerr.GroupIDNotFound.Code
					msg := "Group " + id + " is not a classic group."
					d.ErrorMessage = &msg
				}
			} else if g := s.group(id, false); g != nil {
				d = g.describe(req.Version)
			} else if req.Version >= 6 {
				d.ErrorCode = kerr.GroupIDNotFound.Code
			}
			e.reply(rid, nil)
		})
		if err != nil {
			return nil, err
		}
		if code != 0 {
			d.ErrorCode = code
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp, nil
}

// ListGroups answers ListGroups (v0-5) with the groups of every partition
// this broker coordinates, filtered by state (v4+) and type (v5+:
// "classic", "consumer" or "share").
func (c *Coordinator) ListGroups(ctx context.Context, req *kmsg.ListGroupsRequest) (*kmsg.ListGroupsResponse, error) {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	t, ok := c.broker.Topic(OffsetsTopic)
	if !ok {
		return resp, nil
	}
	states := map[string]bool{}
	for _, s := range req.StatesFilter {
		states[lower(s)] = true
	}
	types := map[string]bool{}
	for _, s := range req.TypesFilter {
		types[lower(s)] = true
	}
	classic := len(types) == 0 || types["classic"]
	consumer := len(types) == 0 || types["consumer"]
	share := len(types) == 0 || types["share"]
	for _, pi := range t.Partitions {
		if pi.Leader != c.broker.NodeID() {
			continue
		}
		s, code := c.routePartition(pi)
		_, code, err := c.doOn(ctx, s, code, func(s *shard, e *effects, rid uint64) {
			for _, g := range s.groups {
				if !classic || s.cgroups[g.id] != nil || len(states) > 0 && !states[lower(g.state.String())] {
					continue
				}
				resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{
					Group: g.id, ProtocolType: g.protocolType, GroupState: g.state.String(), GroupType: "classic",
				})
			}
			for _, cg := range s.cgroups {
				st := cg.stateName()
				if !consumer || len(states) > 0 && !states[lower(st)] {
					continue
				}
				resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{
					Group: cg.id, ProtocolType: "consumer", GroupState: st, GroupType: "consumer",
				})
			}
			for _, sg := range s.sgroups {
				st := sg.stateName()
				if !share || len(states) > 0 && !states[lower(st)] {
					continue
				}
				resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{
					Group: sg.id, ProtocolType: "share", GroupState: st, GroupType: "share",
				})
			}
			e.reply(rid, nil)
		})
		if err != nil {
			return nil, err
		}
		if code == kerr.CoordinatorLoadInProgress.Code {
			resp.ErrorCode = code
		}
	}
	sort.Slice(resp.Groups, func(i, j int) bool { return resp.Groups[i].Group < resp.Groups[j].Group })
	return resp, nil
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// DeleteGroups answers DeleteGroups (v0-3): only empty groups go; their
// offsets and metadata are tombstoned.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) (*kmsg.DeleteGroupsResponse, error) {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		if id == "" {
			rg.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		one := &kmsg.DeleteGroupsResponse{Groups: []kmsg.DeleteGroupsResponseGroup{rg}}
		_, code, err := c.do(ctx, id, func(s *shard, e *effects, rid uint64) {
			g := s.group(id, false)
			if sg := s.sgroups[id]; sg != nil {
				one.Groups[0].ErrorCode = s.deleteShareGroup(e, sg)
				e.reply(rid, one)
				return
			}
			if cg := s.cgroups[id]; cg != nil {
				if len(cg.members) > 0 {
					one.Groups[0].ErrorCode = kerr.NonEmptyGroup.Code
					e.reply(rid, one)
					return
				}
				e.records = append(e.records, cg.tombstones()...)
				delete(s.cgroups, id)
				if g == nil {
					e.reply(rid, one)
					return
				}
			}
			if g == nil {
				one.Groups[0].ErrorCode = kerr.GroupIDNotFound.Code
			} else {
				recs, code := g.deleteAll()
				one.Groups[0].ErrorCode = code
				e.records = append(e.records, recs...)
				s.dropIfGone(id, g)
			}
			e.reply(rid, one)
		})
		if err != nil {
			return nil, err
		}
		if code != 0 {
			one.Groups[0].ErrorCode = code
		}
		resp.Groups = append(resp.Groups, one.Groups[0])
	}
	return resp, nil
}

// OffsetDelete answers OffsetDelete (v0): offsets of topics the group is
// not subscribed to (any topic, for an empty group) are tombstoned.
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) (*kmsg.OffsetDeleteResponse, error) {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	_, code, err := c.do(ctx, req.Group, func(s *shard, e *effects, rid uint64) {
		g := s.group(req.Group, false)
		switch {
		case g == nil:
			resp.ErrorCode = kerr.GroupIDNotFound.Code
		case g.state != stateEmpty && g.protocolType != "consumer":
			resp.ErrorCode = kerr.NonEmptyGroup.Code
		default:
			var subscribed map[string]bool
			if g.state != stateEmpty {
				subscribed = g.subscribedTopics()
			}
			for _, t := range req.Topics {
				rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
				_, known := c.broker.Topic(t.Topic)
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetDeleteResponseTopicPartition()
					rp.Partition = p.Partition
					switch {
					case !known:
						rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					case subscribed[t.Topic]:
						rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
					default:
						if r, ok := g.deleteOffset(t.Topic, p.Partition); ok {
							e.records = append(e.records, r)
						}
					}
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
		e.reply(rid, resp)
	})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		resp.ErrorCode = code
		resp.Topics = nil
	}
	return resp, nil
}

// ConsumerGroupHeartbeat answers ConsumerGroupHeartbeat (v0-1, KIP-848).
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string) (*kmsg.ConsumerGroupHeartbeatResponse, error) {
	if req.Group == "" {
		return hbError(req.Version, kerr.InvalidRequest.Code, "GroupId can't be empty."), nil
	}
	r, code, err := c.do(ctx, req.Group, func(s *shard, e *effects, rid uint64) {
		if g := s.group(req.Group, false); g != nil && len(g.members) > 0 || s.sgroups[req.Group] != nil {
			e.reply(rid, hbError(req.Version, kerr.GroupIDNotFound.Code, "Group "+req.Group+" is not a consumer group."))
			return
		}
		cg := s.cgroups[req.Group]
		if cg == nil {
			cg = newCGroup(req.Group)
		}
		resp := cg.heartbeat(&s.c.cfg, e, s.c.cfg.Now(), heartbeatArgs{req: req, clientID: clientID, clientHost: clientHost, topicNames: s.c.broker.TopicNames}, s.topicSource)
		if cg.epoch > 0 {
			s.cgroups[req.Group] = cg
		}
		e.reply(rid, resp)
	})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return hbError(req.Version, code, ""), nil
	}
	return r.(*kmsg.ConsumerGroupHeartbeatResponse), nil
}

// ConsumerGroupDescribe answers ConsumerGroupDescribe (v0-1, KIP-848).
func (c *Coordinator) ConsumerGroupDescribe(ctx context.Context, req *kmsg.ConsumerGroupDescribeRequest) (*kmsg.ConsumerGroupDescribeResponse, error) {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	names := func(id [16]byte) string {
		t, _ := c.broker.TopicByID(id)
		return t.Name
	}
	for _, id := range req.Groups {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group, d.AuthorizedOperations = id, -2147483648
		if id == "" {
			d.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		_, code, err := c.do(ctx, id, func(s *shard, e *effects, rid uint64) {
			if cg := s.cgroups[id]; cg != nil {
				d = cg.describe(names)
			} else {
				d.ErrorCode = kerr.GroupIDNotFound.Code
				msg := "Group " + id + " not found."
				if s.groups[id] != nil {
					msg = "Group " + id + " is not a consumer group."
				}
				d.ErrorMessage = &msg
			}
			e.reply(rid, nil)
		})
		if err != nil {
			return nil, err
		}
		if code != 0 {
			d.ErrorCode = code
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp, nil
}
