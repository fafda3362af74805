package groupcoord

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/script"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The script tests drive one group's state machine with commands and
// compare the printed effects (records written, replies, then the group's
// state) with testdata/*.txt (the format: internal/script). The clock is
// the script's own: only tick and cg-tick move it. Commands (classic group;
// each prints its records and replies, then the group's state):
//
//	config [initial-delay=MS] [max-size=N]       config initial-delay=3000   (prints ok)
//	join CLIENT [member=ID] [instance=ID] [v=9] [session=MS] [rebalance=MS] [type=consumer] [protocols=NAME:META,...]
//	                                             join a v=3 protocols=range:x,roundrobin:y
//	sync member=ID gen=N [instance=ID] [v=5] [assign=ID:DATA,...]
//	                                             sync member=a-1 gen=1 assign=a-1:p0
//	heartbeat member=ID gen=N [instance=ID]      heartbeat member=a-1 gen=1
//	leave members=ID[/INSTANCE],...              leave members=a-1,b-2/static-b
//	commit [member=ID] [gen=N] [instance=ID] [v=9] offsets=TOPIC/P=OFFSET,...
//	                                             commit member=a-1 gen=1 offsets=t/0=5,t/1=7
//	expire retention=DURATION                    expire retention=24h
//	delete                                       delete
//	tick DURATION                                tick 1s   (moves the clock, runs the timers)
//	state                                        state
//	restart                                      restart   (replays every record written into a fresh shard; prints both groups)
//
// KIP-848 group (each prints its records, then the group's state):
//
//	topic NAME [partitions=N]                    topic t partitions=3   (prints ok, no state)
//	untopic NAME                                 untopic t
//	cg-hb member=ID [epoch=N] [instance=ID] [v=1] [rebalance=MS] [subscribe=T,...] [assignor=NAME] [regex=RE] [owned=T:P,P;T:P|-]
//	                                             cg-hb member=m1 subscribe=t owned=t:0,1
//	cg-tick DURATION                             cg-tick 45s
//
// If a script test fails, run `go test ./groupcoord -run TestScripts
// -rewrite` and inspect the diff. Only commit the changes if you
// understand what caused them.
func TestScripts(t *testing.T) {
	script.Run(t, "testdata/*.txt", func(*testing.T) script.Commands { return newScriptEnv().commands() })
}

type scriptEnv struct {
	cfg    Config
	now    time.Time
	g      *group
	rid    uint64
	labels map[uint64]string
	log    []record // every record written, for restart
	ids    int
	cg     *cgroup              // the KIP-848 group "g"
	topics map[string]topicMeta // topics the KIP-848 assignors see
	// topicVersion moves whenever topics changes (the metadata version
	// regex subscriptions are resolved against).
	topicVersion int64
}

func (env *scriptEnv) listTopics() ([]string, int64) {
	names := make([]string, 0, len(env.topics))
	for n := range env.topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, env.topicVersion
}

func topicID(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	return id
}

func topicName(id [16]byte) string { return strings.TrimRight(string(id[:]), "\x00") }

func (env *scriptEnv) parseOwned(s string) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if s == "-" {
		return out
	}
	for _, t := range strings.Split(s, ";") {
		name, ps, _ := strings.Cut(t, ":")
		rt := kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: topicID(name)}
		for _, p := range strings.Split(ps, ",") {
			n, _ := strconv.Atoi(p)
			rt.Partitions = append(rt.Partitions, int32(n))
		}
		out = append(out, rt)
	}
	return out
}

func describeAssignment(a assignment) string {
	var parts []string
	for _, t := range sortedTopicIDs(a) {
		var ps []string
		for _, p := range a[t] {
			ps = append(ps, strconv.Itoa(int(p)))
		}
		parts = append(parts, topicName(t)+":"+strings.Join(ps, ","))
	}
	return strings.Join(parts, ";")
}

func (env *scriptEnv) describeCGroup() string {
	g := env.cg
	var ms []string
	for _, m := range g.sortedMembers() {
		s := fmt.Sprintf("%s@%d[%s]", m.id, m.epoch, describeAssignment(m.assigned))
		if m.regex != "" {
			s += fmt.Sprintf("{/%s/ %s}", m.regex, strings.Join(g.memberTopics(m), ","))
		}
		if len(m.pendingRevoke) > 0 {
			s += "-revoking[" + describeAssignment(m.pendingRevoke) + "]"
		}
		if t := describeAssignment(g.target[m.id]); t != describeAssignment(m.assigned) {
			s += "->[" + t + "]"
		}
		ms = append(ms, s)
	}
	return fmt.Sprintf("cg state=%s epoch=%d assignment-epoch=%d members=[%s]", g.stateName(), g.epoch, g.assignmentEpoch, strings.Join(ms, " "))
}

