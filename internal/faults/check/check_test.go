package check

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)

// at is t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// good is a history that breaks nothing: two producers on t-0 (one
// transactional, with a committed and an aborted transaction), reads of
// both isolation levels, a group's commits and fetches, a share group's
// acks, a fault and its heal, and identical replicas.
func good() *History {
	h := &History{Seed: 42, Schedule: []string{"+1.0s kill 2", "+3.0s restart 2"}}
	h.Add(Op{Type: Fault, Note: "kill 2", Start: at(1000), End: at(3000)})
	h.Add(Op{Type: Produce, Process: "p1", Topic: "t", Start: at(10), End: at(20), Value: "p1-0", Ok: true, Offset: 0})
	h.Add(Op{Type: Produce, Process: "p1", Topic: "t", Start: at(11), End: at(21), Value: "p1-1", Ok: true, Offset: 1})
	h.Add(Op{Type: Produce, Process: "x1", Topic: "t", Start: at(30), End: at(40), Value: "x1-0", Ok: true, Offset: 2, Txn: "x1/1"})
	h.Add(Op{Type: TxnEnd, Process: "x1", Txn: "x1/1", Start: at(50), End: at(60), Ok: true})
	// offset 3: x1/1's commit marker
	h.Add(Op{Type: Produce, Process: "x1", Topic: "t", Start: at(70), End: at(80), Value: "x1-1", Ok: true, Offset: 4, Txn: "x1/2"})
	h.Add(Op{Type: TxnEnd, Process: "x1", Txn: "x1/2", Abort: true, Start: at(90), End: at(100), Ok: true})
	// offset 5: x1/2's abort marker
	h.Add(Op{Type: Produce, Process: "p1", Topic: "t", Start: at(110), End: at(2900), Value: "p1-2", Err: "timeout"})
	h.Add(Op{Type: Produce, Process: "p1", Topic: "t", Start: at(3100), End: at(3200), Value: "p1-3", Ok: true, Offset: 7})
	h.Add(Op{Type: Heal, Start: at(3000), End: at(3000)})
	for i, v := range []string{"p1-0", "p1-1", "x1-0", "", "x1-1", "", "p1-2", "p1-3"} {
		if v == "" {
			continue
		}
		h.Add(Op{Type: Read, Process: "c1", Topic: "t", Isolation: ReadUncommitted, Start: at(4000 + i), End: at(4000 + i), Offset: int64(i), Value: v})
	}
	for i, v := range []string{"p1-0", "p1-1", "x1-0", "", "", "", "p1-2", "p1-3"} {
		if v == "" {
			continue
		}
		h.Add(Op{Type: Read, Process: "c2", Topic: "t", Isolation: ReadCommitted, Start: at(4100 + i), End: at(4100 + i), Offset: int64(i), Value: v})
	}
	h.Add(Op{Type: Commit, Process: "c2", Group: "g", Topic: "t", Offset: 3, Start: at(4200), End: at(4210), Ok: true})
	h.Add(Op{Type: OffsetFetch, Process: "c3", Group: "g", Topic: "t", Offset: 3, Start: at(4220), End: at(4230)})
	h.Add(Op{Type: Commit, Process: "c2", Group: "g", Topic: "t", Offset: 8, Start: at(4240), End: at(4300), Err: "timeout"})
	// Asked for while the commit of 8 was in flight: either answer is right.
	h.Add(Op{Type: OffsetFetch, Process: "c3", Group: "g", Topic: "t", Offset: 8, Start: at(4250), End: at(4260)})
	h.Add(Op{Type: Read, Process: "s1", Group: "sg", Topic: "t", Isolation: ReadCommitted, Offset: 0, Value: "p1-0", Start: at(5000), End: at(5001)})
	h.Add(Op{Type: ShareAck, Process: "s1", Group: "sg", Topic: "t", Offset: 0, Ack: "release", Ok: true, Start: at(5002), End: at(5003)})
	h.Add(Op{Type: Read, Process: "s2", Group: "sg", Topic: "t", Isolation: ReadCommitted, Offset: 0, Value: "p1-0", Start: at(5004), End: at(5005)})
	h.Add(Op{Type: ShareAck, Process: "s2", Group: "sg", Topic: "t", Offset: 0, Ack: "accept", Ok: true, Start: at(5006), End: at(5007)})
	h.Final = []Final{{Topic: "t", Log: Log{Start: 0, HighWatermark: 8,
		Records:   []Rec{{0, "p1-0"}, {1, "p1-1"}, {2, "x1-0"}, {4, "x1-1"}, {6, "p1-2"}, {7, "p1-3"}},
		Committed: []Rec{{0, "p1-0"}, {1, "p1-1"}, {2, "x1-0"}, {6, "p1-2"}, {7, "p1-3"}}}}}
	for b := int32(1); b <= 3; b++ {
		h.Replicas = append(h.Replicas, Replica{Broker: b, Topic: "t", Start: 0, HighWatermark: 8,
			Entries: []Rec{{0, "a1"}, {2, "b2"}, {3, "c3"}, {4, "d4"}, {5, "e5"}, {6, "f6"}}})
	}
	return h
}

