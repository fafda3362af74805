package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/replication"
)

// TestNetwork: the in-memory network carries bytes both ways, refuses
// dials to nobody and across Isolate and Cut, and Isolate cuts open
// connections.
func TestNetwork(t *testing.T) {
	n := NewNetwork()
	ln, err := n.Listen("a:1")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := n.Listen("a:1"); err == nil {
		t.Fatal("second listener on a:1")
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- err
			return
		}
		if c.RemoteAddr().String() != "b:1" || c.LocalAddr().String() != "a:1" {
			accepted <- fmt.Errorf("addresses %v -> %v", c.RemoteAddr(), c.LocalAddr())
			return
		}
		buf := make([]byte, 5)
		if _, err := c.Read(buf); err != nil {
			accepted <- err
			return
		}
		_, err = c.Write([]byte(strings.ToUpper(string(buf))))
		accepted <- err
		c.Read(buf) // until the cut
	}()
	ctx := context.Background()
	c, err := n.Dialer("b:1")(ctx, "a:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := c.Read(buf); err != nil || string(buf) != "HELLO" {
		t.Fatalf("read %q %v", buf, err)
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	if _, err := n.Dialer("b:1")(ctx, "nobody:1"); err == nil {
		t.Fatal("dial to nobody succeeded")
	}
	n.Isolate("b:1")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(buf); err == nil || os.IsTimeout(err) {
		t.Fatalf("read after Isolate: %v", err)
	}
	if _, err := n.Dialer("b:1")(ctx, "a:1"); err == nil {
		t.Fatal("dial from an isolated node succeeded")
	}
	n.Heal("b:1")
	n.Cut("b:1", "a:1")
	if _, err := n.Dialer("a:1")(ctx, "b:1"); err == nil {
		t.Fatal("dial across a cut succeeded")
	}
	n.HealLink("a:1", "b:1")
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	c2, err := n.Dialer("b:1")(ctx, "a:1")
	if err != nil {
		t.Fatalf("dial after HealLink: %v", err)
	}
	c2.Close()
}

// simParams is one run's size, from the environment (docs/SCALING.md).
type simParams struct {
	brokers, controllers, partitions, rf int
	idle                                 time.Duration
	heartbeat                            time.Duration
	probes                               int
	latency                              time.Duration
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		t.Fatalf("%s=%q: not a count", name, s)
	}
	return v
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return v
}

// processStats is the process's memory and goroutines after a GC.
type processStats struct {
	goroutines int
	heap       uint64 // HeapInuse
	stacks     uint64 // StackInuse
	rss        uint64 // VmRSS (Linux), 0 elsewhere
	fds        int    // open file descriptors (Linux), 0 elsewhere
}

func readStats() processStats {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fds, _ := os.ReadDir("/proc/self/fd")
	return processStats{goroutines: runtime.NumGoroutine(), heap: ms.HeapInuse, stacks: ms.StackInuse, rss: rssBytes(), fds: len(fds)}
}

func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// waitAll polls cond on every node until it holds on each, and returns
// when each first held (relative to since), or ok false at timeout. poll
// is the sweep interval: the resolution of the figures.
func waitAll(nodes []*Node, since time.Time, timeout, poll time.Duration, cond func(*Node) bool) (each []time.Duration, ok bool) {
	each = make([]time.Duration, len(nodes))
	done := make([]bool, len(nodes))
	left := len(nodes)
	ok = testwait.UntilEvery(time.Until(since.Add(timeout)), poll, func() bool {
		now := time.Now()
		for i, n := range nodes {
			if !done[i] && n.Broker != nil && cond(n) {
				done[i], each[i] = true, now.Sub(since)
				left--
			}
		}
		return left == 0
	})
	return each, ok
}

