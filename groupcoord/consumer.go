package groupcoord

import (
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the KIP-848 consumer group state machine
// (ConsumerGroupHeartbeat): the coordinator computes a target assignment
// with a server-side assignor whenever the group epoch moves past the
// assignment epoch, and each member converges to its target through its
// heartbeats: first it gives up (revokes) partitions that are no longer
// its own, then it moves to the new epoch and receives the partitions of
// its target that no other member still holds. Pure, like group.go.
//
// Epochs (KIP-848): group epoch >= assignment epoch >= every member epoch.
// A partition has at most one owner at any time (owner map).

const (
	memberStateStable     int8 = 0 // member epoch == assignment epoch, owns its whole target
	memberStateUnrevoked  int8 = 1 // must revoke partitions before moving on
	memberStateUnreleased int8 = 2 // at the target epoch, waiting for partitions others still own
)

// cmember is one KIP-848 member.
type cmember struct {
	id               string
	instanceID       *string
	rackID           *string
	clientID         string
	clientHost       string
	epoch, prevEpoch int32
	rebalanceTimeout time.Duration
	subscribed       []string // sorted topic names
	regex            string   // SubscribedTopicRegex ("" = none; regex.go)
	assignor         string   // requested server assignor ("" = the group default)

	assigned      assignment // partitions the member owns (told to it)
	pendingRevoke assignment // partitions it must revoke; still owned until it does
	// sent is the assignment last sent, to send only changes.
	sent            assignment
	sessionDeadline time.Time
	revokeDeadline  time.Time // when pendingRevoke is non-empty
}

func (m *cmember) state() int8 {
	switch {
	case len(m.pendingRevoke) > 0:
		return memberStateUnrevoked
	default:
		return memberStateStable
	}
}

// cgroup is one KIP-848 consumer group's membership. Its committed
// offsets live in the classic group of the same ID (always Empty), so the
// offset APIs work the same for both kinds.
type cgroup struct {
	id              string
	epoch           int32
	assignmentEpoch int32
	members         map[string]*cmember
	static          map[string]string // instance ID -> member ID
	target          map[string]assignment
	owner           map[topicPartition]string
	// topics is the subscribed topics' metadata as of the last target
	// computation; nil right after a load (first heartbeat fills it
	// without bumping the epoch).
	topics   map[string]topicMeta
	assignor string // assignor of the last target
	// regexes are the resolutions of the regexes members subscribe with
	// (regex.go); a cache, rebuilt after a load.
	regexes map[string]*regexState
}

func newCGroup(id string) *cgroup {
	return &cgroup{
		id: id, members: map[string]*cmember{}, static: map[string]string{},
		target: map[string]assignment{}, owner: map[topicPartition]string{},
	}
}

// stateName is KIP-848's group state.
func (g *cgroup) stateName() string {
	if len(g.members) == 0 {
		return "Empty"
	}
	if g.assignmentEpoch < g.epoch {
		return "Assigning"
	}
	for _, m := range g.members {
		if m.epoch != g.assignmentEpoch || len(m.pendingRevoke) > 0 || !m.assigned.equal(g.target[m.id]) {
			return "Reconciling"
		}
	}
	return "Stable"
}

func (g *cgroup) sortedMembers() []*cmember {
	ms := make([]*cmember, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].id < ms[j].id })
	return ms
}

// topicSource resolves topic names for the assignor.
type topicSource func(name string) (topicMeta, bool)

// heartbeatArgs is one ConsumerGroupHeartbeat with the connection's
// identity.
type heartbeatArgs struct {
	req        *kmsg.ConsumerGroupHeartbeatRequest
	clientID   string
	clientHost string
	// topicNames lists every topic, for regex subscriptions (nil = no
	// topics to match).
	topicNames topicLister
}

// Member epochs with a meaning of their own (KIP-848).
const (
	epochLeave       int32 = -1 // the member leaves the group
	epochStaticLeave int32 = -2 // a static member leaves for now, keeping its place
)

