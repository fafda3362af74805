// Package faults is a fault harness in the manner of Jepsen: it runs
// brokers as real `strata serve` processes, each in its own network
// namespace, injects faults drawn from a seeded schedule (SIGKILL and
// restart, SIGSTOP pauses longer than the election timeout, partitions
// that isolate one broker, cut one direction only, or bridge, link loss,
// latency and packet loss in the harness's own TCP proxy, disk faults
// (EIO, ENOSPC, fsync failure) and clock skew through the broker's
// test-only fault injection) while franz-go clients -- idempotent producers with acks=all, a
// transactional producer, read_uncommitted and read_committed consumers,
// a consumer group committing offsets and a prober fetching them --
// record a history, and hands the history with the brokers' final logs
// and replicas to the checker (package check).
//
// Runs need root (ip netns); they take a machine-wide lock, and sweep
// the harness's namespaces, veths and bridge at the start and the end.
// By hand:
//
//	go test ./internal/faults -run TestFaults -v -args -faults.seed 7 -faults.duration 30m
package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/faults/check"
)

// Options of a run.
type Options struct {
	Binary   string        // the strata binary
	Dir      string        // the brokers' data and logs, and history.json
	Seed     int64         // draws the schedule
	Duration time.Duration // of the faults; the run adds start-up and a recovery window
	Brokers  int           // 3 by default
	Kinds    []Kind        // faults to draw from (AllKinds by default)
	// Heartbeat is strata.partition.heartbeat.timeout.ms (500 ms by
	// default): pauses last at least 3 times as long.
	Heartbeat time.Duration
	// ResumeWithin bounds how long after the heal every partition must
	// take writes again (15 s by default).
	ResumeWithin time.Duration
	// Loopback runs the brokers without namespaces, each on a loopback
	// address of its own: only process faults can be made (ProcessKinds:
	// the schedule keeps those of Kinds). Run uses it by itself where
	// namespaces cannot be made.
	Loopback bool
	Logf     func(format string, args ...any)
}

// ProcessKinds are the faults the loopback fallback can make.
var ProcessKinds = []Kind{Kill, Pause, DiskEIO, DiskFull, FsyncFail, ClockSkew}

// Result is a run's history and what the checker found in it.
type Result struct {
	History    *check.History
	Violations []check.Violation
	// Problems are the harness's own findings outside the checker:
	// panics in the brokers' logs, a cluster that did not settle.
	Problems []string
	// DiskHalts are brokers that stopped on an injected disk fault (the
	// line of their log that says so).
	DiskHalts []string
	// AdminLast is the last failed admin step's error.
	AdminLast string
	Acked     int // acknowledged produces
	Reads     int
	// AdminCycles counts the create/add partitions/elect/delete cycles
	// run during the faults, AdminFailed those with a failed step.
	AdminCycles, AdminFailed int
	// Gaps are the longest stretches without an acknowledged write, per
	// producer and partition, longest first: availability under the
	// faults (the checker bounds only the time to resume after the heal).
	Gaps []Gap
}

// Gap is a stretch of time in which Process had no write to Partition
// acknowledged.
type Gap struct {
	Process   string
	Partition int32
	From, To  time.Time
}

func (g Gap) String() string {
	return fmt.Sprintf("%s p%d %.1fs (%s..%s)", g.Process, g.Partition, g.To.Sub(g.From).Seconds(),
		g.From.Format("15:04:05.0"), g.To.Format("15:04:05.0"))
}

// gaps finds the longest gap of each producer and partition, up to end
// (when the workload stopped).
func gaps(h *check.History, end time.Time) []Gap {
	type key struct {
		proc string
		p    int32
	}
	var ends = map[key][]time.Time{}
	for _, o := range h.Ops {
		if o.Type == check.Produce && o.Ok {
			k := key{o.Process, o.Partition}
			ends[k] = append(ends[k], o.End)
		}
	}
	var out []Gap
	for k, ts := range ends {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		ts = append(ts, end)
		var g Gap
		for i := 1; i < len(ts); i++ {
			if ts[i].Sub(ts[i-1]) > g.To.Sub(g.From) {
				g = Gap{Process: k.proc, Partition: k.p, From: ts[i-1], To: ts[i]}
			}
		}
		if !g.From.IsZero() {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].To.Sub(out[i].From) > out[j].To.Sub(out[j].From) })
	return out
}

const topic = "faults"
const partitions = 3

