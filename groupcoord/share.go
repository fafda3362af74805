package groupcoord

import (
	"context"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Share groups (KIP-932): membership and assignment. Members heartbeat
// (ShareGroupHeartbeat) with the topics they subscribe to; the coordinator
// assigns partitions on the server (assignShare: a partition may go to
// many members, the records of a partition being spread by the share
// partitions, not by the assignment) and expires members that miss their
// session timeout. There is no revocation phase: a member's assignment
// moves to its target at its next heartbeat.
//
// Epochs. The group epoch moves whenever membership, a member's
// subscription or the subscribed topics' metadata changes; the target
// assignment is recomputed at the new epoch (assignment epoch); a member
// takes its target and the assignment epoch as its member epoch at its
// next heartbeat. A heartbeat must carry the member's epoch or the one
// before it (its last response may have been lost), else
// FENCED_MEMBER_EPOCH.
//
// States (Kafka's ShareGroupState names): Empty (no members), Stable.

const shareAssignor = "simple"

type sgroup struct {
	id              string
	epoch           int32 // group epoch
	metaHash        int64 // of the subscribed topics' metadata at epoch
	assignmentEpoch int32
	target          map[string]assignment
	members         map[string]*smember
}

type smember struct {
	id                   string
	rackID               *string
	clientID, clientHost string
	subscribed           []string // sorted, distinct
	epoch, prevEpoch     int32
	assigned             assignment
	deadline             time.Time // session expiry
}

func newSGroup(id string) *sgroup {
	return &sgroup{id: id, target: map[string]assignment{}, members: map[string]*smember{}}
}

func (g *sgroup) stateName() string {
	if len(g.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

// shareArgs is one ShareGroupHeartbeat as the shard sees it.
type shareArgs struct {
	req                  *kmsg.ShareGroupHeartbeatRequest
	clientID, clientHost string
}

func shareHBError(code int16, msg string) *kmsg.ShareGroupHeartbeatResponse {
	r := kmsg.NewPtrShareGroupHeartbeatResponse()
	r.Version = 1
	r.ErrorCode = code
	if msg != "" {
		r.ErrorMessage = &msg
	}
	return r
}

// validShareHeartbeat checks a request as Kafka does before it reaches
// the group: the empty string, or an error message with INVALID_REQUEST.
func validShareHeartbeat(req *kmsg.ShareGroupHeartbeatRequest) string {
	switch {
	case strings.TrimSpace(req.GroupID) == "":
		return "GroupId can't be empty."
	case strings.TrimSpace(req.MemberID) == "":
		return "MemberId can't be empty."
	case len(req.MemberID) > 36:
		return "MemberId can't be longer than 36 characters."
	case req.MemberEpoch < -1:
		return "MemberEpoch is invalid."
	case req.RackID != nil && strings.TrimSpace(*req.RackID) == "":
		return "RackId can't be empty."
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return "SubscribedTopicNames must be set in first request."
	}
	return ""
}

// shareHeartbeat runs one heartbeat on the shard: the response, and the
// records it needs written in e.
func (s *shard) shareHeartbeat(e *effects, now time.Time, a shareArgs) *kmsg.ShareGroupHeartbeatResponse {
	cfg := &s.c.cfg
	req := a.req
	id := req.GroupID
	if s.cgroups[id] != nil || s.groups[id] != nil && (len(s.groups[id].members) > 0 || s.groups[id].generation > 0) {
		return shareHBError(kerr.GroupIDNotFound.Code, "Group "+id+" is not a share group.")
	}
	g := s.sgroups[id]
	if req.MemberEpoch == -1 {
		if g == nil || g.members[req.MemberID] == nil {
			return shareHBError(kerr.UnknownMemberID.Code, "")
		}
		s.removeShareMember(e, now, g, req.MemberID)
		r := shareHBError(0, "")
		r.MemberID, r.MemberEpoch = &req.MemberID, -1
		return r
	}
	created := false
	if g == nil {
		if req.MemberEpoch != 0 {
			return shareHBError(kerr.UnknownMemberID.Code, "")
		}
		g, created = newSGroup(id), true
	}
	m := g.members[req.MemberID]
	epochBefore := int32(-1)
	switch {
	case m == nil && req.MemberEpoch != 0:
		return shareHBError(kerr.UnknownMemberID.Code, "")
	case m == nil:
		if len(g.members) >= cfg.ShareMaxSize {
			return shareHBError(kerr.GroupMaxSizeReached.Code, "The share group has reached its maximum capacity of "+strconv.Itoa(cfg.ShareMaxSize)+" members.")
		}
		m = &smember{id: req.MemberID}
		g.members[m.id] = m
		if created {
			s.sgroups[id] = g
		}
	case req.MemberEpoch != 0 && req.MemberEpoch != m.epoch && req.MemberEpoch != m.prevEpoch:
		return shareHBError(kerr.FencedMemberEpoch.Code, "The share group member has a smaller member epoch ("+strconv.Itoa(int(req.MemberEpoch))+") than the one known by the group coordinator ("+strconv.Itoa(int(m.epoch))+").")
	default:
		epochBefore = m.epoch
	}
	session, interval := s.shareTimeouts(id)
	m.deadline = now.Add(session)

	// Member metadata: written when it changes.
	changed := epochBefore < 0 || m.clientID != a.clientID || m.clientHost != a.clientHost
	if req.RackID != nil && (m.rackID == nil || *m.rackID != *req.RackID) {
		r := *req.RackID
		m.rackID, changed = &r, true
	}
	m.clientID, m.clientHost = a.clientID, a.clientHost
	subsChanged := false
	if req.SubscribedTopicNames != nil {
		subs := sortedDistinct(req.SubscribedTopicNames)
		if !equalStrings(subs, m.subscribed) {
			m.subscribed, changed, subsChanged = subs, true, true
		}
	}
	if changed {
		e.records = append(e.records, record{Key: sgMemberKey(id, m.id), Value: sgMemberValue(m)})
	}
	bump := epochBefore < 0 || subsChanged
	if h := s.shareMetaHash(g); h != g.metaHash {
		g.metaHash, bump = h, true
	}
	if bump {
		g.epoch++
		e.records = append(e.records, record{Key: cgKey(keySGMetadata, id, nil), Value: sgMetadataValue(g)})
	}
	if g.assignmentEpoch < g.epoch {
		s.assignShare(e, now, g)
	}
	full := req.SubscribedTopicNames != nil
	if m.epoch != g.assignmentEpoch || epochBefore < 0 {
		m.prevEpoch, m.epoch = m.epoch, g.assignmentEpoch
		m.assigned = g.target[m.id].clone()
		e.records = append(e.records, record{Key: cgKey(keySGCurrent, id, &m.id), Value: sgCurrentValue(m)})
	}
	r := shareHBError(0, "")
	r.MemberID, r.MemberEpoch = &m.id, m.epoch
	r.HeartbeatIntervalMillis = int32(interval.Milliseconds())
	if full || m.epoch != epochBefore {
		as := kmsg.NewShareGroupHeartbeatResponseAssignment()
		for _, t := range sortedTopicIDs(m.assigned) {
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = t, append([]int32{}, m.assigned[t]...)
			as.TopicPartitions = append(as.TopicPartitions, tp)
		}
		r.Assignment = &as
	}
	return r
}

// shareTimeouts is a group's session timeout and heartbeat interval: its
// own (Config.ShareGroupTimeouts) or the broker's.
func (s *shard) shareTimeouts(group string) (session, heartbeat time.Duration) {
	cfg := &s.c.cfg
	session, heartbeat = cfg.ShareSessionTimeout, cfg.ShareHeartbeatInterval
	if f := cfg.ShareGroupTimeouts; f != nil {
		gs, gh := f(group)
		if gs > 0 {
			session = gs
		}
		if gh > 0 {
			heartbeat = gh
		}
	}
	return session, heartbeat
}

// removeShareMember drops a member (left or expired): its records are
// tombstoned, the group epoch moves and the target is recomputed for
// the others.
func (s *shard) removeShareMember(e *effects, now time.Time, g *sgroup, member string) {
	delete(g.members, member)
	delete(g.target, member)
	e.records = append(e.records,
		record{Key: cgKey(keySGCurrent, g.id, &member)},
		record{Key: cgKey(keySGTargetMember, g.id, &member)},
		record{Key: cgKey(keySGMember, g.id, &member)},
	)
	g.epoch++
	g.metaHash = s.shareMetaHash(g)
	e.records = append(e.records, record{Key: cgKey(keySGMetadata, g.id, nil), Value: sgMetadataValue(g)})
	s.assignShare(e, now, g)
	if f := s.c.cfg.ShareMemberGone; f != nil {
		f(g.id, member)
	}
}

// shareTick expires the members whose session timed out.
func (s *shard) shareTick(e *effects, now time.Time) {
	for _, g := range s.sgroups {
		var gone []string
		for id, m := range g.members {
			if !now.Before(m.deadline) {
				gone = append(gone, id)
			}
		}
		sort.Strings(gone)
		for _, id := range gone {
			s.c.cfg.Logger.Info("share group member session expired", "group", g.id, "member", id)
			s.removeShareMember(e, now, g, id)
		}
	}
}

// shareMetaHash hashes the metadata (name, ID, partition count) of the
// topics the members subscribe to: the group epoch moves when it does.
func (s *shard) shareMetaHash(g *sgroup) int64 {
	var names []string
	for _, m := range g.members {
		names = append(names, m.subscribed...)
	}
	h := fnv.New64a()
	for _, n := range sortedDistinct(names) {
		if t, ok := s.topicSource(n); ok {
			h.Write([]byte(n))
			h.Write(t.id[:])
			h.Write([]byte{byte(t.partitions >> 24), byte(t.partitions >> 16), byte(t.partitions >> 8), byte(t.partitions), 0})
		}
	}
	return int64(h.Sum64())
}

// assignShare recomputes the target assignment at the group epoch and
// writes what changed. Per topic, with S subscribers and P partitions,
// there are T = max(S, P) member-partition pairs: every member gets T/S
// of them (or one more), every partition T/P (or one more) -- so S <= P
// spreads the partitions, each to one member, and S > P shares every
// partition among several members, as Kafka's simple assignor balances
// them. Pairs of the previous target are kept where the balance allows
// (shareTopicAssignment), so a member joining or leaving moves few.
func (s *shard) assignShare(e *effects, now time.Time, g *sgroup) {
	subs := map[string][]string{}
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		for _, t := range g.members[id].subscribed {
			subs[t] = append(subs[t], id)
		}
	}
	next := map[string]assignment{}
	for _, id := range ids {
		next[id] = assignment{}
	}
	for name, ms := range subs {
		t, ok := s.topicSource(name)
		if !ok || t.partitions <= 0 {
			continue
		}
		prev := make(map[string][]int32, len(ms))
		for _, id := range ms {
			prev[id] = g.target[id][t.id]
		}
		for id, ps := range shareTopicAssignment(ms, int(t.partitions), prev) {
			for _, p := range ps {
				next[id].add(topicPartition{t.id, p})
			}
		}
	}
	for _, id := range ids {
		if old, ok := g.target[id]; !ok || !old.equal(next[id]) {
			e.records = append(e.records, record{Key: cgKey(keySGTargetMember, g.id, &id), Value: cgTargetValue(next[id])})
		}
	}
	g.target = next
	g.assignmentEpoch = g.epoch
	e.records = append(e.records, record{Key: cgKey(keySGTargetMetadata, g.id, nil), Value: sgTargetMetadataValue(g.assignmentEpoch, now.UnixMilli())})
}

// shareTopicAssignment assigns partitions 0..P-1 of one topic to members
// (sorted IDs): T = max(S, P) pairs, T/S per member (T%S of them one
// more), T/P per partition (T%P of them one more). prev's pairs are kept
// first where both sides have room, then the rest are filled, each
// partition in order going to the member with the fewest pairs (the
// smallest ID on a tie).
func shareTopicAssignment(members []string, P int, prev map[string][]int32) map[string][]int32 {
	S := len(members)
	T := max(S, P)
	baseM, extraM := T/S, T%S
	baseP, extraP := T/P, T%P
	out := make(map[string][]int32, S)
	mCount := make(map[string]int, S)
	pCount := make([]int, P)
	has := map[string]map[int32]bool{}
	pair := func(m string, p int32) {
		out[m] = append(out[m], p)
		mCount[m]++
		pCount[p]++
		if has[m] == nil {
			has[m] = map[int32]bool{}
		}
		has[m][p] = true
	}
	// room reports whether m and p take one more pair, using an extra
	// slot of either side only when allowed.
	room := func(m string, p int32, extras bool) bool {
		if has[m][p] {
			return false
		}
		mOK := mCount[m] < baseM || extras && mCount[m] == baseM && extraM > 0
		pOK := pCount[p] < baseP || extras && pCount[p] == baseP && extraP > 0
		return mOK && pOK
	}
	take := func(m string, p int32) {
		if mCount[m] == baseM {
			extraM--
		}
		if pCount[p] == baseP {
			extraP--
		}
		pair(m, p)
	}
	for _, extras := range []bool{false, true} {
		for _, m := range members {
			for _, p := range prev[m] {
				if int(p) < P && room(m, p, extras) {
					take(m, p)
				}
			}
		}
	}
	for _, extras := range []bool{false, true} {
		for p := int32(0); int(p) < P; p++ {
			for room1(pCount[p], baseP, extraP, extras) {
				best := ""
				for _, m := range members {
					if room(m, p, true) && (best == "" || mCount[m] < mCount[best]) {
						best = m
					}
				}
				if best == "" {
					break
				}
				take(best, p)
			}
		}
	}
	for m := range out {
		sort.Slice(out[m], func(i, j int) bool { return out[m][i] < out[m][j] })
	}
	return out
}

// room1 reports whether a side with n pairs takes one more: below base,
// or at base while extra slots remain and extras are allowed.
func room1(n, base, extra int, extras bool) bool {
	return n < base || extras && n == base && extra > 0
}

// deleteShareGroup tombstones an empty share group: NON_EMPTY_GROUP while
// it has members.
func (s *shard) deleteShareGroup(e *effects, g *sgroup) int16 {
	if len(g.members) > 0 {
		return kerr.NonEmptyGroup.Code
	}
	e.records = append(e.records,
		record{Key: cgKey(keySGTargetMetadata, g.id, nil)},
		record{Key: cgKey(keySGMetadata, g.id, nil)},
	)
	delete(s.sgroups, g.id)
	return 0
}

// describeShare fills one group of ShareGroupDescribe.
func (s *shard) describeShare(g *sgroup, d *kmsg.ShareGroupDescribeResponseGroup) {
	d.GroupState, d.GroupEpoch, d.AssignmentEpoch, d.Assignor = g.stateName(), g.epoch, g.assignmentEpoch, shareAssignor
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	names := map[[16]byte]string{}
	for _, id := range ids {
		m := g.members[id]
		dm := kmsg.NewShareGroupDescribeResponseGroupMember()
		dm.MemberID, dm.RackID, dm.MemberEpoch = m.id, m.rackID, m.epoch
		dm.ClientID, dm.ClientHost = m.clientID, m.clientHost
		dm.SubscribedTopicNames = append([]string{}, m.subscribed...)
		for _, t := range sortedTopicIDs(m.assigned) {
			name, ok := names[t]
			if !ok {
				name = s.topicName(t)
				names[t] = name
			}
			tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			tp.TopicID, tp.Topic, tp.Partitions = t, name, append([]int32{}, m.assigned[t]...)
			dm.Assignment.TopicPartitions = append(dm.Assignment.TopicPartitions, tp)
		}
		d.Members = append(d.Members, dm)
	}
}

// topicName resolves a topic ID from the broker's metadata ("" when the
// topic is gone).
func (s *shard) topicName(id [16]byte) string {
	if t, ok := s.c.broker.TopicByID(id); ok {
		return t.Name
	}
	return ""
}

// ShareGroupHeartbeat answers ShareGroupHeartbeat (v1, KIP-932).
func (c *Coordinator) ShareGroupHeartbeat(ctx context.Context, req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string) (*kmsg.ShareGroupHeartbeatResponse, error) {
	if msg := validShareHeartbeat(req); msg != "" {
		return versioned(shareHBError(kerr.InvalidRequest.Code, msg), req.Version), nil
	}
	r, code, err := c.do(ctx, req.GroupID, func(s *shard, e *effects, rid uint64) {
		e.reply(rid, s.shareHeartbeat(e, s.c.cfg.Now(), shareArgs{req: req, clientID: clientID, clientHost: clientHost}))
	})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return versioned(shareHBError(code, ""), req.Version), nil
	}
	return versioned(r.(*kmsg.ShareGroupHeartbeatResponse), req.Version), nil
}

func versioned(r *kmsg.ShareGroupHeartbeatResponse, v int16) *kmsg.ShareGroupHeartbeatResponse {
	r.Version = v
	return r
}

// ShareGroupDescribe answers ShareGroupDescribe (v1, KIP-932).
func (c *Coordinator) ShareGroupDescribe(ctx context.Context, req *kmsg.ShareGroupDescribeRequest) (*kmsg.ShareGroupDescribeResponse, error) {
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range req.GroupIDs {
		d := kmsg.NewShareGroupDescribeResponseGroup()
		d.GroupID = id
		if id == "" {
			d.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, d)
			continue
		}
		_, code, err := c.do(ctx, id, func(s *shard, e *effects, rid uint64) {
			if g := s.sgroups[id]; g != nil {
				s.describeShare(g, &d)
			} else {
				d.ErrorCode = kerr.GroupIDNotFound.Code
				msg := "Group " + id + " not found."
				if s.cgroups[id] != nil || s.groups[id] != nil {
					msg = "Group " + id + " is not a share group."
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

// ShareMember reports whether member is a live member of share group
// group here, with the partitions of its current assignment by topic ID
// (sorted). ok is false for an unknown group or member; code is the
// routing error when this broker is not the group's coordinator
// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS); err is ctx's.
func (c *Coordinator) ShareMember(ctx context.Context, group, member string) (assigned map[[16]byte][]int32, ok bool, code int16, err error) {
	if group == "" {
		return nil, false, 0, nil
	}
	_, code, err = c.do(ctx, group, func(s *shard, e *effects, rid uint64) {
		if g := s.sgroups[group]; g != nil {
			if m := g.members[member]; m != nil {
				assigned, ok = map[[16]byte][]int32(m.assigned.clone()), true
			}
		}
		e.reply(rid, nil)
	})
	return assigned, ok, code, err
}

func sortedDistinct(in []string) []string {
	out := append([]string{}, in...)
	sort.Strings(out)
	n := 0
	for i, s := range out {
		if i == 0 || s != out[n-1] {
			out[n] = s
			n++
		}
	}
	return out[:n]
}
