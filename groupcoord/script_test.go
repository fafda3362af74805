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
}

func newScriptEnv() *scriptEnv {
	e := &scriptEnv{now: time.Unix(1700000000, 0), labels: map[uint64]string{}}
	e.cfg = Config{InitialRebalanceDelay: -1, NewMemberID: func(c string) string {
		e.ids++
		return c + "-" + strconv.Itoa(e.ids)
	}}.withDefaults()
	e.g = newGroup("g", e.now)
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
		g = env.g
		out = append(out, "restarted")
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
	if cmd != "config" {
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