// Run runs the cluster, the workload and the schedule, then checks.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Brokers == 0 {
		o.Brokers = 3
	}
	if o.Kinds == nil {
		o.Kinds = AllKinds
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = 500 * time.Millisecond
	}
	if o.ResumeWithin == 0 {
		o.ResumeWithin = 15 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if !o.Loopback {
		if err := NetnsAvailable(); err != nil {
			o.Logf("no network namespaces (%v): loopback fallback, process faults only", err)
			o.Loopback = true
		}
	}
	var nw *netns
	var err error
	if o.Loopback {
		var kinds []Kind
		for _, k := range o.Kinds {
			if slices.Contains(ProcessKinds, k) {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) == 0 {
			return nil, fmt.Errorf("faults %v: %w", o.Kinds, ErrNoNetwork)
		}
		o.Kinds = kinds
		nw, err = newLoopback(o.Brokers)
	} else {
		nw, err = newNetns(o.Brokers)
	}
	if err != nil {
		return nil, fmt.Errorf("network namespaces: %w", err)
	}
	defer nw.close()
	c := newCluster(o.Binary, o.Dir, nw, o.Brokers, o.Heartbeat, nil)
	if !o.Loopback {
		if c.px, err = startProxy(nw, o.Brokers, []int{9092, 9093}, o.Seed); err != nil {
			return nil, fmt.Errorf("proxy: %w", err)
		}
		defer c.px.close()
	}
	for _, n := range c.nodes {
		if err := n.inject("", 0); err != nil {
			return nil, err
		}
	}
	defer func() {
		for _, n := range c.nodes {
			n.kill()
		}
	}()
	for _, n := range c.nodes {
		if err := n.start(o.Binary); err != nil {
			return nil, err
		}
	}
	for _, n := range c.nodes {
		if err := n.waitReady(60 * time.Second); err != nil {
			return nil, err
		}
	}
	admCl, err := kgo.NewClient(clientOpts(c.bootstrap())...)
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	if err := createTopic(ctx, adm); err != nil {
		return nil, err
	}

	steps := Schedule(o.Seed, o.Duration, o.Heartbeat, o.Brokers, o.Kinds)
	rec := &recorder{}
	rec.h.Seed = o.Seed
	for _, s := range steps {
		rec.h.Schedule = append(rec.h.Schedule, s.String())
		o.Logf("schedule: %s", s)
	}
	w := &workload{seeds: c.bootstrap(), topic: topic, parts: partitions, rec: rec, logf: o.Logf, rate: 100, brokers: o.Brokers}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werrs []error
	var werrMu sync.Mutex
	running := map[string]bool{} // protected by werrMu
	n := 0
	spawn := func(f func() error) {
		wg.Add(1)
		n++
		name := fmt.Sprintf("workload %d", n)
		werrMu.Lock()
		running[name] = true
		werrMu.Unlock()
		go func() {
			defer wg.Done()
			defer func() {
				werrMu.Lock()
				delete(running, name)
				werrMu.Unlock()
			}()
			if err := f(); err != nil {
				werrMu.Lock()
				werrs = append(werrs, err)
				werrMu.Unlock()
			}
		}()
	}
	spawn(func() error { return w.produce("p1", stop) })
	spawn(func() error { return w.produce("p2", stop) })
	spawn(func() error { return w.transact("x1", o.Seed, stop) })
	spawn(func() error { return w.read("ru", check.ReadUncommitted, stop) })
	spawn(func() error { return w.read("rc", check.ReadCommitted, stop) })
	spawn(func() error { return w.group("g1", "faults-group", false, stop) })
	spawn(func() error { return w.group("g2", "faults-group-848", true, stop) })
	spawn(func() error { return w.share("s1", "faults-share", o.Seed, stop) })
	spawn(func() error { return w.share("s2", "faults-share", o.Seed+1, stop) })
	var admin adminStats
	spawn(func() error { return w.admin("faults-admin", stop, &admin) })

	start := time.Now()
	for _, s := range steps {
		if !sleepUntil(ctx, start.Add(s.At)) {
			break
		}
		o.Logf("fault %s", s)
		from := time.Now()
		if err := c.inject(s); err != nil {
			o.Logf("inject %s: %v", s, err)
		}
		sleepUntil(ctx, from.Add(s.For))
		if err := c.heal(); err != nil {
			o.Logf("heal after %s: %v", s, err)
		}
		rec.add(check.Op{Type: check.Fault, Note: s.String(), Start: from, End: time.Now()})
	}
	if err := c.heal(); err != nil {
		return nil, err
	}
	healed := time.Now()
	rec.add(check.Op{Type: check.Heal, Note: "all faults healed", Start: healed, End: healed})
	// The workload goes on through the recovery window.
	sleepUntil(context.Background(), healed.Add(o.ResumeWithin))
	stopped := time.Now()
	close(stop)
	// Every client's calls are bounded (20 s at most), but a client can
	// still hang (franz-go retries InitProducerId for ever while the
	// coordinator answers CONCURRENT_TRANSACTIONS): a client not done a
	// minute after the stop is a finding, and the run goes on to check.
	stopped2 := make(chan struct{})
	go func() { wg.Wait(); close(stopped2) }()
	var hung []string
	select {
	case <-stopped2:
	case <-time.After(time.Minute):
		werrMu.Lock()
		for name := range running {
			hung = append(hung, name)
		}
		werrMu.Unlock()
		sort.Strings(hung)
	}
	rec.close()
	o.Logf("workload stopped %v after the heal", time.Since(healed).Round(time.Millisecond))

	werrMu.Lock()
	res := &Result{History: &rec.h, AdminCycles: admin.cycles, AdminFailed: admin.failed, AdminLast: admin.last}
	res.Problems = append(res.Problems, errStrings(werrs)...)
	werrMu.Unlock()
	for _, h := range hung {
		res.Problems = append(res.Problems, fmt.Sprintf("%s (1 p1, 2 p2, 3 x1 transactional, 4 ru, 5 rc, 6 g1, 7 g2, 8-9 share, 10 admin) still running a minute after the stop", h))
	}
	// Admin operations work again after the heal: one whole cycle.
	if err := adminCycle(adm, "faults-admin-after", o.Brokers, 1); err != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("admin after the heal: %v (last failure during the faults: %s)", err, admin.last))
	}
	if err := c.final(ctx, adm, res); err != nil {
		res.Problems = append(res.Problems, err.Error())
	}
	for _, n := range c.nodes {
		// A broker whose disk fails writes (EIO, fsync) under an injected
		// fault stops when raft's term cannot be saved: it logs a storage
		// failure and exits with status 4 (cmd/strata/disk_config.go; Kafka
		// halts a broker whose only log directory failed): expected, and
		// counted apart. A full disk (ENOSPC) stops nothing. A panic is a
		// problem, whatever its cause.
		for _, l := range n.logLines("time=") {
			if strings.Contains(l, `msg="storage failure:`) {
				res.DiskHalts = append(res.DiskHalts, l)
			}
		}
		res.Problems = append(res.Problems, n.logLines("panic:", "fatal error:", "WARNING: DATA RACE")...)
	}
	for _, op := range res.History.Ops {
		switch {
		case op.Type == check.Produce && op.Ok:
			res.Acked++
		case op.Type == check.Read:
			res.Reads++
		}
	}
	res.Gaps = gaps(res.History, stopped)
	res.Violations = check.Check(res.History, check.Config{ResumeWithin: o.ResumeWithin})
	return res, saveHistory(filepath.Join(o.Dir, "history.json"), res.History)
}