func hbError(version int16, code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
	r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	r.Version, r.ErrorCode = version, code
	if msg != "" {
		r.ErrorMessage = &msg
	}
	return r
}

// heartbeat handles ConsumerGroupHeartbeat and returns the response, in
// steps: a leaving member leaves; the request is checked; the member is
// found (joining at epoch 0, possibly in a static member's place) and its
// epoch checked; its metadata is updated, the group's epoch and target
// assignment follow, and the member's assignment is reconciled.
func (g *cgroup) heartbeat(c *Config, e *effects, now time.Time, a heartbeatArgs, topics topicSource) *kmsg.ConsumerGroupHeartbeatResponse {
	req := a.req
	v := req.Version
	if req.MemberEpoch == epochLeave || req.MemberEpoch == epochStaticLeave {
		return g.leave(c, e, now, req)
	}
	if r := checkHeartbeat(c, a); r != nil {
		return r
	}
	var m *cmember
	bump := false // the group epoch moves once per heartbeat at most
	if req.MemberEpoch == 0 {
		var r *kmsg.ConsumerGroupHeartbeatResponse
		if m, bump, r = g.join(c, e, req); r != nil {
			return r
		}
	} else if r := g.checkMemberEpoch(req, &m); r != nil {
		return r
	}
	if req.InstanceID != nil {
		if old, ok := g.static[*req.InstanceID]; ok && old != m.id {
			return hbError(v, kerr.FencedInstanceID.Code, "")
		}
		g.static[*req.InstanceID] = m.id
	}
	if m.update(e, g.id, a) {
		bump = true
	}
	m.sessionDeadline = now.Add(c.ConsumerSessionTimeout)
	// Topic metadata: a new or grown subscribed topic, or a regex that
	// matches other topics now, bumps the epoch.
	if g.refreshTopics(topics, a.topicNames) {
		bump = true
	}
	if bump {
		g.bumpEpoch(e)
	}
	if g.assignmentEpoch < g.epoch {
		g.computeTarget(e)
	}
	owned := ownedFrom(req)
	g.reconcile(e, now, m, owned)
	return m.heartbeatResponse(c, v)
}

// leave handles a member leaving (epoch -1), or a static member leaving
// for now (epoch -2).
func (g *cgroup) leave(c *Config, e *effects, now time.Time, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	v := req.Version
	if req.MemberEpoch == epochStaticLeave && req.InstanceID == nil {
		return hbError(v, kerr.InvalidRequest.Code, "InstanceId can't be null.")
	}
	var m *cmember
	if req.InstanceID != nil {
		var r *kmsg.ConsumerGroupHeartbeatResponse
		if m, r = g.staticMember(v, req); r != nil {
			return r
		}
	} else if m = g.members[req.MemberID]; m == nil {
		return hbError(v, kerr.UnknownMemberID.Code, "")
	}
	if req.MemberEpoch == epochStaticLeave {
		// A static member leaving for now keeps its place and its
		// partitions (not those it was revoking) until its session
		// expires, so that the same instance rejoining -- under any
		// member ID -- takes them back without a rebalance.
		g.release(m, m.pendingRevoke)
		m.pendingRevoke = assignment{}
		m.prevEpoch, m.epoch = m.epoch, epochStaticLeave
		m.sessionDeadline = now.Add(c.ConsumerSessionTimeout)
		e.records = append(e.records, record{Key: cgKey(keyCGCurrent, g.id, &m.id), Value: cgCurrentValue(m)})
	} else {
		g.removeMember(e, m)
		g.bumpEpoch(e)
	}
	r := hbError(v, 0, "")
	id := m.id
	r.MemberID, r.MemberEpoch = &id, req.MemberEpoch
	return r
}

