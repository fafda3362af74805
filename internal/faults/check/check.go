package check

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Config bounds what the checker expects.
type Config struct {
	// ResumeWithin is how soon after the Heal op every partition written
	// to must take an acknowledged write again (0: not checked).
	ResumeWithin time.Duration
}

// Violation is one broken guarantee and the operations that show it.
type Violation struct {
	Kind string
	What string
	Ops  []Op // the minimal history: the operations it is made of
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", v.Kind, v.What)
	for _, o := range v.Ops {
		fmt.Fprintf(&b, "\n    %s", o)
	}
	return b.String()
}

// Report formats violations with the seed and schedule of the run: what
// is needed to see them again.
func Report(h *History, vs []Violation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d violations; seed %d; schedule:\n", len(vs), h.Seed)
	for _, s := range h.Schedule {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	for _, v := range vs {
		fmt.Fprintf(&b, "%s\n", v)
	}
	return b.String()
}

// Check returns every violation in h, in a fixed order (by kind, then by
// the first operation involved).
func Check(h *History, cfg Config) []Violation {
	c := &checker{h: h, finals: map[TP]*Log{}, byValue: map[TP]map[string][]int64{}, atOffset: map[TP]map[int64]string{}}
	for i := range h.Final {
		f := &h.Final[i]
		tp := TP{f.Topic, f.Partition}
		c.finals[tp] = &f.Log
		byValue, at := map[string][]int64{}, map[int64]string{}
		for _, r := range f.Records {
			byValue[r.Value] = append(byValue[r.Value], r.Offset)
			at[r.Offset] = r.Value
		}
		c.byValue[tp], c.atOffset[tp] = byValue, at
	}
	c.txns = map[string]Op{}
	for _, o := range h.Ops {
		if o.Type == TxnEnd {
			if prev, ok := c.txns[o.Txn]; !ok || (o.Ok && !prev.Ok) {
				c.txns[o.Txn] = o
			}
		}
	}
	c.produces()
	c.duplicates()
	c.reads()
	c.offsetFetches()
	c.shares()
	if cfg.ResumeWithin > 0 {
		c.stuck(cfg.ResumeWithin)
	}
	c.replicas()
	sort.SliceStable(c.out, func(i, j int) bool {
		if c.out[i].Kind != c.out[j].Kind {
			return c.out[i].Kind < c.out[j].Kind
		}
		return firstIndex(c.out[i]) < firstIndex(c.out[j])
	})
	return c.out
}

func firstIndex(v Violation) int {
	if len(v.Ops) == 0 {
		return -1
	}
	return v.Ops[0].Index
}

type checker struct {
	h        *History
	finals   map[TP]*Log
	byValue  map[TP]map[string][]int64 // final log: value -> offsets
	atOffset map[TP]map[int64]string   // final log: offset -> value
	txns     map[string]Op             // Txn -> its end (an acknowledged one if any)
	out      []Violation
}

func (c *checker) add(kind, what string, ops ...Op) {
	c.out = append(c.out, Violation{Kind: kind, What: what, Ops: ops})
}

// finalOp is the final log's record at off, as an op for reports.
func finalOp(tp TP, off int64, v string) Op {
	return Op{Index: -1, Type: Read, Process: "final", Topic: tp.Topic, Partition: tp.Partition, Offset: off, Value: v, Isolation: ReadUncommitted}
}

// mustSurvive reports whether an acknowledged produce must be in the
// final log: outside a transaction, or in one whose commit was
// acknowledged.
func (c *checker) mustSurvive(o Op) bool {
	if !o.Ok || o.Type != Produce {
		return false
	}
	if o.Txn == "" {
		return true
	}
	end, ok := c.txns[o.Txn]
	return ok && end.Ok && !end.Abort
}

// produces: lost, moved, order.
func (c *checker) produces() {
	type key struct {
		proc string
		tp   TP
	}
	sent := map[key][]Op{}
	for _, o := range c.h.Ops {
		if !c.mustSurvive(o) {
			continue
		}
		tp := o.tp()
		f := c.finals[tp]
		if f == nil || o.Offset < f.Start {
			continue // no final read of it, or removed by retention
		}
		offs := c.byValue[tp][o.Value]
		switch {
		case len(offs) == 0:
			what := fmt.Sprintf("%s %q acknowledged at offset %d is not in the final log [%d, %d)", tp, o.Value, o.Offset, f.Start, f.HighWatermark)
			if v, ok := c.atOffset[tp][o.Offset]; ok {
				c.add("lost", what+fmt.Sprintf(", which has %q there", v), o, finalOp(tp, o.Offset, v))
			} else {
				c.add("lost", what, o)
			}
		case !contains(offs, o.Offset):
			c.add("moved", fmt.Sprintf("%s %q acknowledged at offset %d is at %v in the final log", tp, o.Value, o.Offset, offs), o, finalOp(tp, offs[0], o.Value))
		}
		sent[key{o.Process, tp}] = append(sent[key{o.Process, tp}], o)
	}
	keys := make([]key, 0, len(sent))
	for k := range sent {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].proc != keys[j].proc {
			return keys[i].proc < keys[j].proc
		}
		return keys[i].tp.String() < keys[j].tp.String()
	})
	for _, k := range keys {
		ops := sent[k]
		sort.SliceStable(ops, func(i, j int) bool {
			if !ops[i].Start.Equal(ops[j].Start) {
				return ops[i].Start.Before(ops[j].Start)
			}
			return ops[i].Index < ops[j].Index
		})
		for i := 1; i < len(ops); i++ {
			a, b := ops[i-1], ops[i]
			if b.Offset <= a.Offset {
				c.add("order", fmt.Sprintf("%s sent %q before %q to %s, acknowledged at offsets %d and %d", k.proc, a.Value, b.Value, k.tp, a.Offset, b.Offset), a, b)
			}
		}
	}
}

