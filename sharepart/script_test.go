package sharepart

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/script"
)

// The script tests drive one partition's share state with the leader's
// decisions on an injected clock, apply every delta through its
// replicated form to two registries (the leader's and a replica's, which
// must stay equal), and print the decisions and the resulting state.
//
// Commands (the format: internal/script; GROUP is a share group's name,
// every state-changing command prints the group's state after it):
//
//	config [lock=MS] [limit=N] [locks=N] [backoff=INITIAL,MAX,MULTIPLIER] [jitter=F] [ttl=MS] [paused=on|off] [dlq=on|off]
//	                                      config lock=1000 limit=4
//	log [start=N] SPAN[@AGE]...           log 0-4 c5 6-9 a10-12 13-15@5000 (batches; c: control, a: aborted, both skipped; @AGE: newest timestamp AGE ms ago)
//	record OFF [age=MS] [ttl=MS] [after=MS]
//	                                      record 6 ttl=5000 after=2000 (the record at OFF carries strata.ttl.ms and/or
//	                                      strata.deliver.after.ms, AFTER ms from now; its timestamp AGE ms ago)
//	advance MS                            advance 1500            (moves the clock)
//	init GROUP start=N                    init g start=0
//	reset GROUP start=N                   reset g start=10
//	delete GROUP                          delete g                (prints the groups left)
//	acquire GROUP member=M [max=N] [strict]
//	                                      acquire g member=m1 max=3
//	ack GROUP member=M SPAN:TYPE,... [renew]
//	                                      ack g member=m1 0-2:accept 3:release 4-6:accept,gap,reject
//	release GROUP member=M                release g member=m1     (the member left)
//	expire GROUP                          expire g                (sweeps lapsed locks)
//	dead-done GROUP upto=N                dead-done g upto=2      (letters below ordinal N are written)
//	stream GROUP pid=P base=B topic=T partition=N
//	                                      stream g pid=7 base=0 topic=dlq partition=0
//	replay GROUP                          replay g                (the last delta again changes nothing)
//	lag GROUP hw=N                        lag g hw=10
//	drain GROUP                           drain g                 (the topic is being deleted)
//
// If a script test fails, run `go test ./sharepart -run TestScripts
// -rewrite` and inspect the diff. Only commit the changes if you
// understand what caused them.
func TestScripts(t *testing.T) {
	script.Run(t, "testdata/*.txt", func(t *testing.T) script.Commands { return newShareScript(t).commands() })
}

type shareScript struct {
	t        *testing.T
	now      int64
	cfg      Config
	batches  []Batch
	logStart int64
	leader   *Registry
	replica  *Registry // fed the encoded deltas, and a snapshot round trip at each step
	last     *Delta    // the last delta applied
}

func newShareScript(t *testing.T) *shareScript {
	return &shareScript{t: t, now: 1_000_000, cfg: Config{LockMs: 30_000, DeliveryLimit: 5, MaxLocks: 2000}, leader: NewRegistry(), replica: NewRegistry()}
}

func (sc *shareScript) atoi(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		sc.t.Fatalf("not a number: %q", s)
	}
	return n
}

// span parses "a-b" or "a".
func (sc *shareScript) span(s string) (int64, int64) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return sc.atoi(a), sc.atoi(a)
	}
	return sc.atoi(a), sc.atoi(b)
}