// checkHeartbeat checks a joining or heartbeating member's request (a new
// member gets its ID here); nil when it is well formed.
func checkHeartbeat(c *Config, a heartbeatArgs) *kmsg.ConsumerGroupHeartbeatResponse {
	req := a.req
	v := req.Version
	if req.MemberEpoch == 0 {
		if req.MemberID == "" {
			if v >= 1 {
				return hbError(v, kerr.InvalidRequest.Code, "MemberId can't be empty.")
			}
			req.MemberID = c.NewMemberID(a.clientID)
		}
		if req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil {
			return hbError(v, kerr.InvalidRequest.Code, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
		}
		if req.RebalanceTimeoutMillis <= 0 {
			return hbError(v, kerr.InvalidRequest.Code, "RebalanceTimeoutMs must be provided in first request.")
		}
	} else if req.MemberID == "" {
		return hbError(v, kerr.InvalidRequest.Code, "MemberId can't be empty.")
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileSubscriptionRegex(*req.SubscribedTopicRegex); err != nil {
			return hbError(v, kerr.InvalidRegularExpression.Code, err.Error())
		}
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != "uniform" && *req.ServerAssignor != "range" {
		return hbError(v, kerr.UnsupportedAssignor.Code, "")
	}
	return nil
}

// join finds or adds the member of a heartbeat at epoch 0: a new member
// (the group epoch moves: bump), a known one that lost its state, or a
// static member taking the place of its instance's previous member.
func (g *cgroup) join(c *Config, e *effects, req *kmsg.ConsumerGroupHeartbeatRequest) (m *cmember, bump bool, r *kmsg.ConsumerGroupHeartbeatResponse) {
	v := req.Version
	m = g.members[req.MemberID]
	if len(g.members) >= c.MaxGroupSize && m == nil {
		return nil, false, hbError(v, kerr.GroupMaxSizeReached.Code, "")
	}
	if req.InstanceID != nil {
		if old, ok := g.static[*req.InstanceID]; ok {
			om := g.members[old]
			if om.epoch != epochStaticLeave {
				// The instance's current member has not left: the new
				// one may not take its place (Kafka:
				// throwIfInstanceIdIsUnreleased).
				return nil, false, hbError(v, kerr.UnreleasedInstanceID.Code, fmt.Sprintf(
					"Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.",
					req.MemberID, *req.InstanceID, old))
			}
			g.replaceStatic(e, om, old, req.MemberID, *req.InstanceID)
			m = om
		}
	}
	if m == nil {
		m = &cmember{id: req.MemberID, assigned: assignment{}, pendingRevoke: assignment{}}
		g.members[m.id] = m
		bump = true
	} else if req.InstanceID == nil {
		// A known member rejoining at epoch 0 lost its state: it owns
		// nothing now.
		g.release(m, m.assigned)
		g.release(m, m.pendingRevoke)
		m.assigned, m.pendingRevoke, m.sent = assignment{}, assignment{}, nil
		m.epoch = 0
	}
	m.sent = nil
	return m, bump, nil
}

// replaceStatic puts a static member's new member (ID id) in the place of
// the one that left for now (om, under ID old): it takes om's place and
// partitions at epoch 0 (KIP-345 for KIP-848).
func (g *cgroup) replaceStatic(e *effects, om *cmember, old, id, instance string) {
	if old != id {
		delete(g.members, old)
		e.records = append(e.records, g.memberTombstones(old)...)
		om.id = id
		g.members[om.id] = om
		g.target[om.id] = g.target[old]
		delete(g.target, old)
		for tp, o := range g.owner {
			if o == old {
				g.owner[tp] = om.id
			}
		}
		g.static[instance] = om.id
		e.records = append(e.records, record{Key: cgKey(keyCGTargetMember, g.id, &om.id), Value: cgTargetValue(g.target[om.id])})
	}
	// Its member record is written by update (epoch 0 always is), its
	// current assignment by reconcile.
	om.epoch, om.prevEpoch, om.sent = 0, 0, nil
}

// checkMemberEpoch finds the member of a heartbeat at a positive epoch
// (into *m) and checks the epoch it claims.
func (g *cgroup) checkMemberEpoch(req *kmsg.ConsumerGroupHeartbeatRequest, m **cmember) *kmsg.ConsumerGroupHeartbeatResponse {
	v := req.Version
	if req.InstanceID != nil {
		if _, r := g.staticMember(v, req); r != nil {
			return r
		}
	}
	mm := g.members[req.MemberID]
	if mm == nil {
		return hbError(v, kerr.UnknownMemberID.Code, "")
	}
	if req.MemberEpoch > mm.epoch {
		return hbError(v, kerr.FencedMemberEpoch.Code, "")
	}
	if req.MemberEpoch < mm.epoch {
		// The member missed our last response: accept its previous
		// epoch if what it owns is a subset of what it had then.
		if req.MemberEpoch != mm.prevEpoch || req.Topics == nil || !ownedSubset(req.Topics, mm.assigned, mm.pendingRevoke) {
			return hbError(v, kerr.FencedMemberEpoch.Code, "")
		}
		mm.sent = nil
	}
	*m = mm
	return nil
}

// update takes the member's metadata from its heartbeat, writing its
// member record when it changed (always at epoch 0); it reports whether
// the subscription changed (the group epoch moves).
func (m *cmember) update(e *effects, group string, a heartbeatArgs) (bump bool) {
	req := a.req
	changed := req.MemberEpoch == 0
	m.instanceID = req.InstanceID
	if req.RackID != nil {
		m.rackID = req.RackID
	}
	m.clientID, m.clientHost = a.clientID, a.clientHost
	if req.RebalanceTimeoutMillis > 0 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.SubscribedTopicNames != nil {
		subs := append([]string(nil), req.SubscribedTopicNames...)
		sort.Strings(subs)
		subs = dedupe(subs)
		if !equalStrings(subs, m.subscribed) {
			m.subscribed = subs
			changed, bump = true, true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex = *req.SubscribedTopicRegex
		changed, bump = true, true
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor = *req.ServerAssignor
		changed, bump = true, true
	}
	if changed {
		e.records = append(e.records, record{Key: cgKey(keyCGMember, group, &m.id), Value: cgMemberValue(m)})
	}
	return bump
}

// ownedFrom is what a heartbeat says its member owns: nil when it does
// not say, nothing at epoch 0.
func ownedFrom(req *kmsg.ConsumerGroupHeartbeatRequest) assignment {
	if req.MemberEpoch == 0 {
		return assignment{}
	}
	if req.Topics == nil {
		return nil
	}
	owned := assignment{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			owned.add(topicPartition{t.TopicID, p})
		}
	}
	return owned
}

// heartbeatResponse answers a member's heartbeat: its ID and epoch, and
// its assignment when it has not been sent yet.
func (m *cmember) heartbeatResponse(c *Config, v int16) *kmsg.ConsumerGroupHeartbeatResponse {
	r := hbError(v, 0, "")
	id := m.id
	r.MemberID, r.MemberEpoch = &id, m.epoch
	r.HeartbeatIntervalMillis = int32(c.ConsumerHeartbeatInterval.Milliseconds())
	if m.sent == nil || !m.sent.equal(m.assigned) {
		ra := &kmsg.ConsumerGroupHeartbeatResponseAssignment{}
		for _, t := range sortedTopicIDs(m.assigned) {
			ra.Topics = append(ra.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: t, Partitions: append([]int32(nil), m.assigned[t]...)})
		}
		if ra.Topics == nil {
			ra.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		}
		r.Assignment = ra
		m.sent = m.assigned.clone()
	}
	return r
}

func ownedSubset(ts []kmsg.ConsumerGroupHeartbeatRequestTopic, a, b assignment) bool {
	for _, t := range ts {
		for _, p := range t.Partitions {
			tp := topicPartition{t.TopicID, p}
			if !a.has(tp) && !b.has(tp) {
				return false
			}
		}
	}
	return true
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (g *cgroup) bumpEpoch(e *effects) {
	g.epoch++
	e.records = append(e.records, record{Key: cgKey(keyCGMetadata, g.id, nil), Value: cgEpochValue(g.epoch)})
}

// refreshTopics re-reads the subscribed topics (re-resolving regexes); a
// change bumps the epoch (except right after a load, when the old metadata
// is unknown).
func (g *cgroup) refreshTopics(topics topicSource, list topicLister) bool {
	regexChanged := g.resolveRegexes(list)
	now := map[string]topicMeta{}
	for _, m := range g.members {
		for _, t := range g.memberTopics(m) {
			if tm, ok := topics(t); ok {
				now[t] = tm
			}
		}
	}
	if g.topics == nil {
		// Just loaded: the metadata the target was computed from is not
		// stored, so compare with what the target covers instead.
		g.topics = now
		return !g.targetCovers(now)
	}
	same := len(now) == len(g.topics)
	for n, tm := range now {
		if g.topics[n] != tm {
			same = false
		}
	}
	g.topics = now
	return !same || regexChanged
}

// targetCovers reports whether the target assignment covers exactly the
// given topics' partitions (no topic or partition missing or extra).
func (g *cgroup) targetCovers(topics map[string]topicMeta) bool {
	want := map[[16]byte]int32{}
	for _, t := range topics {
		want[t.id] = t.partitions
	}
	have := map[[16]byte]int32{}
	for _, a := range g.target {
		for id, ps := range a {
			if _, ok := want[id]; !ok {
				return false
			}
			have[id] += int32(len(ps))
		}
	}
	for id, n := range want {
		if have[id] != n {
			return false
		}
	}
	return true
}

// computeTarget runs the assignor and records the new target.
func (g *cgroup) computeTarget(e *effects) {
	in := assignInput{subs: map[string][]topicMeta{}, prev: g.target}
	votes := map[string]int{}
	for _, m := range g.sortedMembers() {
		in.members = append(in.members, m.id)
		for _, t := range g.memberTopics(m) {
			if tm, ok := g.topics[t]; ok {
				in.subs[m.id] = append(in.subs[m.id], tm)
			}
		}
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	// Kafka uses the assignor most members ask for; uniform by default.
	g.assignor = "uniform"
	if votes["range"] > votes["uniform"] {
		g.assignor = "range"
	}
	var next map[string]assignment
	if g.assignor == "range" {
		next = assignRange(in)
	} else {
		next = assignUniform(in)
	}
	for _, id := range in.members {
		if !next[id].equal(g.target[id]) {
			mid := id
			e.records = append(e.records, record{Key: cgKey(keyCGTargetMember, g.id, &mid), Value: cgTargetValue(next[id])})
		}
	}
	g.target = next
	g.assignmentEpoch = g.epoch
	e.records = append(e.records, record{Key: cgKey(keyCGTargetMetadata, g.id, nil), Value: cgEpochValue(g.assignmentEpoch)})
}

// release frees partitions a member owned.
func (g *cgroup) release(m *cmember, a assignment) {
	for _, tp := range a.list() {
		if g.owner[tp] == m.id {
			delete(g.owner, tp)
		}
	}
}

// reconcile moves a member toward its target. owned (nil = not reported)
// is what the member says it holds: partitions pending revocation that it
// no longer reports are released.
func (g *cgroup) reconcile(e *effects, now time.Time, m *cmember, owned assignment) {
	before := m.state()
	beforeEpoch, beforeAssigned := m.epoch, m.assigned.clone()
	target := g.target[m.id]
	if target == nil {
		target = assignment{}
	}
	if len(m.pendingRevoke) == 0 {
		if revoke := m.assigned.minus(target); len(revoke) > 0 {
			// Revoke first; the member keeps its epoch until it has.
			m.assigned = m.assigned.intersect(target)
			m.pendingRevoke = revoke
			m.revokeDeadline = now.Add(m.rebalanceTimeout)
		}
	}
	if owned != nil && len(m.pendingRevoke) > 0 {
		// What the member no longer reports holding is released (this
		// may be in the very heartbeat that learns of the revocation).
		for _, tp := range m.pendingRevoke.list() {
			if !owned.has(tp) {
				g.release(m, assignment{tp.topic: {tp.partition}})
			}
		}
		m.pendingRevoke = m.pendingRevoke.intersect(owned)
	}
	if len(m.pendingRevoke) == 0 {
		if m.epoch != g.assignmentEpoch {
			m.prevEpoch, m.epoch = m.epoch, g.assignmentEpoch
		}
		for _, tp := range target.list() {
			if o := g.owner[tp]; (o == "" || o == m.id) && !m.assigned.has(tp) {
				g.owner[tp] = m.id
				m.assigned.add(tp)
			}
		}
	}
	if before != m.state() || beforeEpoch != m.epoch || !beforeAssigned.equal(m.assigned) {
		e.records = append(e.records, record{Key: cgKey(keyCGCurrent, g.id, &m.id), Value: cgCurrentValue(m)})
	}
}

// removeMember drops m and frees its partitions (the caller bumps the
// epoch).
func (g *cgroup) removeMember(e *effects, m *cmember) {
	g.release(m, m.assigned)
	g.release(m, m.pendingRevoke)
	delete(g.members, m.id)
	delete(g.target, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	e.records = append(e.records, g.memberTombstones(m.id)...)
}

func (g *cgroup) memberTombstones(id string) []record {
	return []record{
		{Key: cgKey(keyCGCurrent, g.id, &id)},
		{Key: cgKey(keyCGTargetMember, g.id, &id)},
		{Key: cgKey(keyCGMember, g.id, &id)},
	}
}

// staticMember finds the member of a static request's instance ID, or the
// error Kafka answers: UNKNOWN_MEMBER_ID for an unknown instance,
// FENCED_INSTANCE_ID when the instance belongs to another member ID.
func (g *cgroup) staticMember(v int16, req *kmsg.ConsumerGroupHeartbeatRequest) (*cmember, *kmsg.ConsumerGroupHeartbeatResponse) {
	id, ok := g.static[*req.InstanceID]
	if !ok {
		return nil, hbError(v, kerr.UnknownMemberID.Code, fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID))
	}
	if id != req.MemberID {
		return nil, hbError(v, kerr.FencedInstanceID.Code, fmt.Sprintf(
			"The static member %s with instance id %s is fenced by existing member %s.", req.MemberID, *req.InstanceID, id))
	}
	return g.members[id], nil
}

// tick expires sessions and members that did not revoke in time.
func (g *cgroup) tick(e *effects, now time.Time) {
	for _, m := range g.sortedMembers() {
		late := len(m.pendingRevoke) > 0 && !now.Before(m.revokeDeadline)
		if !now.Before(m.sessionDeadline) || late {
			g.removeMember(e, m)
			g.bumpEpoch(e)
		}
	}
}

// commitCheck validates an OffsetCommit for a KIP-848 group with members:
// the generation field carries the member epoch.
func (g *cgroup) commitCheck(version int16, epoch int32, memberID string) int16 {
	m := g.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	// The previous epoch is accepted too: a member commits what it is
	// revoking before it acknowledges the revocation (Kafka 4.3 relaxed
	// the check the same way).
	if epoch != m.epoch && epoch != m.prevEpoch {
		if version >= 9 {
			return kerr.StaleMemberEpoch.Code
		}
		return kerr.IllegalGeneration.Code
	}
	return 0
}

// tombstones deletes the whole group (DeleteGroups on an empty group).
func (g *cgroup) tombstones() []record {
	var recs []record
	for _, m := range g.sortedMembers() {
		recs = append(recs, g.memberTombstones(m.id)...)
	}
	recs = append(recs,
		record{Key: cgKey(keyCGTargetMetadata, g.id, nil)},
		record{Key: cgKey(keyCGMetadata, g.id, nil)})
	return recs
}

// describe fills one ConsumerGroupDescribe entry.
func (g *cgroup) describe(names func([16]byte) string) kmsg.ConsumerGroupDescribeResponseGroup {
	d := kmsg.NewConsumerGroupDescribeResponseGroup()
	d.Group, d.State, d.Epoch, d.AssignmentEpoch = g.id, g.stateName(), g.epoch, g.assignmentEpoch
	d.AssignorName = g.assignor
	if d.AssignorName == "" {
		d.AssignorName = "uniform"
	}
	d.AuthorizedOperations = -2147483648
	toAssignment := func(a assignment) kmsg.Assignment {
		var out kmsg.Assignment
		for _, t := range sortedTopicIDs(a) {
			out.TopicPartitions = append(out.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: t, Topic: names(t), Partitions: append([]int32(nil), a[t]...)})
		}
		return out
	}
	for _, m := range g.sortedMembers() {
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.RackID = m.id, m.instanceID, m.rackID
		dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.epoch, m.clientID, m.clientHost
		dm.SubscribedTopics = append([]string{}, m.subscribed...)
		if m.regex != "" {
			re := m.regex
			dm.SubscribedTopicRegex = &re
		}
		dm.Assignment = toAssignment(m.assigned)
		dm.TargetAssignment = toAssignment(g.target[m.id])
		dm.MemberType = 1 // consumer protocol
		d.Members = append(d.Members, dm)
	}
	return d
}

// replay applies one stored KIP-848 record (load).
func (g *cgroup) replay(version int16, member string, value []byte, now time.Time, c *Config) error {
	if value == nil {
		switch version {
		case keyCGMember:
			if m := g.members[member]; m != nil {
				g.release(m, m.assigned)
				g.release(m, m.pendingRevoke)
				if m.instanceID != nil && g.static[*m.instanceID] == member {
					delete(g.static, *m.instanceID)
				}
				delete(g.members, member)
			}
		case keyCGTargetMember:
			delete(g.target, member)
		}
		return nil
	}
	d := &dec{b: value}
	if d.i16() != 0 {
		return nil // a newer value version: not ours to read
	}
	getMember := func() *cmember {
		m := g.members[member]
		if m == nil {
			m = &cmember{id: member, assigned: assignment{}, pendingRevoke: assignment{}, rebalanceTimeout: 5 * time.Minute}
			m.sessionDeadline = now.Add(c.ConsumerSessionTimeout)
			g.members[member] = m
		}
		return m
	}
	switch version {
	case keyCGMetadata:
		g.epoch = d.i32()
	case keyCGTargetMetadata:
		g.assignmentEpoch = d.i32()
	case keyCGMember:
		m := getMember()
		m.instanceID, m.rackID = d.cnstr(), d.cnstr()
		m.clientID, m.clientHost = d.cstr(), d.cstr()
		n := d.arrayLen()
		m.subscribed = nil
		for i := 0; i < n && d.err == nil; i++ {
			m.subscribed = append(m.subscribed, d.cstr())
		}
		m.regex = ""
		if re := d.cnstr(); re != nil {
			m.regex = *re
		}
		if ms := d.i32(); ms > 0 {
			m.rebalanceTimeout = time.Duration(ms) * time.Millisecond
		}
		if a := d.cnstr(); a != nil {
			m.assignor = *a
		}
		if m.instanceID != nil {
			g.static[*m.instanceID] = m.id
		}
	case keyCGTargetMember:
		g.target[member] = d.assignment()
	case keyCGCurrent:
		m := getMember()
		g.release(m, m.assigned)
		g.release(m, m.pendingRevoke)
		m.epoch, m.prevEpoch = d.i32(), d.i32()
		d.i8()
		m.assigned, m.pendingRevoke = d.assignment(), d.assignment()
		for _, tp := range m.assigned.list() {
			g.owner[tp] = m.id
		}
		for _, tp := range m.pendingRevoke.list() {
			g.owner[tp] = m.id
		}
		if len(m.pendingRevoke) > 0 {
			m.revokeDeadline = now.Add(m.rebalanceTimeout)
		}
	}
	return d.err
}