func contains(xs []int64, x int64) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// duplicates: one value at two offsets of the final log.
func (c *checker) duplicates() {
	for _, f := range c.h.Final {
		tp := TP{f.Topic, f.Partition}
		seen := map[string]bool{}
		for _, r := range f.Records {
			offs := c.byValue[tp][r.Value]
			if len(offs) < 2 || seen[r.Value] {
				continue
			}
			seen[r.Value] = true
			ops := []Op{}
			for _, o := range c.h.Ops {
				if o.Type == Produce && o.Value == r.Value && o.tp() == tp {
					ops = append(ops, o)
				}
			}
			for _, off := range offs {
				ops = append(ops, finalOp(tp, off, r.Value))
			}
			c.add("duplicate", fmt.Sprintf("%s %q is at offsets %v of the final log", tp, r.Value, offs), ops...)
		}
	}
}

// reads: offset reused, truncated read, skipped, aborted and uncommitted
// reads.
func (c *checker) reads() {
	seenAt := map[TP]map[int64]Op{}
	type key struct {
		proc, iso, group string
		tp               TP
	}
	last := map[key]Op{}
	committed := map[TP]map[int64]string{}
	for _, f := range c.h.Final {
		if f.Committed != nil {
			m := map[int64]string{}
			for _, r := range f.Committed {
				m[r.Offset] = r.Value
			}
			committed[TP{f.Topic, f.Partition}] = m
		}
	}
	txnOf := map[string]string{} // value -> its transaction
	for _, o := range c.h.Ops {
		if o.Type == Produce && o.Txn != "" {
			txnOf[o.Value] = o.Txn
		}
	}
	for _, o := range c.h.Ops {
		if o.Type != Read {
			continue
		}
		tp := o.tp()
		if seenAt[tp] == nil {
			seenAt[tp] = map[int64]Op{}
		}
		if prev, ok := seenAt[tp][o.Offset]; ok && prev.Value != o.Value {
			c.add("offset reused", fmt.Sprintf("%s offset %d read as %q and as %q", tp, o.Offset, prev.Value, o.Value), prev, o)
		} else if !ok {
			seenAt[tp][o.Offset] = o
		}
		f := c.finals[tp]
		if f != nil && o.Offset >= f.Start {
			if v, ok := c.atOffset[tp][o.Offset]; !ok || v != o.Value {
				what := fmt.Sprintf("%s offset %d read as %q; the final log [%d, %d) has ", tp, o.Offset, o.Value, f.Start, f.HighWatermark)
				if ok {
					c.add("truncated read", what+fmt.Sprintf("%q there", v), o, finalOp(tp, o.Offset, v))
				} else {
					c.add("truncated read", what+"no record there", o)
				}
			}
		}
		if o.Isolation == ReadCommitted {
			if txn := txnOf[o.Value]; txn != "" {
				end, ended := c.txns[txn]
				switch {
				case ended && end.Abort && end.Ok:
					c.add("aborted read", fmt.Sprintf("read_committed read %q of transaction %s, which was aborted", o.Value, txn), o, end)
				case ended && !end.Abort && o.End.Before(end.Start):
					c.add("uncommitted read", fmt.Sprintf("read_committed read %q of transaction %s before its commit was asked for", o.Value, txn), o, end)
				}
			}
			if m := committed[tp]; m != nil && f != nil && o.Offset >= f.Start {
				if v, ok := m[o.Offset]; !ok || v != o.Value {
					c.add("aborted read", fmt.Sprintf("read_committed read %s offset %d %q, which the final read_committed log does not have", tp, o.Offset, o.Value), o)
				}
			}
		}
		// Skips: consecutive reads of one consumer of one partition (not
		// share groups: they hand records out in any order).
		if o.Group != "" {
			continue
		}
		k := key{o.Process, o.Isolation, o.Group, tp}
		prev, ok := last[k]
		last[k] = o
		if !ok || f == nil || o.Offset <= prev.Offset {
			continue // first read, or a seek back
		}
		view := f.Records
		if o.Isolation == ReadCommitted && f.Committed != nil {
			view = f.Committed
		}
		for _, r := range view {
			if r.Offset > prev.Offset && r.Offset < o.Offset {
				c.add("skipped", fmt.Sprintf("%s read %s offset %d then %d, skipping %d %q", o.Process, tp, prev.Offset, o.Offset, r.Offset, r.Value), prev, o, finalOp(tp, r.Offset, r.Value))
				break
			}
		}
	}
}

