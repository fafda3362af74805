package groupcoord

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The script tests drive one group's state machine with commands and
// compare the printed effects (replies, records) with testdata/*.txt.
//
// If a script test fails, run `go test ./groupcoord -run TestScripts
// -rewrite` and inspect the diff. Only commit the changes if you
// understand what caused them.
var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt with the actual output")

// A script is a list of blocks:
//
//	command arg key=value ...
//	----
//	output lines
//	<blank line>
type scriptBlock struct {
	cmd, out string
}

func parseScript(t *testing.T, text string) []scriptBlock {
	var blocks []scriptBlock
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("line %d: %q not followed by ----", i+1, l)
		}
		i += 2
		var out []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			out = append(out, lines[i])
		}
		blocks = append(blocks, scriptBlock{cmd: l, out: strings.Join(out, "\n")})
	}
	return blocks
}

func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			env := newScriptEnv()
			var b strings.Builder
			for _, blk := range parseScript(t, string(raw)) {
				got := env.run(t, blk.cmd)
				if !*rewrite && got != blk.out {
					t.Errorf("%s: %s\n--- want\n%s\n--- got\n%s", f, blk.cmd, blk.out, got)
				}
				fmt.Fprintf(&b, "%s\n----\n%s\n\n", blk.cmd, got)
			}
			if *rewrite {
				// Keep the leading comment block.
				var head strings.Builder
				for _, l := range strings.Split(string(raw), "\n") {
					if !strings.HasPrefix(l, "#") {
						break
					}
					head.WriteString(l + "\n")
				}
				if head.Len() > 0 {
					head.WriteString("\n")
				}
				if err := os.WriteFile(f, []byte(head.String()+strings.TrimRight(b.String(), "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
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

func (env *scriptEnv) run(t *testing.T, line string) string {
	f := strings.Fields(line)
	cmd, args := f[0], map[string]string{}
	var pos []string
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	num := func(k string, def int) int {
		if v, ok := args[k]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %s=%q", line, k, v)
			}
			return n
		}
		return def
	}
	var inst *string
	if v, ok := args["instance"]; ok {
		inst = &v
	}
	env.rid++
	rid := env.rid
	env.labels[rid] = line
	var e effects
	var out []string
	g := env.g
	switch cmd {
	case "config":
		out = append(out, "ok")
		env.cfg.InitialRebalanceDelay = time.Duration(num("initial-delay", 0)) * time.Millisecond
		env.cfg.MaxGroupSize = num("max-size", env.cfg.MaxGroupSize)
	case "join":
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = int16(num("v", 9))
		req.Group, req.MemberID, req.InstanceID = "g", args["member"], inst
		req.SessionTimeoutMillis = int32(num("session", 10000))
		req.RebalanceTimeoutMillis = int32(num("rebalance", 30000))
		req.ProtocolType = "consumer"
		if v, ok := args["type"]; ok {
			req.ProtocolType = v
		}
		protos := "range"
		if v, ok := args["protocols"]; ok {
			protos = v
		}
		for _, p := range strings.Split(protos, ",") {
			name, meta, _ := strings.Cut(p, ":")
			req.Protocols = append(req.Protocols, kmsg.JoinGroupRequestProtocol{Name: name, Metadata: []byte(meta)})
		}
		g.join(&env.cfg, &e, env.now, rid, joinArgs{req: req, clientID: pos[0], clientHost: "/127.0.0.1"})
	case "sync":
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version = int16(num("v", 5))
		req.Group, req.MemberID, req.InstanceID = "g", args["member"], inst
		req.Generation = int32(num("gen", 0))
		if v, ok := args["assign"]; ok {
			for _, a := range strings.Split(v, ",") {
				id, data, _ := strings.Cut(a, ":")
				req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte(data)})
			}
		}
		g.sync(&e, env.now, rid, req)
	case "heartbeat":
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID, req.InstanceID = "g", args["member"], inst
		req.Generation = int32(num("gen", 0))
		out = append(out, "heartbeat: "+codeName(g.heartbeat(env.now, req)))
	case "leave":
		var ids []kmsg.LeaveGroupRequestMember
		for _, m := range strings.Split(args["members"], ",") {
			id, in, ok := strings.Cut(m, "/")
			lm := kmsg.LeaveGroupRequestMember{MemberID: id}
			if ok {
				lm.InstanceID = &in
			}
			ids = append(ids, lm)
		}
		for i, c := range g.leave(&e, env.now, ids) {
			out = append(out, fmt.Sprintf("leave %s: %s", ids[i].MemberID, codeName(c)))
		}
	case "commit":
		code := g.commitCheck(env.now, int16(num("v", 9)), int32(num("gen", -1)), args["member"], inst)
		out = append(out, "commit: "+codeName(code))
		if code == 0 {
			for _, o := range strings.Split(args["offsets"], ",") {
				tp, off, _ := strings.Cut(o, "=")
				tn, pn, _ := strings.Cut(tp, "/")
				p, _ := strconv.Atoi(pn)
				n, _ := strconv.ParseInt(off, 10, 64)
				e.records = append(e.records, g.commit(tn, int32(p), offsetEntry{Offset: n, LeaderEpoch: -1, CommitMs: env.now.UnixMilli()}))
			}
		}
	case "expire":
		d, err := time.ParseDuration(args["retention"])
		if err != nil {
			t.Fatal(err)
		}
		e.records = append(e.records, g.expireOffsets(env.now, d)...)
	case "delete":
		recs, code := g.deleteAll()
		e.records = append(e.records, recs...)
		out = append(out, "delete: "+codeName(code))
	case "tick":
		d, err := time.ParseDuration(pos[0])
		if err != nil {
			t.Fatal(err)
		}
		env.now = env.now.Add(d)
		g.tick(&e, env.now)
	case "restart":
		// Round-trip every written record through the batch format and
		// replay it into a fresh shard, as a new coordinator would.
		s := newShard(&Coordinator{cfg: env.cfg}, 0, 0)
		for _, b := range buildBatches(env.log, env.now.UnixMilli()) {
			if _, err := decodeBatches(b, 0, func(r decodedRecord) error { return s.replay(r, env.now) }); err != nil {
				t.Fatal(err)
			}
		}
		if env.g = s.groups["g"]; env.g == nil {
			env.g = newGroup("g", env.now)
		}
		if env.cg = s.cgroups["g"]; env.cg == nil {
			env.cg = newCGroup("g")
		}
		g = env.g
		out = append(out, "restarted")
	case "topic":
		env.topics[pos[0]] = topicMeta{name: pos[0], id: topicID(pos[0]), partitions: int32(num("partitions", 1))}
		env.topicVersion++
		out = append(out, "ok")
	case "untopic":
		delete(env.topics, pos[0])
		env.topicVersion++
		out = append(out, "ok")
	case "cg-hb":
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = int16(num("v", 1))
		req.Group, req.MemberID, req.InstanceID = "g", args["member"], inst
		req.MemberEpoch = int32(num("epoch", 0))
		req.RebalanceTimeoutMillis = int32(num("rebalance", -1))
		if v, ok := args["subscribe"]; ok {
			req.SubscribedTopicNames = strings.Split(v, ",")
		}
		if v, ok := args["assignor"]; ok {
			req.ServerAssignor = &v
		}
		if v, ok := args["regex"]; ok {
			req.SubscribedTopicRegex = &v
		}
		if v, ok := args["owned"]; ok {
			req.Topics = env.parseOwned(v)
		}
		src := func(n string) (topicMeta, bool) { t, ok := env.topics[n]; return t, ok }
		r := env.cg.heartbeat(&env.cfg, &e, env.now, heartbeatArgs{req: req, clientID: "c", clientHost: "/h", topicNames: env.listTopics}, src)
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
		out = append(out, line)
	case "cg-tick":
		d, err := time.ParseDuration(pos[0])
		if err != nil {
			t.Fatal(err)
		}
		env.now = env.now.Add(d)
		env.cg.tick(&e, env.now)
	case "state":
	default:
		t.Fatalf("unknown command %q", cmd)
	}
	for _, r := range e.records {
		env.log = append(env.log, r)
		out = append(out, describeRecord(r))
	}
	for _, r := range e.replies {
		out = append(out, fmt.Sprintf("reply to %q: %s", env.labels[r.id], describeResp(r.resp)))
	}
	switch {
	case strings.HasPrefix(cmd, "cg-") || cmd == "topic" || cmd == "untopic":
		if cmd != "topic" && cmd != "untopic" {
			out = append(out, env.describeCGroup())
		}
	case cmd == "restart":
		out = append(out, env.describeGroup(), env.describeCGroup())
	case cmd != "config":
		out = append(out, env.describeGroup())
	}
	return strings.Join(out, "\n")
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
