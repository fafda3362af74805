package sharepart

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The script tests drive one partition's share state with the leader's
// decisions on an injected clock, apply every delta through its
// replicated form to two registries (the leader's and a replica's, which
// must stay equal), and print the decisions and the resulting state.
//
// If a script test fails, run `go test ./sharepart -run TestScripts
// -rewrite` and inspect the diff. Only commit the changes if you
// understand what caused them.
var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt with the actual output")

// A script is a list of blocks:
//
//	command arg key=value ...
//	----
//	output lines
//	<blank line>
type scriptBlock struct{ cmd, out string }

func parseScript(t *testing.T, text string) (blocks []scriptBlock, header string) {
	lines := strings.Split(text, "\n")
	var head []string
	inHeader := true
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			if inHeader {
				head = append(head, l)
			}
			continue
		}
		inHeader = false
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
	return blocks, strings.Join(head, "\n")
}

func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			blocks, header := parseScript(t, string(text))
			sc := newScript(t)
			var rewritten bytes.Buffer
			rewritten.WriteString(strings.TrimRight(header, "\n"))
			rewritten.WriteString("\n\n")
			for _, b := range blocks {
				got := sc.run(b.cmd)
				if got != b.out && !*rewrite {
					t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", f, b.cmd, got, b.out)
				}
				fmt.Fprintf(&rewritten, "%s\n----\n%s\n\n", b.cmd, got)
			}
			if *rewrite {
				out := strings.TrimLeft(rewritten.String(), "\n")
				if err := os.WriteFile(f, []byte(strings.TrimRight(out, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

type script struct {
	t        *testing.T
	now      int64
	cfg      Config
	batches  []Batch
	logStart int64
	leader   *Registry
	replica  *Registry // fed the encoded deltas, and a snapshot round trip at each step
	last     *Delta    // the last delta applied
}

func newScript(t *testing.T) *script {
	return &script{t: t, now: 1_000_000, cfg: Config{LockMs: 30_000, DeliveryLimit: 5, MaxLocks: 2000}, leader: NewRegistry(), replica: NewRegistry()}
}

func kv(args []string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		m[k] = v
	}
	return m
}

func (sc *script) atoi(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		sc.t.Fatalf("not a number: %q", s)
	}
	return n
}

// span parses "a-b" or "a".
func (sc *script) span(s string) (int64, int64) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return sc.atoi(a), sc.atoi(a)
	}
	return sc.atoi(a), sc.atoi(b)
}

func (sc *script) apply(d Delta) {
	sc.last = &d
	sc.leader.ApplyDelta(&d)
	if err := sc.replica.Apply(d.Encode()); err != nil {
		sc.t.Fatalf("replica apply: %v", err)
	}
	// The replica also survives a snapshot round trip at every step.
	snap := sc.replica.Snapshot()
	r := NewRegistry()
	if err := r.Restore(snap); err != nil {
		sc.t.Fatalf("restore: %v", err)
	}
	if !bytes.Equal(r.Snapshot(), snap) || !bytes.Equal(sc.leader.Snapshot(), snap) {
		sc.t.Fatalf("replica or restored snapshot differs from the leader's")
	}
	sc.replica = r
}

func (sc *script) state(group string) *State {
	s, _ := sc.leader.Group(group)
	if s == nil {
		sc.t.Fatalf("group %s has no state", group)
	}
	return s
}

var ackNames = map[string]int8{"gap": AckGap, "accept": AckAccept, "release": AckRelease, "reject": AckReject, "renew": AckRenew}

