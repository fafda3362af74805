package txncoord

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/coord"
	"github.com/strata-io/strata/internal/script"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The script tests drive one __transaction_state partition's state machine
// (txn.go) with requests on a fake clock (coord.NewFake) and print what
// each writes (records decoded back from their stored form), the markers
// it asks for, and then every transactional ID's state (the format:
// internal/script). A coordinator's ticker, on the same fake clock, aborts
// timed-out transactions and expires idle IDs as the shard's Tick does.
// pid= and epoch= default to the ID's current ones; old marks a request
// whose version predates PRODUCER_FENCED (KIP-588), which is fenced with
// INVALID_PRODUCER_EPOCH instead. Commands:
//
//	config [max-timeout=D] [tick=D] [id-expiration=D] [expire-interval=D]
//	                                      config tick=10s id-expiration=1h
//	init ID [timeout=MS] [pid=N epoch=N] [old]
//	                                      init a timeout=60000
//	add ID T/P,... [pid=N] [epoch=N] [old]
//	                                      add a t/0,t/1
//	verify ID T/P [pid=N] [epoch=N]       verify a t/2
//	end ID commit|abort [pid=N] [epoch=N] [v2] [old]
//	                                      end a commit v2   (v2: EndTxn v5+, KIP-890 part 2)
//	markers ID                            markers a         (the ID's last marker job is written)
//	tick D                                tick 70s          (moves the fake clock; the ticker's work runs)
//	restart                               restart           (replays every record into a new machine; prints the marker jobs it resumes)
//	state                                 state
//
// If a script test fails, run `go test ./txncoord -run TestScripts
// -rewrite` and inspect the diff. Only commit the changes if you
// understand what caused them.
func TestScripts(t *testing.T) {
	script.Run(t, "testdata/*.txt", func(*testing.T) script.Commands { return newTxnScript().commands() })
}

type txnScript struct {
	mc         *machine
	clk        *coord.Fake
	ticker     coord.Ticker
	ids        fakeIDs
	log        []record             // every record written, for restart
	jobs       map[string]markerJob // the last marker job of each ID
	maxTimeout time.Duration
	tick       time.Duration
	expiration time.Duration // transactional.id.expiration.ms
	expireIvl  time.Duration
	nextExpire time.Time
}

func newTxnScript() *txnScript {
	s := &txnScript{mc: newMachine(), clk: coord.NewFake(time.UnixMilli(1_700_000_000_000)), jobs: map[string]markerJob{},
		maxTimeout: 15 * time.Minute, tick: 10 * time.Second, expiration: 7 * 24 * time.Hour, expireIvl: time.Hour}
	s.ticker = s.clk.NewTicker(s.tick)
	s.nextExpire = s.clk.Now().Add(s.expireIvl)
	return s
}

// step is a handler's body: it returns its own lines; run prints them,
// then the effects, then the state.
type step func(c *script.Case, e *effects) []string

func (s *txnScript) commands() script.Commands {
	cmds := script.Commands{}
	for name, st := range map[string]step{
		"config": s.config, "init": s.init, "add": s.add, "verify": s.verify, "end": s.end,
		"markers": s.markers, "tick": s.tickCmd, "restart": s.restart, "state": func(*script.Case, *effects) []string { return nil },
	} {
		cmds[name] = func(c *script.Case) string { return s.run(c, st) }
	}
	return cmds
}

func (s *txnScript) run(c *script.Case, st step) string {
	var e effects
	out := st(c, &e)
	for _, r := range e.records {
		s.log = append(s.log, r)
		out = append(out, "write "+describeTxnRecord(c, r))
	}
	for _, j := range e.markers {
		s.jobs[j.id] = j
		out = append(out, "markers "+describeJob(j))
	}
	return strings.Join(append(out, s.state()...), "\n")
}

func (s *txnScript) config(c *script.Case, _ *effects) []string {
	dur := func(key string, d *time.Duration) {
		if v, ok := c.Arg(key); ok {
			var err error
			if *d, err = time.ParseDuration(v); err != nil || *d <= 0 {
				c.Fatalf("%s=%s: want a positive duration", key, v)
			}
		}
	}
	dur("max-timeout", &s.maxTimeout)
	dur("id-expiration", &s.expiration)
	dur("expire-interval", &s.expireIvl)
	if c.Has("tick") {
		dur("tick", &s.tick)
		s.ticker.Stop()
		s.ticker = s.clk.NewTicker(s.tick)
	}
	s.nextExpire = s.clk.Now().Add(s.expireIvl)
	return []string{fmt.Sprintf("max-timeout=%s tick=%s id-expiration=%s expire-interval=%s", s.maxTimeout, s.tick, s.expiration, s.expireIvl)}
}

// producer is the pid= and epoch= of a request, the ID's current ones by default.
func (s *txnScript) producer(c *script.Case, id string) (int64, int16) {
	pid, epoch := int64(-1), int16(-1)
	if m := s.mc.txns[id]; m != nil {
		pid, epoch = m.pid, m.epoch
	}
	return c.Int("pid", pid), int16(c.Int("epoch", int64(epoch)))
}

func (s *txnScript) init(c *script.Case, e *effects) []string {
	r := initRequest{id: c.Need(0), timeoutMs: int32(c.Int("timeout", 60000)), pid: c.Int("pid", -1), epoch: int16(c.Int("epoch", -1)), newCodes: !c.Has("old")}
	pid, epoch, code := s.mc.initProducerID(r, s.clk.Now(), s.maxTimeout, s.ids.alloc, e)
	if code != 0 {
		return []string{"init " + errName(code)}
	}
	return []string{fmt.Sprintf("init OK pid=%d epoch=%d", pid, epoch)}
}

