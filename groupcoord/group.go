package groupcoord

import (
	"bytes"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is the classic group state machine (JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup). It is pure: every method takes now and an
// *effects to fill with records to write and replies to send, reads no
// clock and does no I/O. The shard goroutine owns every group.
//
//	          join (first member)              all joined / join deadline
//	Empty ------------------------> Preparing --------------------------> Completing
//	  ^                              ^   |  no members left                 |  leader's SyncGroup
//	  |                              |   +-----------> Empty                v
//	  +---- last member gone --------+---------- member joins/leaves/expires Stable
//
// Dead is the state of a deleted group; the shard drops it at once.

type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s groupState) String() string { return stateNames[s] }

// offsetEntry is one committed offset.
type offsetEntry struct {
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitMs    int64
}

// member is one classic group member.
type member struct {
	id               string
	instanceID       *string // static membership (KIP-345); nil = dynamic
	clientID         string
	clientHost       string
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	ptype            string // protocol type of the join that added the member
	protocols        []kmsg.JoinGroupRequestProtocol
	assignment       []byte

	// joinReply/syncReply are the reply IDs of a JoinGroup/SyncGroup that
	// waits for the rebalance to progress; 0 = none.
	joinReply, syncReply     uint64
	joinVersion, syncVersion int16
	// synced is whether the member sent SyncGroup in this generation.
	synced          bool
	sessionDeadline time.Time
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Metadata, b[i].Metadata) {
			return false
		}
	}
	return true
}

// group is one consumer group: classic membership plus committed offsets.
// Invariant: state == stateEmpty iff len(members) == 0 (outside a method).
type group struct {
	id           string
	state        groupState
	protocolType string // "" for a group that only has offsets
	protocol     string // chosen protocol of the current generation
	generation   int32
	leader       string
	members      map[string]*member
	static       map[string]string    // instance ID -> member ID
	pending      map[string]time.Time // member IDs handed out with MEMBER_ID_REQUIRED -> deadline
	stateSince   time.Time

	joinDeadline time.Time // PreparingRebalance: complete the join by then
	// initialJoin: the first rebalance of an empty group, which waits the
	// initial delay (extended per new member up to initialEnd) instead of
	// completing as soon as everyone joined.
	initialJoin  bool
	initialEnd   time.Time
	syncDeadline time.Time // Completing/Stable: members not synced by then are removed

	offsets map[string]map[int32]offsetEntry
}

func newGroup(id string, now time.Time) *group {
	return &group{
		id:         id,
		members:    map[string]*member{},
		static:     map[string]string{},
		pending:    map[string]time.Time{},
		offsets:    map[string]map[int32]offsetEntry{},
		stateSince: now,
	}
}

// reply is a response for the request with this ID.
type reply struct {
	id   uint64
	resp kmsg.Response
}

// effects is what an event produced: records to make durable first, then
// replies to send.
type effects struct {
	records []record
	replies []reply
	// txn holds records of a transactional offset commit, written in
	// one transactional batch of txnPID/txnEpoch (txn_offsets.go).
	txn      []record
	txnPID   int64
	txnEpoch int16
}

func (e *effects) reply(id uint64, r kmsg.Response) {
	if id != 0 {
		e.replies = append(e.replies, reply{id, r})
	}
}

func joinError(version int16, memberID string, code int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.ErrorCode = code
	r.MemberID = memberID
	r.Generation = -1
	return r
}

// joinArgs is a JoinGroup request with the connection's identity.
type joinArgs struct {
	req        *kmsg.JoinGroupRequest
	clientID   string
	clientHost string
}