// offsetFetches: an OffsetFetch answers the last acknowledged commit
// before it, or a commit asked for after that one.
func (c *checker) offsetFetches() {
	type key struct {
		group string
		tp    TP
	}
	commits := map[key][]Op{}
	for _, o := range c.h.Ops {
		if o.Type == Commit {
			commits[key{o.Group, o.tp()}] = append(commits[key{o.Group, o.tp()}], o)
		}
	}
	for _, f := range c.h.Ops {
		if f.Type != OffsetFetch {
			continue
		}
		cs := commits[key{f.Group, f.tp()}]
		var lastOk *Op
		for i := range cs {
			if cs[i].Ok && cs[i].End.Before(f.Start) && (lastOk == nil || cs[i].End.After(lastOk.End)) {
				lastOk = &cs[i]
			}
		}
		if lastOk == nil || f.Offset == lastOk.Offset {
			continue
		}
		later := false
		for _, o := range cs {
			if o.Start.After(lastOk.Start) && o.Start.Before(f.End) && o.Offset == f.Offset {
				later = true
			}
		}
		if !later {
			c.add("offset fetch", fmt.Sprintf("group %s %s: OffsetFetch returned %d; the last acknowledged commit before it was %d", f.Group, f.tp(), f.Offset, lastOk.Offset), *lastOk, f)
		}
	}
}