func (sc *shareScript) apply(d Delta) {
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

func (sc *shareScript) state(group string) *State {
	s, _ := sc.leader.Group(group)
	if s == nil {
		sc.t.Fatalf("group %s has no state", group)
	}
	return s
}

var ackNames = map[string]int8{"gap": AckGap, "accept": AckAccept, "release": AckRelease, "reject": AckReject, "renew": AckRenew}

func (sc *shareScript) commands() script.Commands {
	return script.Commands{
		"config":    sc.config,
		"log":       sc.log,
		"record":    sc.record,
		"advance":   func(c *script.Case) string { sc.now += sc.atoi(c.Need(0)); return fmt.Sprintf("now=%d", sc.now) },
		"init":      sc.init,
		"reset":     sc.reset,
		"delete":    sc.delete,
		"acquire":   sc.acquire,
		"ack":       sc.ack,
		"release":   sc.release,
		"expire":    sc.expire,
		"dead-done": sc.deadDone,
		"stream":    sc.stream,
		"replay":    sc.replay,
		"lag":       sc.lag,
		"drain":     sc.drain,
	}
}

func (sc *shareScript) config(c *script.Case) string {
	if v, ok := c.Arg("lock"); ok {
		sc.cfg.LockMs = sc.atoi(v)
	}
	if v, ok := c.Arg("limit"); ok {
		sc.cfg.DeliveryLimit = int16(sc.atoi(v))
	}
	if v, ok := c.Arg("locks"); ok {
		sc.cfg.MaxLocks = int(sc.atoi(v))
	}
	if v, ok := c.Arg("backoff"); ok {
		// backoff=INITIAL,MAX,MULTIPLIER
		parts := strings.Split(v, ",")
		if len(parts) != 3 {
			c.Fatalf("backoff=%s: want INITIAL,MAX,MULTIPLIER", v)
		}
		sc.cfg.BackoffInitialMs, sc.cfg.BackoffMaxMs = sc.atoi(parts[0]), sc.atoi(parts[1])
		sc.cfg.BackoffMultiplier = float64(sc.atoi(parts[2]))
		return fmt.Sprintf("backoff %d, %d, %d, %d ms for deliveries 1-4", sc.cfg.Backoff(1), sc.cfg.Backoff(2), sc.cfg.Backoff(3), sc.cfg.Backoff(4))
	}
	if v, ok := c.Arg("jitter"); ok {
		// jitter=F: prints delivery 1's delay for offsets 0-7
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			c.Fatalf("jitter=%s: %v", v, err)
		}
		sc.cfg.BackoffJitter = f
		var b strings.Builder
		fmt.Fprintf(&b, "jitter %g: delivery 1's backoff for offsets 0-7:", f)
		for off := int64(0); off < 8; off++ {
			fmt.Fprintf(&b, " %d", sc.cfg.BackoffAt(1, off))
		}
		return b.String() + " ms"
	}
	if v, ok := c.Arg("ttl"); ok {
		sc.cfg.TTLMs = sc.atoi(v)
		return fmt.Sprintf("ttl=%d", sc.cfg.TTLMs)
	}
	if v, ok := c.Arg("paused"); ok {
		sc.cfg.Paused = v == "on"
		return fmt.Sprintf("lock=%d limit=%d locks=%d paused=%v", sc.cfg.LockMs, sc.cfg.DeliveryLimit, sc.cfg.MaxLocks, sc.cfg.Paused)
	}
	if v, ok := c.Arg("dlq"); ok {
		sc.cfg.DeadLetters = v == "on"
		return fmt.Sprintf("lock=%d limit=%d locks=%d dlq=%v", sc.cfg.LockMs, sc.cfg.DeliveryLimit, sc.cfg.MaxLocks, sc.cfg.DeadLetters)
	}
	return fmt.Sprintf("lock=%d limit=%d locks=%d", sc.cfg.LockMs, sc.cfg.DeliveryLimit, sc.cfg.MaxLocks)
}

// log 0-4 c5 6-9 a10-12: batches (c: control, a: aborted, both skipped)
func (sc *shareScript) log(c *script.Case) string {
	sc.batches = sc.batches[:0]
	for _, x := range c.Fields {
		if v, ok := strings.CutPrefix(x, "start="); ok {
			sc.logStart = sc.atoi(v)
			continue
		}
		skip := strings.HasPrefix(x, "c") || strings.HasPrefix(x, "a")
		x, ts, _ := strings.Cut(x, "@") // SPAN@MS: the batch's newest timestamp, MS before now
		bt := Batch{Skip: skip}
		bt.First, bt.Last = sc.span(strings.TrimLeft(x, "ca"))
		if ts != "" {
			bt.MaxTs = sc.now - sc.atoi(ts)
		}
		sc.batches = append(sc.batches, bt)
	}
	return fmt.Sprintf("%d batches", len(sc.batches))
}

// record OFF [age=MS] [ttl=MS] [after=MS]: the record's own times (its
// headers) in the batch holding it.
func (sc *shareScript) record(c *script.Case) string {
	off := sc.atoi(c.Need(0))
	rt := RecordTimes{Offset: off, TsMs: sc.now - c.Int("age", 0), TTLMs: c.Int("ttl", -1)}
	if v, ok := c.Arg("after"); ok {
		rt.AfterMs = sc.now + sc.atoi(v)
	}
	for i := range sc.batches {
		if b := &sc.batches[i]; b.First <= off && off <= b.Last {
			b.Records = append(b.Records, rt)
			return fmt.Sprintf("batch %d-%d: %d records with their own times", b.First, b.Last, len(b.Records))
		}
	}
	c.Fatalf("no batch holds offset %d", off)
	return ""
}

func (sc *shareScript) init(c *script.Case) string {
	var d Delta
	d.Init(c.Need(0), sc.atoi(c.Str("start", "")))
	sc.apply(d)
	return sc.show(c.Need(0))
}