func newScriptEnv() *scriptEnv {
	e := &scriptEnv{now: time.Unix(1700000000, 0), labels: map[uint64]string{}}
	e.cfg = Config{InitialRebalanceDelay: -1, NewMemberID: func(c string) string {
		e.ids++
		return c + "-" + strconv.Itoa(e.ids)
	}}.withDefaults()
	e.g = newGroup("g", e.now)
	e.cg = newCGroup("g")
	e.topics = map[string]topicMeta{}
	return e
}

// A handler's body: reads its command, records effects, returns any
// lines to print before the records and replies.
type step func(c *script.Case, e *effects) []string

// commands binds every command to env, each with what it prints after its
// own lines, records and replies.
func (env *scriptEnv) commands() script.Commands {
	none := func() []string { return nil }
	group := func() []string { return []string{env.describeGroup()} }
	cgroup := func() []string { return []string{env.describeCGroup()} }
	both := func() []string { return []string{env.describeGroup(), env.describeCGroup()} }
	cmds := script.Commands{}
	add := func(name string, s step, after func() []string) {
		cmds[name] = func(c *script.Case) string { return env.run(c, s, after) }
	}
	add("config", env.config, none)
	add("join", env.join, group)
	add("sync", env.sync, group)
	add("heartbeat", env.heartbeat, group)
	add("leave", env.leave, group)
	add("commit", env.commit, group)
	add("expire", env.expire, group)
	add("delete", env.delete, group)
	add("tick", env.tick, group)
	add("state", func(*script.Case, *effects) []string { return nil }, group)
	add("restart", env.restart, both)
	add("topic", env.topic, none)
	add("untopic", env.untopic, none)
	add("cg-hb", env.cgHeartbeat, cgroup)
	add("cg-tick", env.cgTick, cgroup)
	return cmds
}

// run runs one step and prints its lines, the records it wrote, the
// replies it sent (each labelled with the command line that asked), then
// after's lines.
func (env *scriptEnv) run(c *script.Case, s step, after func() []string) string {
	env.rid++
	env.labels[env.rid] = c.Text
	var e effects
	out := s(c, &e)
	for _, r := range e.records {
		env.log = append(env.log, r)
		out = append(out, describeRecord(r))
	}
	for _, r := range e.replies {
		out = append(out, fmt.Sprintf("reply to %q: %s", env.labels[r.id], describeResp(r.resp)))
	}
	return strings.Join(append(out, after()...), "\n")
}

func num(c *script.Case, key string, def int) int { return int(c.Int(key, int64(def))) }

func instance(c *script.Case) *string {
	if v, ok := c.Arg("instance"); ok {
		return &v
	}
	return nil
}

func duration(c *script.Case, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		c.Fatalf("%v", err)
	}
	return d
}

func (env *scriptEnv) config(c *script.Case, _ *effects) []string {
	env.cfg.InitialRebalanceDelay = time.Duration(num(c, "initial-delay", 0)) * time.Millisecond
	env.cfg.MaxGroupSize = num(c, "max-size", env.cfg.MaxGroupSize)
	return []string{"ok"}
}

func (env *scriptEnv) join(c *script.Case, e *effects) []string {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = int16(num(c, "v", 9))
	req.Group, req.MemberID, req.InstanceID = "g", c.Str("member", ""), instance(c)
	req.SessionTimeoutMillis = int32(num(c, "session", 10000))
	req.RebalanceTimeoutMillis = int32(num(c, "rebalance", 30000))
	req.ProtocolType = c.Str("type", "consumer")
	for _, p := range strings.Split(c.Str("protocols", "range"), ",") {
		name, meta, _ := strings.Cut(p, ":")
		req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: name, Metadata: []byte(meta)})
	}
	env.g.join(&env.cfg, e, env.now, env.rid, joinArgs{req: req, clientID: c.Need(0), clientHost: "/127.0.0.1"})
	return nil
}

func (env *scriptEnv) sync(c *script.Case, e *effects) []string {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = int16(num(c, "v", 5))
	req.Group, req.MemberID, req.InstanceID = "g", c.Str("member", ""), instance(c)
	req.Generation = int32(num(c, "gen", 0))
	if v, ok := c.Arg("assign"); ok {
		for _, a := range strings.Split(v, ",") {
			id, data, _ := strings.Cut(a, ":")
			req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(data)})
		}
	}
	env.g.sync(e, env.now, env.rid, req)
	return nil
}