func maxDur(ds []time.Duration) time.Duration { return slices.Max(ds) }

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// retryController calls fn until it does not fail with NOT_CONTROLLER
// (the controller changed, or lost its quorum for a moment: what an admin
// client retries), for at most a minute; retried tells fn whether an
// earlier call failed so (its command may have been committed anyway).
func retryController(t *testing.T, what string, fn func(retried bool) error) error {
	t.Helper()
	var err error
	calls := 0
	testwait.Until(time.Minute, func() bool {
		if err != nil {
			t.Logf("%s: %v; asking again", what, err)
		}
		err = fn(calls > 0)
		calls++
		return err == nil || !errors.Is(err, replication.ErrNotController)
	})
	return err
}

// TestSimulatedCluster runs a large cluster in this process (package doc)
// and measures, at its size: the start, time to leaders after one
// CreateTopics, idle cost and memory per broker and per replica,
// metadata propagation (a command committed -> applied on every node),
// elections after a broker is lost, reassigning all of that broker's
// partitions away, and a controller failover. Every step must complete
// (every partition led, the metadata on every node, ...) within generous
// bounds, or the test fails.
//
// The CI form (the defaults: 50 brokers, 3 controllers, 150 partitions at
// RF 3) takes under a minute on a loaded 2-core machine. The long form
// sets the size (docs/SCALING.md):
//
//	STRATA_SIM_BROKERS=100 STRATA_SIM_PARTITIONS=1000 STRATA_SIM_IDLE=20s go test ./internal/sim -run TestSimulatedCluster -v -timeout 30m
func TestSimulatedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulated cluster of 50 brokers: skipped under -short")
	}
	p := simParams{
		brokers:     envInt(t, "STRATA_SIM_BROKERS", 50),
		controllers: envInt(t, "STRATA_SIM_CONTROLLERS", 3),
		partitions:  envInt(t, "STRATA_SIM_PARTITIONS", 150),
		rf:          envInt(t, "STRATA_SIM_RF", 3),
		idle:        envDuration(t, "STRATA_SIM_IDLE", 3*time.Second),
		heartbeat:   envDuration(t, "STRATA_SIM_PARTITION_HEARTBEAT", 0),
		probes:      envInt(t, "STRATA_SIM_PROBES", 10),
		latency:     envDuration(t, "STRATA_SIM_LATENCY", 0),
	}
	if p.brokers < p.rf+1 || p.partitions < 1 || p.controllers < 1 || p.probes < 1 {
		t.Fatalf("need more brokers than the replication factor, a partition, a controller and a probe: %+v", p)
	}
	dir := os.Getenv("STRATA_SIM_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else {
		d, err := os.MkdirTemp(dir, "strata-sim-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	var logger *slog.Logger
	if os.Getenv("STRATA_SIM_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	t.Logf("simulated cluster: %d brokers, %d controllers, %d partitions at RF %d, partition heartbeat %v (0 = default), write latency %v, data in %s, GOMAXPROCS %d",
		p.brokers, p.controllers, p.partitions, p.rf, p.heartbeat, p.latency, dir, runtime.GOMAXPROCS(0))
	replicas := p.partitions * p.rf

	// 1. Start.
	base := readStats()
	t0 := time.Now()
	c, err := Start(Options{Brokers: p.brokers, Controllers: p.controllers, Dir: dir, PartitionHeartbeat: p.heartbeat, Latency: p.latency, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		t0 := time.Now()
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		t.Logf("closed every node in %v", time.Since(t0).Round(time.Millisecond))
	})
	startTime := time.Since(t0)
	nodes := c.Nodes()
	registered, ok := waitAll(nodes, t0, 60*time.Second, 5*time.Millisecond, func(n *Node) bool { return len(n.Broker.Brokers()) == p.brokers })
	if !ok {
		t.Fatalf("not every node sees the %d brokers registered after 60 s", p.brokers)
	}
	var ctrl *Node
	testwait.For(t, 30*time.Second, func() bool { ctrl = c.Controller(); return ctrl != nil }, "no agreed controller")
	started := readStats()
	startedConns := c.Net.Conns() / 2
	t.Logf("start: %d nodes started in %v, every registration on every node after %v; controller %d",
		len(nodes), startTime.Round(time.Millisecond), maxDur(registered).Round(time.Millisecond), ctrl.ID)
	nNodes := uint64(len(nodes))
	t.Logf("per node (no partitions): %.1f goroutines, heap %.2f MiB, stacks %.2f MiB, RSS %.2f MiB",
		float64(started.goroutines-base.goroutines)/float64(nNodes), mib((started.heap-base.heap)/nNodes),
		mib((started.stacks-base.stacks)/nNodes), mib((started.rss-base.rss)/nNodes))

	// 2. Time to leaders: one CreateTopics of every partition, asked of a
	// broker-only node (forwarded to the controller, as a client's is).
	ctx := context.Background()
	const topic = "sim"
	t0 = time.Now()
	createCPU0 := cpuTime()
	if err := retryController(t, "CreateTopic", func(retried bool) error {
		_, err := c.Brokers[0].Broker.CreateTopic(ctx, replication.CreateTopicRequest{Name: topic, NumPartitions: int32(p.partitions), ReplicationFactor: int16(p.rf)})
		if retried && errors.Is(err, replication.ErrTopicExists) {
			return nil // the first ask was committed after all
		}
		return err
	}); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	created := time.Since(t0)
	allLed := func(n *Node) bool {
		ti, ok := n.Broker.Topic(topic)
		if !ok {
			return false
		}
		for _, pi := range ti.Partitions {
			if pi.Leader < 0 || pi.LeaderEpoch <= 0 {
				return false
			}
		}
		return true
	}
	// Every node opens its replicas' logs and groups on this one
	// process's cores: the bound grows with the replicas.
	leadersBound := 120*time.Second + time.Duration(replicas)*50*time.Millisecond
	ledAt, ok := waitAll(nodes, t0, leadersBound, 5*time.Millisecond, allLed)
	if !ok {
		worst, missing, ctrlUnled := 0, 0, -1
		for _, n := range nodes {
			ti, ok := n.Broker.Topic(topic)
			if !ok {
				missing++
				continue
			}
			unled := 0
			for _, pi := range ti.Partitions {
				if pi.Leader < 0 || pi.LeaderEpoch <= 0 {
					unled++
				}
			}
			worst = max(worst, unled)
			if n.Broker.MetadataLeader() == n.ID {
				ctrlUnled = unled
			}
		}
		t.Fatalf("not every partition has a leader on every node %v after CreateTopic (%d nodes without the topic; at most %d partitions without a leader on a node, %d on the controller; %v of CPU used)",
			leadersBound, missing, worst, ctrlUnled, (cpuTime() - createCPU0).Round(time.Millisecond))
	}
	createCPU := cpuTime() - createCPU0
	t.Logf("time to leaders: CreateTopic of %d partitions returned after %v; every partition led on every node after %v (median node %v); the process used %v of CPU meanwhile (%.1f ms per replica)",
		p.partitions, created.Round(time.Millisecond), maxDur(ledAt).Round(time.Millisecond), median(ledAt).Round(time.Millisecond),
		createCPU.Round(time.Millisecond), float64(createCPU.Microseconds())/1000/float64(replicas))

	// 3. Idle cost and memory per replica, once settled: every replica in
	// sync (the followers caught up after the elections), as the first
	// broker's image says. Over the idle window no partition may change
	// leader (an idle cluster keeping its leaders is what is measured).
	view := c.Brokers[0].Broker
	if !testwait.Until(leadersBound, func() bool {
		ti, ok := view.Topic(topic)
		if !ok {
			return false
		}
		for _, pi := range ti.Partitions {
			if pi.Leader < 0 || len(pi.ISR) != len(pi.Replicas) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("waited %v: not every replica in sync after the leaders were elected:\n%s", leadersBound, outOfSync(c, topic))
	}
	leaderEpochs := func() []int32 {
		ti, _ := view.Topic(topic)
		out := make([]int32, len(ti.Partitions))
		for i, pi := range ti.Partitions {
			out[i] = pi.LeaderEpoch
		}
		return out
	}
	settled := leaderEpochs()
	cpu0, wall0 := cpuTime(), time.Now()
	testwait.Hold(t, p.idle, func() bool { return slices.Equal(leaderEpochs(), settled) }, "a partition changed leader while the cluster was idle")
	cpu := cpuTime() - cpu0
	wall := time.Since(wall0)
	loaded := readStats()
	loadedConns := c.Net.Conns() / 2
	if path := os.Getenv("STRATA_SIM_HEAPPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	perReplica := func(a, b uint64) float64 { return float64(int64(a)-int64(b)) / float64(replicas) / 1024 }
	t.Logf("idle: %.1f%% of a core for the whole process over %v (%.3f%% per node, %.4f%% per replica)",
		100*cpu.Seconds()/wall.Seconds(), wall.Round(time.Millisecond), 100*cpu.Seconds()/wall.Seconds()/float64(nNodes),
		100*cpu.Seconds()/wall.Seconds()/float64(replicas))
	t.Logf("partitions' cost: %d replicas and %d more connections (%d -> %d): goroutines +%d (%.1f per replica), heap +%.1f MiB (%.1f KiB per replica), stacks +%.1f MiB, RSS +%.1f MiB (%.1f KiB per replica), %.1f file descriptors per replica",
		replicas, loadedConns-startedConns, startedConns, loadedConns, loaded.goroutines-started.goroutines,
		float64(loaded.goroutines-started.goroutines)/float64(replicas), mib(loaded.heap-started.heap), perReplica(loaded.heap, started.heap),
		mib(loaded.stacks-started.stacks), mib(loaded.rss-started.rss), perReplica(loaded.rss, started.rss), float64(loaded.fds-started.fds)/float64(replicas))

	// 4. Metadata propagation: a topic config change asked of a
	// broker-only node (forwarded, committed, applied there before it
	// returns), then applied on every node.
	if err := retryController(t, "CreateTopic probe", func(retried bool) error {
		_, err := c.Brokers[1].Broker.CreateTopic(ctx, replication.CreateTopicRequest{Name: "probe", NumPartitions: 1, ReplicationFactor: int16(p.rf)})
		if retried && errors.Is(err, replication.ErrTopicExists) {
			return nil
		}
		return err
	}); err != nil {
		t.Fatalf("CreateTopic probe: %v", err)
	}
	// A broker validates a config change against its own image before
	// forwarding it, so every node must have the probe topic first.
	if _, ok := waitAll(nodes, time.Now(), 30*time.Second, time.Millisecond, func(n *Node) bool { _, ok := n.Broker.Topic("probe"); return ok }); !ok {
		t.Fatalf("the probe topic not on every node after 30 s")
	}
	var commits, applied []time.Duration
	for i := 0; i < p.probes; i++ {
		v := strconv.Itoa(3600000 + i)
		asker := c.Brokers[(2+i)%len(c.Brokers)]
		t0 := time.Now()
		if err := retryController(t, "SetTopicConfigs", func(bool) error {
			return asker.Broker.SetTopicConfigs(ctx, "probe", map[string]string{"retention.ms": v}, false)
		}); err != nil {
			t.Fatalf("SetTopicConfigs: %v", err)
		}
		commits = append(commits, time.Since(t0))
		each, ok := waitAll(nodes, t0, 30*time.Second, time.Millisecond, func(n *Node) bool {
			ti, ok := n.Broker.Topic("probe")
			return ok && ti.Configs["retention.ms"] == v
		})
		if !ok {
			t.Fatalf("probe %d: not applied on every node after 30 s", i)
		}
		applied = append(applied, maxDur(each))
	}
	t.Logf("metadata propagation (%d config changes asked of broker-only nodes): committed and applied on the asker after median %v (max %v); applied on all %d nodes after median %v (max %v)",
		p.probes, median(commits).Round(100*time.Microsecond), maxDur(commits).Round(100*time.Microsecond), len(nodes),
		median(applied).Round(100*time.Microsecond), maxDur(applied).Round(100*time.Microsecond))

	// 5. A broker lost: the broker-only node leading the most partitions
	// is killed (cut off, then closed without handoff); every partition it
	// led must get a new leader, recorded in every node's metadata.
	led := map[int32][]int32{}
	ti, _ := ctrl.Broker.Topic(topic)
	for _, pi := range ti.Partitions {
		led[pi.Leader] = append(led[pi.Leader], pi.Partition)
	}
	var victim *Node
	for _, n := range c.Brokers {
		if victim == nil || len(led[n.ID]) > len(led[victim.ID]) {
			victim = n
		}
	}
	lost := led[victim.ID]
	epochs := map[int32]int32{}
	for _, pi := range ti.Partitions {
		epochs[pi.Partition] = pi.LeaderEpoch
	}
	t0 = time.Now()
	if err := c.Kill(victim); err != nil {
		t.Logf("kill of node %d: %v", victim.ID, err)
	}
	killed := time.Since(t0)
	reLed := func(n *Node) bool {
		ti, ok := n.Broker.Topic(topic)
		if !ok {
			return false
		}
		for _, part := range lost {
			pi := ti.Partitions[part]
			if pi.Leader < 0 || pi.Leader == victim.ID || pi.LeaderEpoch <= epochs[part] {
				return false
			}
		}
		return true
	}
	survivors := c.Running()
	reLedAt, ok := waitAll(survivors, t0, 60*time.Second, 5*time.Millisecond, reLed)
	if !ok {
		t.Fatalf("the %d partitions node %d led have no new leader on every node 60 s after it was killed", len(lost), victim.ID)
	}
	t.Logf("broker loss: node %d (leader of %d partitions) killed (cut off, closed in %v); all led again on every node after %v (controller's image: %v)",
		victim.ID, len(lost), killed.Round(time.Millisecond), maxDur(reLedAt).Round(time.Millisecond),
		reLedAt[slices.Index(survivors, ctrl)].Round(time.Millisecond))

	// 6. Reassign every partition of the lost broker to other brokers
	// (AlterPartitionReassignments' path), from a broker-only node.
	ti, _ = ctrl.Broker.Topic(topic)
	var moves []replication.PartitionInfo
	for _, pi := range ti.Partitions {
		if slices.Contains(pi.Replicas, victim.ID) {
			moves = append(moves, pi)
		}
	}
	live := []int32{}
	for _, n := range c.Brokers {
		if n.Broker != nil {
			live = append(live, n.ID)
		}
	}
	asker := c.Brokers[0]
	if asker == victim {
		asker = c.Brokers[1]
	}
	t0 = time.Now()
	for i, pi := range moves {
		target := slices.Clone(pi.Replicas)
		for k := 0; ; k++ {
			cand := live[(i+k)%len(live)]
			if !slices.Contains(target, cand) {
				target[slices.Index(target, victim.ID)] = cand
				break
			}
		}
		if err := retryController(t, "AlterPartitionReassignment", func(retried bool) error {
			err := asker.Broker.AlterPartitionReassignment(ctx, topic, pi.Partition, target)
			if retried && err != nil {
				// The first ask may have been recorded (or even done).
				if ti, ok := asker.Broker.Topic(topic); ok {
					if cur := ti.Partitions[pi.Partition]; slices.Equal(cur.Target, target) || (cur.Target == nil && !slices.Contains(cur.Replicas, victim.ID)) {
						return nil
					}
				}
			}
			return err
		}); err != nil {
			t.Fatalf("reassign %s-%d to %v: %v", topic, pi.Partition, target, err)
		}
	}
	issued := time.Since(t0)
	moved := func(n *Node) bool {
		ti, ok := n.Broker.Topic(topic)
		if !ok {
			return false
		}
		for _, pi := range ti.Partitions {
			if pi.Target != nil || slices.Contains(pi.Replicas, victim.ID) || pi.Leader < 0 {
				return false
			}
		}
		return true
	}
	movedAt, ok := waitAll(c.Running(), t0, 120*time.Second, 5*time.Millisecond, moved)
	if !ok {
		t.Fatalf("the %d partitions of node %d not reassigned on every node after 120 s (%d reassignments listed)", len(moves), victim.ID, len(ctrl.Broker.Reassignments()))
	}
	t.Logf("reassignment: %d partitions moved off node %d (%d reassignments recorded in %v); done on every node after %v",
		len(moves), victim.ID, len(moves), issued.Round(time.Millisecond), maxDur(movedAt).Round(time.Millisecond))

	// 7. Controller failover: the controller is killed; the other
	// controllers elect a new one, every node follows it, and metadata
	// writes asked of a broker-only node succeed again.
	// The controller now (it may have changed under load since the start).
	var old *Node
	testwait.For(t, 30*time.Second, func() bool { old = c.Controller(); return old != nil }, "no agreed controller before the failover")
	t0 = time.Now()
	var wg sync.WaitGroup
	var writeOK time.Duration
	var writeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		i := 0
		if !testwait.Until(60*time.Second, func() bool {
			i++
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			return asker.Broker.SetTopicConfigs(actx, "probe", map[string]string{"retention.ms": strconv.Itoa(7200000 + i)}, false) == nil
		}) {
			writeErr = fmt.Errorf("no metadata write succeeded within 60 s")
			return
		}
		writeOK = time.Since(t0)
	}()
	if err := c.Kill(old); err != nil {
		t.Logf("kill of controller %d: %v", old.ID, err)
	}
	var newCtrl *Node
	testwait.For(t, 60*time.Second, func() bool { newCtrl = c.Controller(); return newCtrl != nil && newCtrl != old },
		"no new controller agreed by every node 60 s after controller %d was killed", old.ID)
	agreed := time.Since(t0)
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	t.Logf("controller failover: controller %d killed; %d agreed by every node after %v; a metadata write from a broker-only node succeeded after %v",
		old.ID, newCtrl.ID, agreed.Round(time.Millisecond), writeOK.Round(time.Millisecond))

	t.Logf("SUMMARY brokers=%d controllers=%d partitions=%d rf=%d start=%v leaders=%v leaders_cpu=%v idle_cpu_pct=%.1f rss_mib=%.0f heap_mib=%.0f conns=%d goroutines=%d propagation_median=%v propagation_max=%v broker_loss=%v reassign=%v failover_controller=%v failover_write=%v",
		p.brokers, p.controllers, p.partitions, p.rf, startTime.Round(time.Millisecond), maxDur(ledAt).Round(time.Millisecond), createCPU.Round(time.Millisecond),
		100*cpu.Seconds()/wall.Seconds(), mib(loaded.rss), mib(loaded.heap), loadedConns, loaded.goroutines, median(applied).Round(100*time.Microsecond),
		maxDur(applied).Round(100*time.Microsecond), maxDur(reLedAt).Round(time.Millisecond), maxDur(movedAt).Round(time.Millisecond),
		agreed.Round(time.Millisecond), writeOK.Round(time.Millisecond))
}

// outOfSync lists the partitions whose ISR is short in the first broker's
// image, with what their leader's and the controllers' images say.
func outOfSync(c *Cluster, topic string) string {
	byID := map[int32]*Node{}
	for _, n := range append(append([]*Node(nil), c.Controllers...), c.Brokers...) {
		byID[n.ID] = n
	}
	say := func(n *Node, p int32) string {
		if n == nil || n.Broker == nil {
			return "no node"
		}
		ti, ok := n.Broker.Topic(topic)
		if !ok || int(p) >= len(ti.Partitions) {
			return "no topic"
		}
		pi := ti.Partitions[p]
		return fmt.Sprintf("leader %d epoch %d ISR %v", pi.Leader, pi.LeaderEpoch, pi.ISR)
	}
	var b strings.Builder
	ti, _ := c.Brokers[0].Broker.Topic(topic)
	for _, pi := range ti.Partitions {
		if pi.Leader >= 0 && len(pi.ISR) == len(pi.Replicas) {
			continue
		}
		fmt.Fprintf(&b, "  %s-%d replicas %v: first broker %s; leader's own image %s; controller %d's image %s\n",
			topic, pi.Partition, pi.Replicas, say(c.Brokers[0], pi.Partition), say(byID[pi.Leader], pi.Partition),
			c.Controllers[0].ID, say(c.Controllers[0], pi.Partition))
	}
	return b.String()
}