func (sc *shareScript) reset(c *script.Case) string {
	var d Delta
	d.Reset(c.Need(0), sc.atoi(c.Str("start", "")))
	sc.apply(d)
	return sc.show(c.Need(0))
}

func (sc *shareScript) delete(c *script.Case) string {
	var d Delta
	d.Delete(c.Need(0))
	sc.apply(d)
	return fmt.Sprintf("groups=%v", sc.leader.Groups())
}

// acquire GROUP member=M max=N [strict]
func (sc *shareScript) acquire(c *script.Case) string {
	g := c.Need(0)
	s := sc.state(g)
	from := NeedFrom(s)
	var bs []Batch
	for _, b := range sc.batches {
		if b.Last >= from {
			bs = append(bs, b)
		}
	}
	d, acq, st := Acquire(s, g, sc.cfg, AcquireParams{Member: c.Str("member", ""), Max: int(c.Int("max", 500)), Strict: c.Has("strict"), LogStart: sc.logStart, NowMs: sc.now}, bs)
	sc.apply(d)
	var parts []string
	for _, a := range acq {
		parts = append(parts, fmt.Sprintf("%d-%d#%d", a.First, a.Last, a.Count))
	}
	return fmt.Sprintf("acquired [%s] %s\n%s", strings.Join(parts, " "), stats(st), sc.show(g))
}

// ack GROUP member=M 0-2:accept 3:release 4-6:accept,gap,reject [renew]
func (sc *shareScript) ack(c *script.Case) string {
	g := c.Need(0)
	var batches []AckBatch
	for _, x := range c.Fields[1:] {
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
	d, st, err := Ack(sc.state(g), g, c.Str("member", ""), sc.cfg, batches, c.Has("renew"), sc.now)
	if err != nil {
		return fmt.Sprintf("error: %v\n%s", err, sc.show(g))
	}
	sc.apply(d)
	return fmt.Sprintf("ok %s\n%s", stats(st), sc.show(g))
}

func (sc *shareScript) release(c *script.Case) string {
	g := c.Need(0)
	d, st := Release(sc.state(g), g, c.Str("member", ""), sc.cfg)
	sc.apply(d)
	return fmt.Sprintf("%s\n%s", stats(st), sc.show(g))
}

func (sc *shareScript) expire(c *script.Case) string {
	g := c.Need(0)
	d, st, next := Expire(sc.state(g), g, sc.cfg, sc.now)
	sc.apply(d)
	return fmt.Sprintf("%s next=%d\n%s", stats(st), next, sc.show(g))
}

// dead-done GROUP upto=N: the letters below ordinal N are written
func (sc *shareScript) deadDone(c *script.Case) string {
	var d Delta
	d.DeadDone(c.Need(0), sc.atoi(c.Str("upto", "")))
	sc.apply(d)
	return sc.show(c.Need(0))
}

// stream GROUP pid=P base=B topic=T partition=N
func (sc *shareScript) stream(c *script.Case) string {
	var d Delta
	d.SetStream(c.Need(0), Stream{PID: sc.atoi(c.Str("pid", "")), Base: sc.atoi(c.Str("base", "")), Topic: c.Str("topic", ""), Partition: int32(sc.atoi(c.Str("partition", "")))})
	sc.apply(d)
	return sc.show(c.Need(0))
}

// replay GROUP: the last delta applied again changes nothing
func (sc *shareScript) replay(*script.Case) string {
	before := string(sc.leader.Snapshot())
	if sc.last != nil {
		sc.leader.ApplyDelta(sc.last)
	}
	if string(sc.leader.Snapshot()) != before {
		return "changed"
	}
	return "unchanged"
}

func (sc *shareScript) drain(c *script.Case) string {
	g := c.Need(0)
	d, st := Drain(sc.state(g), g, sc.cfg)
	sc.apply(d)
	return fmt.Sprintf("%s\n%s", stats(st), sc.show(g))
}

func (sc *shareScript) lag(c *script.Case) string {
	s := sc.state(c.Need(0))
	hw := sc.atoi(c.Str("hw", ""))
	return fmt.Sprintf("lag=%d oldest=%d", Lag(s, hw), OldestUnacked(s, hw))
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
	add("delayed", st.Delayed)
	add("hurried", st.Hurried)
	add("ttl-expired", st.TTLExpired)
	add("deferred", st.Deferred)
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
func (sc *shareScript) show(g string) string {
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
		if r.State == Available && r.Count == 0 && r.LastMs > 0 {
			fmt.Fprintf(&b, " expires %+d", r.LastMs-sc.now)
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