// shares: no delivery after an acknowledged ACCEPT or REJECT.
func (c *checker) shares() {
	type key struct {
		group string
		tp    TP
		off   int64
	}
	final := map[key]Op{}
	for _, o := range c.h.Ops {
		if o.Type == ShareAck && o.Ok && (o.Ack == "accept" || o.Ack == "reject") {
			k := key{o.Group, o.tp(), o.Offset}
			if prev, ok := final[k]; !ok || o.End.Before(prev.End) {
				final[k] = o
			}
		}
	}
	for _, o := range c.h.Ops {
		if o.Type != Read || o.Group == "" {
			continue
		}
		if a, ok := final[key{o.Group, o.tp(), o.Offset}]; ok && o.Start.After(a.End) {
			c.add("share redelivered", fmt.Sprintf("group %s delivered %s offset %d again after its %s was acknowledged", o.Group, o.tp(), o.Offset, a.Ack), a, o)
		}
	}
}

// stuck: every partition written after the heal takes an acknowledged
// write within bound of it.
func (c *checker) stuck(bound time.Duration) {
	var heal *Op
	for i, o := range c.h.Ops {
		if o.Type == Heal {
			heal = &c.h.Ops[i]
		}
	}
	if heal == nil {
		return
	}
	first := map[TP]*Op{}
	tried := map[TP]*Op{}
	for i, o := range c.h.Ops {
		if o.Type != Produce || o.End.Before(heal.Start) {
			continue
		}
		tp := o.tp()
		if tried[tp] == nil {
			tried[tp] = &c.h.Ops[i]
		}
		if o.Ok && (first[tp] == nil || o.End.Before(first[tp].End)) {
			first[tp] = &c.h.Ops[i]
		}
	}
	tps := make([]TP, 0, len(tried))
	for tp := range tried {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool { return tps[i].String() < tps[j].String() })
	for _, tp := range tps {
		f := first[tp]
		switch {
		case f == nil:
			c.add("stuck", fmt.Sprintf("%s took no acknowledged write after the faults healed", tp), *heal, *tried[tp])
		case f.End.Sub(heal.Start) > bound:
			c.add("stuck", fmt.Sprintf("%s took its first acknowledged write %v after the faults healed (bound %v)", tp, f.End.Sub(heal.Start).Round(time.Millisecond), bound), *heal, *f)
		}
	}
}

// replicas: the same entries from the largest log start to the high
// watermark.
func (c *checker) replicas() {
	byTP := map[TP][]Replica{}
	var tps []TP
	for _, r := range c.h.Replicas {
		tp := TP{r.Topic, r.Partition}
		if byTP[tp] == nil {
			tps = append(tps, tp)
		}
		byTP[tp] = append(byTP[tp], r)
	}
	for _, tp := range tps {
		rs := byTP[tp]
		var start, hw int64
		for _, r := range rs {
			start = max(start, r.Start)
			hw = max(hw, r.HighWatermark)
		}
		ref := rs[0]
		for _, r := range rs[1:] {
			if r.HighWatermark != ref.HighWatermark {
				c.add("replicas differ", fmt.Sprintf("%s: broker %d's high watermark is %d, broker %d's %d", tp, ref.Broker, ref.HighWatermark, r.Broker, r.HighWatermark))
			}
			a, b := inRange(ref.Entries, start, hw), inRange(r.Entries, start, hw)
		entries:
			for i := 0; i < len(a) || i < len(b); i++ {
				switch {
				case i >= len(a):
					c.add("replicas differ", fmt.Sprintf("%s: broker %d has an entry at %d, broker %d nothing", tp, r.Broker, b[i].Offset, ref.Broker))
				case i >= len(b):
					c.add("replicas differ", fmt.Sprintf("%s: broker %d has an entry at %d, broker %d nothing", tp, ref.Broker, a[i].Offset, r.Broker))
				case a[i] != b[i]:
					c.add("replicas differ", fmt.Sprintf("%s: at %d broker %d has %s, broker %d has %s at %d", tp, a[i].Offset, ref.Broker, a[i].Value, r.Broker, b[i].Value, b[i].Offset))
				default:
					continue
				}
				break entries // the first difference only
			}
		}
	}
}

func inRange(es []Rec, start, end int64) []Rec {
	var out []Rec
	for _, e := range es {
		if e.Offset >= start && e.Offset < end {
			out = append(out, e)
		}
	}
	return out
}