func (env *scriptEnv) heartbeat(c *script.Case, _ *effects) []string {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.InstanceID = "g", c.Str("member", ""), instance(c)
	req.Generation = int32(num(c, "gen", 0))
	return []string{"heartbeat: " + codeName(env.g.heartbeat(env.now, req))}
}

func (env *scriptEnv) leave(c *script.Case, e *effects) []string {
	var ids []kmsg.LeaveGroupRequestMember
	for _, m := range strings.Split(c.Str("members", ""), ",") {
		id, in, ok := strings.Cut(m, "/")
		lm := kmsg.LeaveGroupRequestMember{MemberID: id}
		if ok {
			lm.InstanceID = &in
		}
		ids = append(ids, lm)
	}
	var out []string
	for i, code := range env.g.leave(e, env.now, ids) {
		out = append(out, fmt.Sprintf("leave %s: %s", ids[i].MemberID, codeName(code)))
	}
	return out
}

func (env *scriptEnv) commit(c *script.Case, e *effects) []string {
	code := env.g.commitCheck(env.now, int16(num(c, "v", 9)), int32(num(c, "gen", -1)), c.Str("member", ""), instance(c))
	if code == 0 {
		for _, o := range strings.Split(c.Str("offsets", ""), ",") {
			tp, off, _ := strings.Cut(o, "=")
			tn, pn, _ := strings.Cut(tp, "/")
			p, _ := strconv.Atoi(pn)
			n, _ := strconv.ParseInt(off, 10, 64)
			e.records = append(e.records, env.g.commit(tn, int32(p), offsetEntry{Offset: n, LeaderEpoch: -1, CommitMs: env.now.UnixMilli()}))
		}
	}
	return []string{"commit: " + codeName(code)}
}

func (env *scriptEnv) expire(c *script.Case, e *effects) []string {
	e.records = append(e.records, env.g.expireOffsets(env.now, duration(c, c.Str("retention", "")))...)
	return nil
}

func (env *scriptEnv) delete(_ *script.Case, e *effects) []string {
	recs, code := env.g.deleteAll()
	e.records = append(e.records, recs...)
	return []string{"delete: " + codeName(code)}
}

func (env *scriptEnv) tick(c *script.Case, e *effects) []string {
	env.now = env.now.Add(duration(c, c.Need(0)))
	env.g.tick(e, env.now)
	return nil
}

// restart round-trips every written record through the batch format and
// replays it into a fresh shard, as a new coordinator would.
func (env *scriptEnv) restart(c *script.Case, _ *effects) []string {
	s := newShard(&Coordinator{cfg: env.cfg}, 0, 0)
	for _, b := range buildBatches(env.log, env.now.UnixMilli()) {
		if _, err := decodeBatches(b, 0, func(r decodedRecord) error { return s.replay(r, env.now) }); err != nil {
			c.Fatalf("%v", err)
		}
	}
	if env.g = s.groups["g"]; env.g == nil {
		env.g = newGroup("g", env.now)
	}
	if env.cg = s.cgroups["g"]; env.cg == nil {
		env.cg = newCGroup("g")
	}
	return []string{"restarted"}
}

func (env *scriptEnv) topic(c *script.Case, _ *effects) []string {
	name := c.Need(0)
	env.topics[name] = topicMeta{name: name, id: topicID(name), partitions: int32(num(c, "partitions", 1))}
	env.topicVersion++
	return []string{"ok"}
}

func (env *scriptEnv) untopic(c *script.Case, _ *effects) []string {
	delete(env.topics, c.Need(0))
	env.topicVersion++
	return []string{"ok"}
}

func (env *scriptEnv) cgHeartbeat(c *script.Case, e *effects) []string {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = int16(num(c, "v", 1))
	req.Group, req.MemberID, req.InstanceID = "g", c.Str("member", ""), instance(c)
	req.MemberEpoch = int32(num(c, "epoch", 0))
	req.RebalanceTimeoutMillis = int32(num(c, "rebalance", -1))
	if v, ok := c.Arg("subscribe"); ok {
		req.SubscribedTopicNames = strings.Split(v, ",")
	}
	if v, ok := c.Arg("assignor"); ok {
		req.ServerAssignor = &v
	}
	if v, ok := c.Arg("regex"); ok {
		req.SubscribedTopicRegex = &v
	}
	if v, ok := c.Arg("owned"); ok {
		req.Topics = env.parseOwned(v)
	}
	src := func(n string) (topicMeta, bool) { t, ok := env.topics[n]; return t, ok }
	r := env.cg.heartbeat(&env.cfg, e, env.now, heartbeatArgs{req: req, clientID: "c", clientHost: "/h", topicNames: env.listTopics}, src)
	line := "hb " + codeName(r.ErrorCode)
	if r.ErrorMessage != nil {
		line += fmt.Sprintf(" %q", *r.ErrorMessage)
	}
	if r.ErrorCode == 0 {
		line += fmt.Sprintf(" epoch=%d", r.MemberEpoch)
		if r.Assignment != nil {
			a := assignment{}
			for _, t := range r.Assignment.Topics {
				for _, p := range t.Partitions {
					a.add(topicPartition{t.TopicID, p})
				}
			}
			line += " assignment=[" + describeAssignment(a) + "]"
		}
	}
	return []string{line}
}