func (sc *script) run(cmd string) string {
	f := strings.Fields(cmd)
	args := kv(f[1:])
	switch f[0] {
	case "config":
		if v, ok := args["lock"]; ok {
			sc.cfg.LockMs = sc.atoi(v)
		}
		if v, ok := args["limit"]; ok {
			sc.cfg.DeliveryLimit = int16(sc.atoi(v))
		}
		if v, ok := args["locks"]; ok {
			sc.cfg.MaxLocks = int(sc.atoi(v))
		}
		if v, ok := args["backoff"]; ok {
			// backoff=INITIAL,MAX,MULTIPLIER
			parts := strings.Split(v, ",")
			sc.cfg.BackoffInitialMs, sc.cfg.BackoffMaxMs = sc.atoi(parts[0]), sc.atoi(parts[1])
			sc.cfg.BackoffMultiplier = float64(sc.atoi(parts[2]))
			return fmt.Sprintf("backoff %d, %d, %d, %d ms for deliveries 1-4", sc.cfg.Backoff(1), sc.cfg.Backoff(2), sc.cfg.Backoff(3), sc.cfg.Backoff(4))
		}
		if v, ok := args["paused"]; ok {
			sc.cfg.Paused = v == "on"
			return fmt.Sprintf("lock=%d limit=%d locks=%d paused=%v", sc.cfg.LockMs, sc.cfg.DeliveryLimit, sc.cfg.MaxLocks, sc.cfg.Paused)
		}
		if v, ok := args["dlq"]; ok {
			sc.cfg.DeadLetters = v == "on"
			return fmt.Sprintf("lock=%d limit=%d locks=%d dlq=%v", sc.cfg.LockMs, sc.cfg.DeliveryLimit, sc.cfg.MaxLocks, sc.cfg.DeadLetters)
		}
		return fmt.Sprintf("lock=%d limit=%d locks=%d", sc.cfg.LockMs, sc.cfg.DeliveryLimit, sc.cfg.MaxLocks)
	case "log":
		// log 0-4 c5 6-9 a10-12: batches (c: control, a: aborted, both skipped)
		sc.batches = sc.batches[:0]
		for _, x := range f[1:] {
			if v, ok := strings.CutPrefix(x, "start="); ok {
				sc.logStart = sc.atoi(v)
				continue
			}
			skip := strings.HasPrefix(x, "c") || strings.HasPrefix(x, "a")
			a, b := sc.span(strings.TrimLeft(x, "ca"))
			sc.batches = append(sc.batches, Batch{First: a, Last: b, Skip: skip})
		}
		return fmt.Sprintf("%d batches", len(sc.batches))
	case "advance":
		sc.now += sc.atoi(f[1])
		return fmt.Sprintf("now=%d", sc.now)
	case "init":
		var d Delta
		d.Init(f[1], sc.atoi(args["start"]))
		sc.apply(d)
		return sc.show(f[1])
	case "reset":
		var d Delta
		d.Reset(f[1], sc.atoi(args["start"]))
		sc.apply(d)
		return sc.show(f[1])
	case "delete":
		var d Delta
		d.Delete(f[1])
		sc.apply(d)
		return fmt.Sprintf("groups=%v", sc.leader.Groups())
	case "acquire":
		// acquire GROUP member=M max=N [strict]
		g := f[1]
		s := sc.state(g)
		from := NeedFrom(s)
		var bs []Batch
		for _, b := range sc.batches {
			if b.Last >= from {
				bs = append(bs, b)
			}
		}
		max := 500
		if v, ok := args["max"]; ok {
			max = int(sc.atoi(v))
		}
		_, strict := args["strict"]
		d, acq, st := Acquire(s, g, sc.cfg, AcquireParams{Member: args["member"], Max: max, Strict: strict, LogStart: sc.logStart, NowMs: sc.now}, bs)
		sc.apply(d)
		var parts []string
		for _, a := range acq {
			parts = append(parts, fmt.Sprintf("%d-%d#%d", a.First, a.Last, a.Count))
		}
		return fmt.Sprintf("acquired [%s] %s\n%s", strings.Join(parts, " "), stats(st), sc.show(g))
	case "ack":
		// ack GROUP member=M 0-2:accept 3:release 4-6:accept,gap,reject [renew]
		g := f[1]
		var batches []AckBatch
		_, renew := args["renew"]
		for _, x := range f[2:] {
			sp, types, ok := strings.Cut(x, ":")
			if !ok {
				continue
			}
			a, b := sc.span(sp)
			var ts []int8
			for _, n := range strings.Split(types, ",") {
				t, ok := ackNames[n]
				if !ok {
					t = int8(sc.atoi(n))
				}
				ts = append(ts, t)
			}
			batches = append(batches, AckBatch{First: a, Last: b, Types: ts})
		}
		d, st, err := Ack(sc.state(g), g, args["member"], sc.cfg, batches, renew, sc.now)
		if err != nil {
			return fmt.Sprintf("error: %v\n%s", err, sc.show(g))
		}
		sc.apply(d)
		return fmt.Sprintf("ok %s\n%s", stats(st), sc.show(g))
	case "release":
		g := f[1]
		d, st := Release(sc.state(g), g, args["member"], sc.cfg)
		sc.apply(d)
		return fmt.Sprintf("%s\n%s", stats(st), sc.show(g))
	case "expire":
		g := f[1]
		d, st, next := Expire(sc.state(g), g, sc.cfg, sc.now)
		sc.apply(d)
		return fmt.Sprintf("%s next=%d\n%s", stats(st), next, sc.show(g))
	case "dead-done":
		// dead-done GROUP upto=N: the letters below ordinal N are written
		var d Delta
		d.DeadDone(f[1], sc.atoi(args["upto"]))
		sc.apply(d)
		return sc.show(f[1])
	case "stream":
		// stream GROUP pid=P base=B topic=T partition=N
		var d Delta
		d.SetStream(f[1], Stream{PID: sc.atoi(args["pid"]), Base: sc.atoi(args["base"]), Topic: args["topic"], Partition: int32(sc.atoi(args["partition"]))})
		sc.apply(d)
		return sc.show(f[1])
	case "replay":
		// replay GROUP: the last delta applied again changes nothing
		before := string(sc.leader.Snapshot())
		if sc.last != nil {
			sc.leader.ApplyDelta(sc.last)
		}
		if string(sc.leader.Snapshot()) != before {
			return "changed"
		}
		return "unchanged"
	case "lag":
		s := sc.state(f[1])
		hw := sc.atoi(args["hw"])
		return fmt.Sprintf("lag=%d oldest=%d", Lag(s, hw), OldestUnacked(s, hw))
	}
	sc.t.Fatalf("unknown command %q", cmd)
	return ""
}