func errStrings(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func createTopic(ctx context.Context, adm *kadm.Client) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := adm.CreateTopic(cctx, partitions, 3, nil, topic)
		cancel()
		if err == nil && resp.Err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("create %s: %v %v", topic, err, resp.Err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Every partition led before the workload starts.
	for time.Now().Before(deadline) {
		md, err := adm.Metadata(ctx, topic)
		ok := err == nil && len(md.Topics[topic].Partitions) == partitions
		for _, p := range md.Topics[topic].Partitions {
			ok = ok && p.Err == nil && p.Leader > 0
		}
		if ok {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: partitions without a leader after 30s", topic)
}

// inject starts step s's fault.
func (c *cluster) inject(s Step) error {
	t := c.nodes[s.Target-1]
	switch s.Kind {
	case Kill:
		t.kill()
	case Pause:
		t.signal(syscall.SIGSTOP)
	case Isolate:
		for _, n := range c.nodes {
			if n.id != t.id {
				if err := c.nw.cutOneWay(t.id, n.id); err != nil {
					return err
				}
				if err := c.nw.cutOneWay(n.id, t.id); err != nil {
					return err
				}
			}
		}
	case OneWay:
		for _, n := range c.nodes {
			if n.id != t.id {
				if err := c.nw.cutOneWay(t.id, n.id); err != nil {
					return err
				}
			}
		}
	case Bridge:
		if err := c.nw.cutOneWay(s.Target, s.Other); err != nil {
			return err
		}
		return c.nw.cutOneWay(s.Other, s.Target)
	case Disconnect:
		return c.nw.disconnect(t.id)
	case Slow:
		c.px.set(t.id, netFault{latency: s.Amount})
	case Lossy:
		c.px.set(t.id, netFault{loss: float64(s.Amount) / 1000, reset: 0.002})
	case DiskEIO, DiskFull, FsyncFail:
		c.diskFaulted = append(c.diskFaulted, t)
		return t.inject(s.Kind.diskMode(), 0)
	case ClockSkew:
		return t.inject("", s.Amount)
	}
	return nil
}

// heal ends every fault: the network whole, paused brokers continued,
// killed ones restarted.
func (c *cluster) heal() error {
	err := c.nw.heal()
	if c.px != nil {
		c.px.clear()
	}
	for _, n := range c.nodes {
		if ierr := n.inject("", 0); ierr != nil {
			err = errors.Join(err, ierr)
		}
	}
	// A broker whose disk failed is restarted, as an operator would once
	// the disk is replaced (or the space freed).
	for _, n := range c.diskFaulted {
		n.kill()
	}
	c.diskFaulted = nil
	for _, n := range c.nodes {
		n.mu.Lock()
		paused := n.paused
		n.mu.Unlock()
		if paused {
			n.signal(syscall.SIGCONT)
		}
		if !n.running() {
			if err := n.start(c.bin); err != nil {
				return err
			}
		}
	}
	return err
}

// final reads what the cluster holds once the workload has stopped:
// every partition's log (read_uncommitted and read_committed) and every
// broker's replica, after waiting for the replicas to agree.
func (c *cluster) final(ctx context.Context, adm *kadm.Client, res *Result) error {
	for _, n := range c.nodes {
		if err := n.waitReady(60 * time.Second); err != nil {
			return err
		}
	}
	// Open transactions end (committed, aborted, or by their timeout):
	// the last stable offsets reach the high watermarks.
	deadline := time.Now().Add(60 * time.Second)
	var starts, ends, lsos kadm.ListedOffsets
	for {
		var err1, err2, err3 error
		starts, err1 = adm.ListStartOffsets(ctx, topic)
		ends, err2 = adm.ListEndOffsets(ctx, topic)
		lsos, err3 = adm.ListCommittedOffsets(ctx, topic)
		ok := err1 == nil && err2 == nil && err3 == nil && starts.Error() == nil && ends.Error() == nil && lsos.Error() == nil
		for p := int32(0); ok && p < partitions; p++ {
			e, _ := ends.Lookup(topic, p)
			l, _ := lsos.Lookup(topic, p)
			ok = e.Offset == l.Offset
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("offsets did not settle in 60s: %v %v %v %v %v %v", err1, err2, err3, starts, ends, lsos)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for p := int32(0); p < partitions; p++ {
		s, _ := starts.Lookup(topic, p)
		e, _ := ends.Lookup(topic, p)
		f := check.Final{Topic: topic, Partition: p}
		f.Start, f.HighWatermark = s.Offset, e.Offset
		var err error
		if f.Records, err = c.readAll(ctx, p, s.Offset, e.Offset, false); err != nil {
			return err
		}
		if f.Committed, err = c.readAll(ctx, p, s.Offset, e.Offset, true); err != nil {
			return err
		}
		if f.Committed == nil {
			f.Committed = []check.Rec{}
		}
		res.History.Final = append(res.History.Final, f)
	}
	// The replicas agree once every follower has what its leader has.
	// With more brokers than replicas (and reassignments), the replicas
	// are the metadata's.
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return err
	}
	replicasOf := map[int32][]*node{}
	for _, p := range md.Topics[topic].Partitions {
		for _, r := range p.Replicas {
			if r >= 1 && int(r) <= len(c.nodes) {
				replicasOf[p.Partition] = append(replicasOf[p.Partition], c.nodes[r-1])
			}
		}
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		var reps []check.Replica
		var err error
		same := true
		for p := int32(0); p < partitions && err == nil; p++ {
			var first check.Replica
			for i, n := range replicasOf[p] {
				var r check.Replica
				if r, err = n.replica(topic, p); err != nil {
					break
				}
				if i == 0 {
					first = r
				} else if !reflect.DeepEqual(r.Entries, first.Entries) {
					same = false
				}
				reps = append(reps, r)
			}
		}
		if err == nil && (same || time.Now().After(deadline)) {
			res.History.Replicas = reps
			return nil
		}
		if err != nil && time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readAll reads partition p from start to end with a fresh client.
func (c *cluster) readAll(ctx context.Context, p int32, start, end int64, committed bool) ([]check.Rec, error) {
	if start >= end {
		return nil, nil
	}
	opts := append(clientOpts(c.bootstrap()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(start)}}))
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	// Done at the last offset, or when nothing more comes: the log may
	// end in control records, or in records read_committed skips, which
	// no fetch returns (a bounded wait for an absence).
	const quiet = 3 * time.Second
	deadline := time.Now().Add(60 * time.Second)
	var out []check.Rec
	for time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, quiet)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		n := 0
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if err != context.DeadlineExceeded {
				ferr = err
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end {
				out = append(out, check.Rec{Offset: r.Offset, Value: string(r.Value)})
			}
			n++
		})
		switch {
		case len(out) > 0 && out[len(out)-1].Offset >= end-1:
			return out, nil
		case n == 0 && ferr == nil:
			return out, nil
		}
	}
	return out, fmt.Errorf("reading %s-%d [%d, %d) (committed %v): %d records in 60s", topic, p, start, end, committed, len(out))
}

func saveHistory(path string, h *check.History) error {
	b, err := jsonMarshal(h)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func jsonMarshal(v any) ([]byte, error) { return json.MarshalIndent(v, "", " ") }