func parseTP(c *script.Case, s string) tp {
	t, p, ok := strings.Cut(s, "/")
	n, err := strconv.ParseInt(p, 10, 32)
	if !ok || err != nil {
		c.Fatalf("%q: want TOPIC/PARTITION", s)
	}
	return tp{t, int32(n)}
}

func (s *txnScript) add(c *script.Case, e *effects) []string {
	id := c.Need(0)
	var parts []tp
	for _, x := range strings.Split(c.Need(1), ",") {
		parts = append(parts, parseTP(c, x))
	}
	pid, epoch := s.producer(c, id)
	return []string{"add " + errName(s.mc.addPartitions(id, pid, epoch, parts, s.clk.Now(), !c.Has("old"), e))}
}

func (s *txnScript) verify(c *script.Case, _ *effects) []string {
	id, p := c.Need(0), parseTP(c, c.Need(1))
	pid, epoch := s.producer(c, id)
	return []string{"verify " + errName(s.mc.verify(id, pid, epoch, p.topic, p.partition))}
}

func (s *txnScript) end(c *script.Case, e *effects) []string {
	id := c.Need(0)
	var commit bool
	switch c.Need(1) {
	case "commit":
		commit = true
	case "abort":
	default:
		c.Fatalf("want commit or abort")
	}
	pid, epoch := s.producer(c, id)
	var code int16
	var wait bool
	if c.Has("v2") {
		code, wait = s.mc.endTxnV2(id, pid, epoch, commit, s.clk.Now(), s.ids.alloc, e)
	} else {
		code, wait = s.mc.endTxn(id, pid, epoch, commit, s.clk.Now(), !c.Has("old"), e)
	}
	return []string{fmt.Sprintf("end %s wait=%t", errName(code), wait)}
}

func (s *txnScript) markers(c *script.Case, e *effects) []string {
	j, ok := s.jobs[c.Need(0)]
	if !ok {
		c.Fatalf("no marker job for %s", c.Need(0))
	}
	if !s.mc.markersWritten(j, s.clk.Now(), e) {
		return []string{"markers written: stale (the transaction moved on)"}
	}
	return []string{"markers written"}
}

// tickCmd moves the fake clock; if the coordinator's ticker fired, its
// work runs as in shard.Tick: abort timed-out transactions, and expire
// idle IDs once per expire-interval.
func (s *txnScript) tickCmd(c *script.Case, e *effects) []string {
	d, err := time.ParseDuration(c.Need(0))
	if err != nil {
		c.Fatalf("%v", err)
	}
	s.clk.Advance(d)
	select {
	case <-s.ticker.C():
	default:
		return []string{"no tick"}
	}
	now := s.clk.Now()
	out := []string{fmt.Sprintf("tick: %d timed out", s.mc.abortTimedOut(now, e))}
	if !now.Before(s.nextExpire) {
		s.nextExpire = now.Add(s.expireIvl)
		out = append(out, fmt.Sprintf("tick: %d expired", s.mc.expire(now, s.expiration, e)))
	}
	return out
}

// restart reloads the machine from the records written so far, as a new
// coordinator does after a failover, and lists the marker jobs it resumes.
func (s *txnScript) restart(c *script.Case, _ *effects) []string {
	s.mc = newMachine()
	for _, r := range s.log {
		id, m, err := decodeRecord(r.Key, r.Value)
		if err != nil {
			c.Fatalf("%v", err)
		}
		s.mc.replay(id, m)
	}
	out := []string{"restarted"}
	for _, j := range s.mc.pending() {
		s.jobs[j.id] = j
		out = append(out, "resume markers "+describeJob(j))
	}
	return out
}

func errName(code int16) string {
	if code == 0 {
		return "OK"
	}
	return kerr.ErrorForCode(code).(*kerr.Error).Message
}

func describeTxnRecord(c *script.Case, r record) string {
	id, m, err := decodeRecord(r.Key, r.Value)
	if err != nil {
		c.Fatalf("a written record does not decode: %v", err)
	}
	if m == nil {
		return id + " tombstone"
	}
	return describeMeta(m)
}

func describeMeta(m *txnMeta) string {
	var ps []string
	for _, p := range m.list() {
		ps = append(ps, fmt.Sprintf("%s/%d", p.topic, p.partition))
	}
	s := fmt.Sprintf("%s %s pid=%d epoch=%d timeout=%d [%s]", m.id, StateName(m.state), m.pid, m.epoch, m.timeoutMs, strings.Join(ps, " "))
	if m.nextPid >= 0 {
		s += fmt.Sprintf(" next-pid=%d", m.nextPid)
	}
	return s
}

func describeJob(j markerJob) string {
	outcome := "abort"
	if j.commit {
		outcome = "commit"
	}
	var ps []string
	for _, p := range j.partitions {
		ps = append(ps, fmt.Sprintf("%s/%d", p.topic, p.partition))
	}
	return fmt.Sprintf("%s %s pid=%d epoch=%d [%s]", j.id, outcome, j.pid, j.epoch, strings.Join(ps, " "))
}

// state prints every transactional ID, with its age where it matters.
func (s *txnScript) state() []string {
	now := s.clk.Now().UnixMilli()
	var out []string
	for _, id := range s.mc.sortedIDs() {
		m := s.mc.txns[id]
		line := "  " + describeMeta(m)
		if m.startMs >= 0 {
			line += fmt.Sprintf(" started %+dms", m.startMs-now)
		}
		out = append(out, line+fmt.Sprintf(" updated %+dms", m.lastUpdateMs-now))
	}
	return out
}