var cfg = Config{ResumeWithin: 5 * time.Second}

func TestGoodHistory(t *testing.T) {
	if vs := Check(good(), cfg); len(vs) != 0 {
		t.Fatal(Report(good(), vs))
	}
}

// Each case breaks one guarantee in the good history; the checker must
// find that violation, and only violations of the expected kinds.
func TestViolations(t *testing.T) {
	find := func(h *History, value string, typ OpType, proc string) *Op {
		for i := range h.Ops {
			if o := &h.Ops[i]; o.Type == typ && (value == "" || o.Value == value) && (proc == "" || o.Process == proc) {
				return o
			}
		}
		t.Fatalf("no %s %q by %q", typ, value, proc)
		return nil
	}
	final := func(h *History) *Log { return &h.Final[0].Log }
	for _, c := range []struct {
		name   string
		kinds  []string // expected kinds; the first one must be there
		mutate func(h *History)
		show   string // in the report
	}{
		{"lost", []string{"lost", "truncated read", "aborted read"}, func(h *History) {
			// The acknowledged p1-1 vanished, as from a truncation.
			f := final(h)
			f.Records = append(f.Records[:1], f.Records[2:]...)
			f.Committed = append(f.Committed[:1], f.Committed[2:]...)
		}, `"p1-1" acknowledged at offset 1 is not in the final log`},
		{"lost replaced", []string{"lost", "truncated read", "aborted read"}, func(h *History) {
			final(h).Records[1].Value = "p9-9"
			final(h).Committed[1].Value = "p9-9"
		}, `which has "p9-9" there`},
		{"lost committed txn", []string{"lost", "truncated read", "aborted read"}, func(h *History) {
			f := final(h)
			f.Records = append(f.Records[:2], f.Records[3:]...)
			f.Committed = append(f.Committed[:2], f.Committed[3:]...)
		}, `"x1-0" acknowledged at offset 2`},
		{"moved", []string{"moved", "order", "truncated read", "aborted read", "skipped"}, func(h *History) {
			final(h).Records[5].Offset = 9
			final(h).Committed[4].Offset = 9
			final(h).HighWatermark = 10
		}, `"p1-3" acknowledged at offset 7 is at [9]`},
		{"duplicate", []string{"duplicate", "moved", "truncated read", "aborted read", "order"}, func(h *History) {
			// An idempotent retry written twice.
			f := final(h)
			f.Records = append(f.Records, Rec{8, "p1-3"})
			f.Committed = append(f.Committed, Rec{8, "p1-3"})
			f.HighWatermark = 9
		}, `"p1-3" is at offsets [7 8]`},
		{"order", []string{"order"}, func(h *History) {
			// p1-1 was sent after p1-0 but sits before it.
			find(h, "p1-0", Produce, "p1").Offset, find(h, "p1-1", Produce, "p1").Offset = 1, 0
			f := final(h)
			f.Records[0].Value, f.Records[1].Value = "p1-1", "p1-0"
			f.Committed[0].Value, f.Committed[1].Value = "p1-1", "p1-0"
			for i := range h.Ops {
				if o := &h.Ops[i]; o.Type == Read && o.Offset < 2 {
					o.Value = map[int64]string{0: "p1-1", 1: "p1-0"}[o.Offset]
				}
			}
		}, `p1 sent "p1-0" before "p1-1"`},
		{"offset reused", []string{"offset reused", "truncated read"}, func(h *History) {
			h.Add(Op{Type: Read, Process: "c9", Topic: "t", Isolation: ReadUncommitted, Offset: 7, Value: "zz", Start: at(6000), End: at(6001)})
		}, `offset 7 read as "p1-3" and as "zz"`},
		{"truncated read", []string{"truncated read"}, func(h *History) {
			// A read of a record a new leader's log does not have.
			h.Add(Op{Type: Read, Process: "c9", Topic: "t", Isolation: ReadUncommitted, Offset: 8, Value: "p1-4", Start: at(3050), End: at(3051)})
		}, `offset 8 read as "p1-4"; the final log [0, 8) has no record there`},
		{"skipped", []string{"skipped"}, func(h *History) {
			// c1 jumped from 2 to 6 over x1-1 at 4 (read_uncommitted sees it).
			var ops []Op
			for _, o := range h.Ops {
				if !(o.Process == "c1" && o.Offset == 4) {
					ops = append(ops, o)
				}
			}
			h.Ops = ops
		}, `c1 read t-0 offset 2 then 6, skipping 4 "x1-1"`},
		{"aborted read", []string{"aborted read"}, func(h *History) {
			h.Add(Op{Type: Read, Process: "c2", Topic: "t", Isolation: ReadCommitted, Offset: 4, Value: "x1-1", Start: at(4150), End: at(4151)})
		}, `read_committed read "x1-1" of transaction x1/2, which was aborted`},
		{"uncommitted read", []string{"uncommitted read"}, func(h *History) {
			h.Add(Op{Type: Read, Process: "c8", Topic: "t", Isolation: ReadCommitted, Offset: 2, Value: "x1-0", Start: at(41), End: at(45)})
		}, `"x1-0" of transaction x1/1 before its commit was asked for`},
		{"offset fetch", []string{"offset fetch"}, func(h *History) {
			h.Add(Op{Type: OffsetFetch, Process: "c3", Group: "g", Topic: "t", Offset: 3, Start: at(4400), End: at(4410)})
			// The commit of 8 was acknowledged after all.
			for i := range h.Ops {
				if o := &h.Ops[i]; o.Type == Commit && o.Offset == 8 {
					o.Ok, o.Err = true, ""
				}
			}
		}, `OffsetFetch returned 3; the last acknowledged commit before it was 8`},
		{"offset fetch none", []string{"offset fetch"}, func(h *History) {
			h.Add(Op{Type: OffsetFetch, Process: "c3", Group: "g", Topic: "t", Offset: -1, Start: at(4400), End: at(4410)})
		}, `OffsetFetch returned -1; the last acknowledged commit before it was 3`},
		{"share redelivered", []string{"share redelivered"}, func(h *History) {
			h.Add(Op{Type: Read, Process: "s3", Group: "sg", Topic: "t", Isolation: ReadCommitted, Offset: 0, Value: "p1-0", Start: at(5100), End: at(5101)})
		}, `group sg delivered t-0 offset 0 again after its accept was acknowledged`},
		{"stuck", []string{"stuck"}, func(h *History) {
			find(h, "p1-3", Produce, "p1").End = at(9000)
		}, `t-0 took its first acknowledged write 6s after the faults healed`},
		{"stuck for good", []string{"stuck"}, func(h *History) {
			o := find(h, "p1-3", Produce, "p1")
			o.Ok, o.Err = false, "NOT_LEADER_FOR_PARTITION"
		}, `t-0 took no acknowledged write after the faults healed`},
		{"replicas differ", []string{"replicas differ"}, func(h *History) {
			h.Replicas[2].Entries[3].Value = "XX"
		}, `at 4 broker 1 has d4, broker 3 has XX`},
		{"replica behind", []string{"replicas differ"}, func(h *History) {
			h.Replicas[1].Entries = h.Replicas[1].Entries[:4]
			h.Replicas[1].HighWatermark = 5
		}, `broker 1's high watermark is 8, broker 2's 5`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := good()
			c.mutate(h)
			vs := Check(h, cfg)
			rep := Report(h, vs)
			found := false
			for _, v := range vs {
				ok := false
				for _, k := range c.kinds {
					ok = ok || v.Kind == k
				}
				if !ok {
					t.Errorf("unexpected %s", v)
				}
				found = found || v.Kind == c.kinds[0]
			}
			if !found || !strings.Contains(rep, c.show) {
				t.Fatalf("want %s showing %q; got:\n%s", c.kinds[0], c.show, rep)
			}
			if !strings.Contains(rep, "seed 42") || !strings.Contains(rep, "+1.0s kill 2") {
				t.Fatalf("the report lacks the seed or the schedule:\n%s", rep)
			}
		})
	}
}

// A history survives a JSON round trip (runs save theirs for checking
// again by hand).
func TestHistoryJSON(t *testing.T) {
	h := good()
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back History
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if vs := Check(&back, cfg); len(vs) != 0 {
		t.Fatal(Report(&back, vs))
	}
	back.Final[0].Records = back.Final[0].Records[1:]
	if vs := Check(&back, cfg); len(vs) == 0 {
		t.Fatal("a record lost after the round trip went unseen")
	}
}