func stats(st Stats) string {
	var parts []string
	add := func(name string, n int) {
		if n != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", name, n))
		}
	}
	add("acquired", st.Acquired)
	add("redelivered", st.Redelivered)
	add("accepted", st.Accepted)
	add("released", st.Released)
	add("rejected", st.Rejected)
	add("renewed", st.Renewed)
	add("gaps", st.Gaps)
	add("expired", st.Expired)
	add("archived-limit", st.ArchivedLimit)
	add("archived-skip", st.ArchivedSkip)
	add("dead-lettered", st.DeadLettered)
	add("dead-dropped", st.DeadDropped)
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, " ")
}

// show prints a group's state: start, end, then each run of records.
func (sc *script) show(g string) string {
	s, _ := sc.leader.Group(g)
	if s == nil {
		return "no state"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "state start=%d end=%d epoch=%d", s.Start, s.End(), s.Epoch)
	for _, r := range s.runs() {
		fmt.Fprintf(&b, "\n  %d-%d %s", r.First, r.Last, r.State)
		if r.Count > 0 {
			fmt.Fprintf(&b, " #%d", r.Count)
		}
		if r.State == Acquired {
			fmt.Fprintf(&b, " by %s until %+d", r.Member, r.Deadline-sc.now)
		}
		if r.State == Available && r.Deadline > 0 {
			fmt.Fprintf(&b, " not before %+d", r.Deadline-sc.now)
		}
	}
	if st := s.Stream(); st.PID != 0 {
		fmt.Fprintf(&b, "\n  stream pid=%d base=%d to %s-%d", st.PID, st.Base, st.Topic, st.Partition)
	}
	if s.NextOrdinal() > 0 {
		fmt.Fprintf(&b, "\n  dead letters next=%d", s.NextOrdinal())
	}
	for _, l := range s.DeadLetters() {
		fmt.Fprintf(&b, "\n    #%d offset=%d %s count=%d member=%q first=%+d last=%+d", l.Ordinal, l.Offset, l.Reason, l.Count, l.Member, l.FirstMs-sc.now, l.LastMs-sc.now)
		if st := s.Stream(); st.PID != 0 {
			fmt.Fprintf(&b, " seq=%d", st.Sequence(l.Ordinal))
		}
	}
	return b.String()
}

// TestAckThenAcquireInOneDelta: acknowledgements and the acquisition after
// them travel as one delta (After, Append), and give the same state as two.
func TestAckThenAcquireInOneDelta(t *testing.T) {
	cfg := Config{LockMs: 1000, DeliveryLimit: 5, MaxLocks: 100}
	batches := []Batch{{First: 0, Last: 9}}
	one, two := NewRegistry(), NewRegistry()
	for _, r := range []*Registry{one, two} {
		var d Delta
		d.Init("g", 0)
		r.ApplyDelta(&d)
		st, _ := r.Group("g")
		d, _, _ = Acquire(st, "g", cfg, AcquireParams{Member: "m", Max: 5, Strict: true, NowMs: 10}, batches)
		r.ApplyDelta(&d)
	}
	// Two deltas.
	st, _ := two.Group("g")
	ack, _, err := Ack(st, "g", "m", cfg, []AckBatch{{First: 0, Last: 4, Types: []int8{AckAccept}}}, false, 20)
	if err != nil {
		t.Fatal(err)
	}
	two.ApplyDelta(&ack)
	st, _ = two.Group("g")
	acq, _, _ := Acquire(st, "g", cfg, AcquireParams{Member: "m", Max: 5, NowMs: 20}, batches)
	two.ApplyDelta(&acq)
	// One delta.
	st, _ = one.Group("g")
	ack1, _, err := Ack(st, "g", "m", cfg, []AckBatch{{First: 0, Last: 4, Types: []int8{AckAccept}}}, false, 20)
	if err != nil {
		t.Fatal(err)
	}
	acq1, got, _ := Acquire(st.After(&ack1, "g"), "g", cfg, AcquireParams{Member: "m", Max: 5, NowMs: 20}, batches)
	ack1.Append(acq1)
	if err := one.Apply(ack1.Encode()); err != nil {
		t.Fatal(err)
	}
	if string(one.Snapshot()) != string(two.Snapshot()) {
		t.Fatal("one combined delta and two deltas give different states")
	}
	if len(got) != 1 || got[0].First != 5 || got[0].Last != 9 {
		t.Fatalf("acquired %+v after the acks, want 5-9", got)
	}
}