func (env *scriptEnv) cgTick(c *script.Case, e *effects) []string {
	env.now = env.now.Add(duration(c, c.Need(0)))
	env.cg.tick(e, env.now)
	return nil
}

func codeName(c int16) string {
	if c == 0 {
		return "OK"
	}
	return kerr.ErrorForCode(c).(*kerr.Error).Message
}

func describeResp(r kmsg.Response) string {
	switch r := r.(type) {
	case *kmsg.JoinGroupResponse:
		s := fmt.Sprintf("join %s member=%s gen=%d", codeName(r.ErrorCode), r.MemberID, r.Generation)
		if r.ErrorCode == 0 {
			s += fmt.Sprintf(" leader=%s protocol=%s", r.LeaderID, *r.Protocol)
			var ms []string
			for _, m := range r.Members {
				ms = append(ms, m.MemberID+":"+string(m.ProtocolMetadata))
			}
			if len(ms) > 0 {
				s += " members=[" + strings.Join(ms, " ") + "]"
			}
		}
		return s
	case *kmsg.SyncGroupResponse:
		if r.ErrorCode != 0 {
			return "sync " + codeName(r.ErrorCode)
		}
		return fmt.Sprintf("sync OK assignment=%q", r.MemberAssignment)
	}
	return fmt.Sprintf("%T", r)
}

func describeRecord(r record) string {
	if len(r.Key) >= 2 && r.Key[1] >= keyCGMetadata {
		d := &dec{b: r.Key[2:]}
		g := d.str()
		name := map[byte]string{keyCGMetadata: "cg-epoch", keyCGMember: "cg-member", keyCGTargetMetadata: "cg-target-epoch", keyCGTargetMember: "cg-target", keyCGCurrent: "cg-current"}[r.Key[1]]
		if r.Key[1] == keyCGMember || r.Key[1] == keyCGTargetMember || r.Key[1] == keyCGCurrent {
			g = d.str()
		}
		if r.Value == nil {
			return "write " + name + " " + g + " tombstone"
		}
		return "write " + name + " " + g
	}
	if len(r.Key) >= 2 && r.Key[1] == keyVersionGroup {
		if r.Value == nil {
			return "write group tombstone"
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(r.Value); err != nil {
			return "write bad group record: " + err.Error()
		}
		var ms []string
		for _, m := range v.Members {
			ms = append(ms, fmt.Sprintf("%s:%q", m.MemberID, m.Assignment))
		}
		return fmt.Sprintf("write group gen=%d protocol=%s leader=%s members=[%s]", v.Generation, ptrStr(v.Protocol), ptrStr(v.Leader), strings.Join(ms, " "))
	}
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(r.Key); err != nil {
		return "write bad offset key"
	}
	if r.Value == nil {
		return fmt.Sprintf("write offset %s/%d tombstone", k.Topic, k.Partition)
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(r.Value); err != nil {
		return "write bad offset value"
	}
	return fmt.Sprintf("write offset %s/%d=%d", k.Topic, k.Partition, v.Offset)
}

func ptrStr(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func (env *scriptEnv) describeGroup() string {
	g := env.g
	var ms []string
	for _, m := range g.sortedMembers() {
		s := m.id
		if m.joinReply != 0 {
			s += "(joining)"
		}
		if m.syncReply != 0 {
			s += "(syncing)"
		}
		ms = append(ms, s)
	}
	var pend []string
	for id := range g.pending {
		pend = append(pend, id)
	}
	sort.Strings(pend)
	var offs []string
	for _, t := range g.sortedOffsetTopics() {
		for _, p := range sortedPartitions(g.offsets[t]) {
			offs = append(offs, fmt.Sprintf("%s/%d=%d", t, p, g.offsets[t][p].Offset))
		}
	}
	s := fmt.Sprintf("state=%s gen=%d leader=%s members=[%s]", g.state, g.generation, g.leader, strings.Join(ms, " "))
	if len(pend) > 0 {
		s += " pending=[" + strings.Join(pend, " ") + "]"
	}
	if len(offs) > 0 {
		s += " offsets=[" + strings.Join(offs, " ") + "]"
	}
	return s
}