// join handles JoinGroup.
func (g *group) join(c *Config, e *effects, now time.Time, rid uint64, a joinArgs) {
	req := a.req
	fail := func(code int16) { e.reply(rid, joinError(req.Version, req.MemberID, code)) }
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 || rebalance <= 0 {
		rebalance = session
	}
	switch {
	case session < c.MinSessionTimeout || session > c.MaxSessionTimeout:
		fail(kerr.InvalidSessionTimeout.Code)
		return
	case req.ProtocolType == "" || len(req.Protocols) == 0:
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	case g.state == stateDead:
		fail(kerr.CoordinatorNotAvailable.Code)
		return
	case !g.supports(req.ProtocolType, req.Protocols):
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	m := &member{
		instanceID: req.InstanceID, clientID: a.clientID, clientHost: a.clientHost,
		sessionTimeout: session, rebalanceTimeout: rebalance,
		ptype: req.ProtocolType, protocols: req.Protocols, joinVersion: req.Version,
	}
	if req.MemberID == "" {
		if len(g.members)+len(g.pending) >= c.MaxGroupSize {
			fail(kerr.GroupMaxSizeReached.Code)
			return
		}
		m.id = c.NewMemberID(a.clientID)
		if req.InstanceID != nil {
			if old, ok := g.static[*req.InstanceID]; ok {
				g.replaceStatic(c, e, now, rid, g.members[old], m)
				return
			}
		} else if req.Version >= 4 {
			// KIP-394: a new dynamic member first learns its ID, and
			// must rejoin with it within the session timeout.
			g.pending[m.id] = now.Add(session)
			e.reply(rid, joinError(req.Version, m.id, kerr.MemberIDRequired.Code))
			return
		}
		g.addMember(c, e, now, rid, m)
		return
	}
	m.id = req.MemberID
	if req.InstanceID != nil {
		known, ok := g.static[*req.InstanceID]
		if !ok {
			fail(kerr.UnknownMemberID.Code)
			return
		}
		if known != req.MemberID {
			fail(kerr.FencedInstanceID.Code)
			return
		}
	}
	if _, ok := g.pending[m.id]; ok {
		delete(g.pending, m.id)
		g.addMember(c, e, now, rid, m)
		return
	}
	old := g.members[m.id]
	if old == nil {
		fail(kerr.UnknownMemberID.Code)
		return
	}
	old.clientID, old.clientHost = a.clientID, a.clientHost
	old.sessionDeadline = now.Add(session)
	switch g.state {
	case statePreparingRebalance:
		if old.joinReply != 0 {
			e.reply(old.joinReply, joinError(old.joinVersion, old.id, kerr.RebalanceInProgress.Code))
		}
		g.updateMember(old, m, rid)
		g.tryCompleteJoin(e, now)
	case stateCompletingRebalance, stateStable:
		if sameProtocols(old.protocols, m.protocols) && (g.state == stateCompletingRebalance || old.id != g.leader) {
			// Nothing changed: answer with the current generation.
			old.sessionTimeout, old.rebalanceTimeout = session, rebalance
			e.reply(rid, g.joinResponse(old, req.Version))
			return
		}
		g.updateMember(old, m, rid)
		g.prepareRebalance(e, now)
		g.tryCompleteJoin(e, now)
	default: // Empty: no members
		fail(kerr.UnknownMemberID.Code)
	}
}

func (g *group) updateMember(old, m *member, rid uint64) {
	old.protocols = m.protocols
	old.sessionTimeout, old.rebalanceTimeout = m.sessionTimeout, m.rebalanceTimeout
	old.joinReply, old.joinVersion = rid, m.joinVersion
}

// supports reports whether a member with these protocols may join: the
// protocol type matches and some protocol is supported by every member.
func (g *group) supports(ptype string, protos []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return true
	}
	if ptype != g.protocolType {
		return false
	}
	for _, p := range protos {
		all := true
		for _, m := range g.sortedMembers() {
			if !hasProtocol(m, p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func hasProtocol(m *member, name string) bool {
	for _, p := range m.protocols {
		if p.Name == name {
			return true
		}
	}
	return false
}

func (g *group) addMember(c *Config, e *effects, now time.Time, rid uint64, m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.ptype
	}
	m.joinReply = rid
	m.sessionDeadline = now.Add(m.sessionTimeout)
	g.members[m.id] = m
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if g.state == statePreparingRebalance {
		if g.initialJoin {
			g.joinDeadline = minTime(now.Add(c.InitialRebalanceDelay), g.initialEnd)
		}
	} else {
		g.prepareRebalanceDelayed(c, e, now)
	}
	g.tryCompleteJoin(e, now)
}

// replaceStatic gives a rejoining static member (same instance ID, new
// member ID) the old member's place, fencing the old ID (KIP-345).
func (g *group) replaceStatic(c *Config, e *effects, now time.Time, rid uint64, old, m *member) {
	if old.joinReply != 0 {
		e.reply(old.joinReply, joinError(old.joinVersion, old.id, kerr.FencedInstanceID.Code))
	}
	if old.syncReply != 0 {
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version, r.ErrorCode = old.syncVersion, kerr.FencedInstanceID.Code
		e.reply(old.syncReply, r)
	}
	delete(g.members, old.id)
	m.assignment, m.synced = old.assignment, old.synced
	m.sessionDeadline = now.Add(m.sessionTimeout)
	g.members[m.id] = m
	g.static[*m.instanceID] = m.id
	wasLeader := g.leader == old.id
	if wasLeader {
		g.leader = m.id
	}
	if g.state == stateStable && !wasLeader && sameProtocols(old.protocols, m.protocols) {
		// No rebalance: the new ID takes over the old assignment. The
		// mapping is persisted so a failover keeps fencing the old ID.
		e.records = append(e.records, g.metadataRecord(now))
		e.reply(rid, g.joinResponse(m, m.joinVersion))
		return
	}
	m.joinReply = rid
	if g.state != statePreparingRebalance {
		g.prepareRebalance(e, now)
	}
	g.tryCompleteJoin(e, now)
}

// prepareRebalanceDelayed starts a rebalance, with the initial delay when
// the group was empty.
func (g *group) prepareRebalanceDelayed(c *Config, e *effects, now time.Time) {
	if g.state == stateEmpty && c.InitialRebalanceDelay > 0 {
		g.state = statePreparingRebalance
		g.stateSince = now
		g.initialJoin = true
		g.initialEnd = now.Add(g.maxRebalanceTimeout())
		g.joinDeadline = minTime(now.Add(c.InitialRebalanceDelay), g.initialEnd)
		return
	}
	g.prepareRebalance(e, now)
}

// prepareRebalance moves to PreparingRebalance: members must rejoin by the
// largest rebalance timeout. Members waiting in SyncGroup are told to
// rejoin.
func (g *group) prepareRebalance(e *effects, now time.Time) {
	if g.state == stateCompletingRebalance {
		for _, m := range g.sortedMembers() {
			m.assignment = nil
		}
	}
	for _, m := range g.sortedMembers() {
		if m.syncReply != 0 {
			r := kmsg.NewPtrSyncGroupResponse()
			r.Version, r.ErrorCode = m.syncVersion, kerr.RebalanceInProgress.Code
			e.reply(m.syncReply, r)
			m.syncReply = 0
		}
	}
	g.state = statePreparingRebalance
	g.stateSince = now
	g.initialJoin = false
	g.joinDeadline = now.Add(g.maxRebalanceTimeout())
}

func (g *group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.sortedMembers() {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// tryCompleteJoin completes the join phase once every member rejoined and
// no member ID handed out is still outstanding.
func (g *group) tryCompleteJoin(e *effects, now time.Time) {
	if g.state != statePreparingRebalance || g.initialJoin || len(g.pending) > 0 {
		return
	}
	for _, m := range g.sortedMembers() {
		if m.joinReply == 0 {
			return
		}
	}
	g.completeJoin(e, now)
}

// completeJoin starts a new generation with the members that rejoined.
func (g *group) completeJoin(e *effects, now time.Time) {
	for _, m := range g.sortedMembers() {
		if m.joinReply == 0 {
			g.removeMember(e, m)
		}
	}
	g.initialJoin = false
	g.generation++
	g.stateSince = now
	if len(g.members) == 0 {
		g.state = stateEmpty
		g.protocol, g.leader = "", ""
		e.records = append(e.records, g.metadataRecord(now))
		return
	}
	g.protocol = g.selectProtocol()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = g.sortedMembers()[0].id
	}
	g.state = stateCompletingRebalance
	g.syncDeadline = now.Add(g.maxRebalanceTimeout())
	for _, m := range g.sortedMembers() {
		m.synced = false
		m.assignment = nil
		m.sessionDeadline = now.Add(m.sessionTimeout)
		e.reply(m.joinReply, g.joinResponse(m, m.joinVersion))
		m.joinReply = 0
	}
}

// joinResponse is the successful JoinGroup answer for m; the leader gets
// every member's metadata for the chosen protocol.
func (g *group) joinResponse(m *member, version int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.Generation = g.generation
	pt, p := g.protocolType, g.protocol
	r.ProtocolType, r.Protocol = &pt, &p
	r.LeaderID = g.leader
	r.MemberID = m.id
	if m.id == g.leader {
		for _, o := range g.sortedMembers() {
			r.Members = append(r.Members, kmsg.JoinGroupResponseMember{
				MemberID: o.id, InstanceID: o.instanceID, ProtocolMetadata: o.metadataFor(g.protocol),
			})
		}
	}
	return r
}

// selectProtocol picks the protocol every member supports that most
// members prefer (each votes for its first supported candidate); ties go
// to the candidate the sorted-first member lists first.
func (g *group) selectProtocol() string {
	ms := g.sortedMembers()
	var candidates []string
	for _, p := range ms[0].protocols {
		all := true
		for _, m := range ms {
			if !hasProtocol(m, p.Name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	if len(candidates) == 0 {
		return ms[0].protocols[0].Name // unreachable: join checks support
	}
	votes := map[string]int{}
	for _, m := range ms {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := candidates[0]
	for _, c := range candidates {
		if votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

func (g *group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].id < ms[j].id })
	return ms
}

// removeMember drops m, answering any request it has waiting.
func (g *group) removeMember(e *effects, m *member) {
	if m.joinReply != 0 {
		e.reply(m.joinReply, joinError(m.joinVersion, m.id, kerr.UnknownMemberID.Code))
		m.joinReply = 0
	}
	if m.syncReply != 0 {
		r := kmsg.NewPtrSyncGroupResponse()
		r.Version, r.ErrorCode = m.syncVersion, kerr.UnknownMemberID.Code
		e.reply(m.syncReply, r)
		m.syncReply = 0
	}
	delete(g.members, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
}

// membersChanged rebalances after members left or expired.
func (g *group) membersChanged(e *effects, now time.Time) {
	switch g.state {
	case stateStable, stateCompletingRebalance:
		g.prepareRebalance(e, now)
		g.tryCompleteJoin(e, now)
	case statePreparingRebalance:
		if len(g.members) == 0 {
			g.initialJoin = false
		}
		g.tryCompleteJoin(e, now)
	}
}

// checkMember validates a member ID and instance ID against the group:
// 0, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID.
func (g *group) checkMember(memberID string, instanceID *string) (*member, int16) {
	if instanceID != nil {
		known, ok := g.static[*instanceID]
		if !ok {
			return nil, kerr.UnknownMemberID.Code
		}
		if known != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	return m, 0
}

// sync handles SyncGroup.
func (g *group) sync(e *effects, now time.Time, rid uint64, req *kmsg.SyncGroupRequest) {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = req.Version
	fail := func(code int16) {
		r.ErrorCode = code
		e.reply(rid, r)
	}
	if g.state == stateDead {
		fail(kerr.CoordinatorNotAvailable.Code)
		return
	}
	m, code := g.checkMember(req.MemberID, req.InstanceID)
	if code != 0 {
		fail(code)
		return
	}
	if req.Generation != g.generation {
		fail(kerr.IllegalGeneration.Code)
		return
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) || (req.Protocol != nil && *req.Protocol != g.protocol) {
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	m.sessionDeadline = now.Add(m.sessionTimeout)
	switch g.state {
	case statePreparingRebalance:
		fail(kerr.RebalanceInProgress.Code)
	case stateCompletingRebalance:
		if m.syncReply != 0 {
			old := kmsg.NewPtrSyncGroupResponse()
			old.Version, old.ErrorCode = m.syncVersion, kerr.RebalanceInProgress.Code
			e.reply(m.syncReply, old)
		}
		m.syncReply, m.syncVersion, m.synced = rid, req.Version, true
		if m.id != g.leader {
			return
		}
		for _, a := range req.GroupAssignment {
			if o := g.members[a.MemberID]; o != nil {
				o.assignment = a.MemberAssignment
			}
		}
		g.state = stateStable
		g.stateSince = now
		e.records = append(e.records, g.metadataRecord(now))
		for _, o := range g.sortedMembers() {
			if o.syncReply != 0 {
				e.reply(o.syncReply, g.syncResponse(o, o.syncVersion))
				o.syncReply = 0
			}
		}
	case stateStable:
		m.synced = true
		e.reply(rid, g.syncResponse(m, req.Version))
	default:
		fail(kerr.UnknownMemberID.Code)
	}
}

func (g *group) syncResponse(m *member, version int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	pt, p := g.protocolType, g.protocol
	r.ProtocolType, r.Protocol = &pt, &p
	r.MemberAssignment = m.assignment
	if r.MemberAssignment == nil {
		r.MemberAssignment = []byte{}
	}
	return r
}

// heartbeat handles Heartbeat: 0, or the error telling the member what to
// do next.
func (g *group) heartbeat(now time.Time, req *kmsg.HeartbeatRequest) int16 {
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	m, code := g.checkMember(req.MemberID, req.InstanceID)
	if code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m.sessionDeadline = now.Add(m.sessionTimeout)
	if g.state == statePreparingRebalance {
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// leave handles LeaveGroup: one entry per member identity, in order.
func (g *group) leave(e *effects, now time.Time, ids []kmsg.LeaveGroupRequestMember) []int16 {
	codes := make([]int16, len(ids))
	changed := false
	for i, id := range ids {
		if id.InstanceID == nil {
			if _, ok := g.pending[id.MemberID]; ok {
				delete(g.pending, id.MemberID)
				changed = true
				continue
			}
		}
		memberID := id.MemberID
		if id.InstanceID != nil && memberID == "" {
			// v3+: a static member may leave by instance ID alone.
			memberID = g.static[*id.InstanceID]
		}
		m, code := g.checkMember(memberID, id.InstanceID)
		if code != 0 {
			codes[i] = code
			continue
		}
		g.removeMember(e, m)
		changed = true
	}
	if changed {
		g.membersChanged(e, now)
	}
	return codes
}

// tick runs the timers: expired sessions, outstanding member IDs, the
// join deadline and the sync deadline.
func (g *group) tick(e *effects, now time.Time) {
	changed := false
	for id, dl := range g.pending {
		if !now.Before(dl) {
			delete(g.pending, id)
			changed = true
		}
	}
	for _, m := range g.sortedMembers() {
		waiting := g.state == statePreparingRebalance && m.joinReply != 0
		if !waiting && !now.Before(m.sessionDeadline) {
			g.removeMember(e, m)
			changed = true
		}
	}
	if (g.state == stateCompletingRebalance || g.state == stateStable) && !now.Before(g.syncDeadline) {
		for _, m := range g.sortedMembers() {
			if !m.synced {
				g.removeMember(e, m)
				changed = true
			}
		}
	}
	if changed {
		g.membersChanged(e, now)
	}
	if g.state == statePreparingRebalance && !now.Before(g.joinDeadline) {
		g.completeJoin(e, now)
	}
}

// metadataRecord is the group's GroupMetadataValue record.
func (g *group) metadataRecord(now time.Time) record {
	v := kmsg.NewGroupMetadataValue()
	v.Version = valueVersionGroup
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = now.UnixMilli()
	for _, m := range g.sortedMembers() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID, vm.InstanceID = m.id, m.instanceID
		vm.ClientID, vm.ClientHost = m.clientID, m.clientHost
		vm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout / time.Millisecond)
		vm.SessionTimeoutMillis = int32(m.sessionTimeout / time.Millisecond)
		vm.Subscription = m.metadataFor(g.protocol)
		vm.Assignment = m.assignment
		v.Members = append(v.Members, vm)
	}
	return record{Key: groupKey(g.id), Value: v.AppendTo(nil)}
}

// loadMetadata replaces the group's membership with a stored
// GroupMetadataValue (on load). Members get a fresh session: they must
// heartbeat within it or be removed.
func (g *group) loadMetadata(v *kmsg.GroupMetadataValue, now time.Time) {
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	g.protocol, g.leader = "", ""
	if v.Protocol != nil {
		g.protocol = *v.Protocol
	}
	if v.Leader != nil {
		g.leader = *v.Leader
	}
	g.members = map[string]*member{}
	g.static = map[string]string{}
	for _, vm := range v.Members {
		m := &member{
			id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
			sessionTimeout:   time.Duration(vm.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond,
			protocols:        []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: vm.Subscription}},
			assignment:       vm.Assignment,
			synced:           true,
		}
		if m.rebalanceTimeout <= 0 {
			m.rebalanceTimeout = m.sessionTimeout
		}
		m.sessionDeadline = now.Add(m.sessionTimeout)
		g.members[m.id] = m
		if m.instanceID != nil {
			g.static[*m.instanceID] = m.id
		}
	}
	g.state = stateEmpty
	if len(g.members) > 0 {
		g.state = stateStable
	}
	g.stateSince = now
	if v.CurrentStateTimestamp > 0 {
		g.stateSince = time.UnixMilli(v.CurrentStateTimestamp)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
