package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/segment"
)

// chaosLong reports whether the long forms run (STRATA_CHAOS_LONG=1).
func chaosLong() bool { return os.Getenv("STRATA_CHAOS_LONG") != "" }

// ackLog collects what producers were told.
type ackLog struct {
	mu     sync.Mutex
	acks   map[int32][]ackRec // per partition, in ack order
	failed map[recKey]error   // records not acknowledged
	sent   int
}

// ackRec is one acknowledged record (kept small: the long form acks
// millions).
type ackRec struct {
	off int64
	key recKey
	at  int64 // when the ack arrived, Unix nanoseconds
}

func newAckLog() *ackLog {
	return &ackLog{acks: map[int32][]ackRec{}, failed: map[recKey]error{}}
}

func (a *ackLog) record(r *kgo.Record, err error) {
	now := time.Now().UnixNano()
	key := keyOf(r.Value)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.failed[key] = err
		return
	}
	a.acks[r.Partition] = append(a.acks[r.Partition], ackRec{off: r.Offset, key: key, at: now})
}

// firstAckAfter returns the time of the first ack on partition p later
// than t (zero if none yet).
func (a *ackLog) firstAckAfter(p int32, t time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	rs, tn := a.acks[p], t.UnixNano()
	for i := len(rs) - 1; i >= 0 && rs[i].at > tn; i-- {
		if i == 0 || rs[i-1].at <= tn {
			return time.Unix(0, rs[i].at)
		}
	}
	return time.Time{}
}

func (a *ackLog) total() (acked, failed int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, rs := range a.acks {
		acked += len(rs)
	}
	return acked, len(a.failed)
}

// chaosProducer produces "c<client>-<seq>" records round-robin over the
// partitions with acks=all (idempotent, kgo's default) until stop is
// closed, keeping at most inflight records outstanding.
func chaosProducer(cl *kgo.Client, topic string, client int, parts int32, inflight int, pad []byte, acks *ackLog, stop <-chan struct{}) {
	sem := make(chan struct{}, inflight)
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		case sem <- struct{}{}:
		}
		p := int32(seq) % parts
		r := &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "c%d-%d-", client, seq)}
		r.Value = append(r.Value, pad...)
		acks.mu.Lock()
		acks.sent++
		acks.mu.Unlock()
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			acks.record(r, err)
			<-sem
		})
	}
}

// recKey identifies a test record: client<<40 | seq, from the
// "c<client>-<seq>-" prefix of its value; badKey for other values.
type recKey uint64

const badKey = ^recKey(0)

func keyOf(v []byte) recKey {
	if len(v) < 2 || v[0] != 'c' {
		return badKey
	}
	var nums [2]uint64
	i := 1
	for k := range nums {
		start := i
		for i < len(v) && v[i] >= '0' && v[i] <= '9' && i-start < 12 {
			nums[k] = nums[k]*10 + uint64(v[i]-'0')
			i++
		}
		if i == start || i >= len(v) || v[i] != '-' {
			return badKey
		}
		i++
	}
	if nums[0] >= 1<<23 || nums[1] >= 1<<40 {
		return badKey
	}
	return recKey(nums[0]<<40 | nums[1])
}

func (k recKey) client() int { return int(k >> 40) }
func (k recKey) seq() int    { return int(k & (1<<40 - 1)) }

func (k recKey) String() string {
	if k == badKey {
		return "(not a test record)"
	}
	return fmt.Sprintf("c%d-%d", k.client(), k.seq())
}

// offsetChecker is what a consumer checks while leaders move: within a
// partition the offsets it is handed go up by one from 0 (no gap), an
// offset never carries two different records, and a record is never
// seen at two offsets.
type offsetChecker struct {
	mu     sync.Mutex
	at     map[int32][]recKey // per partition, indexed by offset
	where  map[int][]int64    // client -> seq -> 1 + offset (0: not seen)
	errs   []string
	count  int
	repeat int // records handed again at the same offset (allowed)
}

func newOffsetChecker() *offsetChecker {
	return &offsetChecker{at: map[int32][]recKey{}, where: map[int][]int64{}}
}

// next is the next offset expected in partition p. Caller holds mu.
func (o *offsetChecker) next(p int32) int64 { return int64(len(o.at[p])) }

func (o *offsetChecker) see(r *kgo.Record) {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := keyOf(r.Value)
	fail := func(f string, args ...any) {
		if len(o.errs) < 20 {
			o.errs = append(o.errs, fmt.Sprintf("p%d@%d %v: ", r.Partition, r.Offset, key)+fmt.Sprintf(f, args...))
		}
	}
	o.count++
	at := o.at[r.Partition]
	n := int64(len(at))
	switch {
	case r.Offset < 0:
		fail("negative offset")
		return
	case r.Offset < n:
		if at[r.Offset] != key {
			fail("offset held %v before", at[r.Offset])
		}
		o.repeat++
		return
	case r.Offset > n:
		fail("expected offset %d next (gap)", n)
		if r.Offset-n > 1<<24 {
			return
		}
		for int64(len(at)) < r.Offset {
			at = append(at, badKey)
		}
	}
	o.at[r.Partition] = append(at, key)
	if key == badKey {
		return
	}
	w := o.where[key.client()]
	for len(w) <= key.seq() {
		w = append(w, 0)
	}
	if w[key.seq()] != 0 && w[key.seq()]-1 != r.Offset {
		fail("seen before at offset %d", w[key.seq()]-1)
	}
	w[key.seq()] = r.Offset + 1
	o.where[key.client()] = w
}

func (o *offsetChecker) errors() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.errs...)
}

// reached reports whether partitions [0, parts) were read up to end.
func (o *offsetChecker) reached(end map[int32]int64, parts int32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for p := int32(0); p < parts; p++ {
		if o.next(p) < end[p] {
			return false
		}
	}
	return true
}

// consumeChecking polls cl until stop, feeding every record to chk.
func consumeChecking(cl *kgo.Client, chk *offsetChecker, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(chk.see)
	}
}

// TestClusterChaos: three strata processes, a topic with replication
// factor 3, idempotent acks=all producers and a consumer running while
// the test SIGKILLs partition leaders (and restarts them on the same data
// directory and ports) and cuts brokers off from their peers. Afterwards
// every acknowledged record is read back once, at its acknowledged
// offset, in the order it was produced; no record appears twice; the
// offsets have no gap; the consumer that read during the chaos never saw
// an offset change its record, a record at two offsets or a gap; a new
// produce to every partition succeeds; and the replicas' segments hold
// byte-identical batches. STRATA_CHAOS_LONG=1 runs it for 5 minutes
// instead of ~20 s.
func TestClusterChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster")
	}
	const (
		topic = "chaos"
		parts = int32(6)
	)
	chaosFor, rounds, outage := 18*time.Second, 3, time.Duration(0)
	if chaosLong() {
		// The outage outlasts the partition groups' snapshot interval
		// (2-4 min) plus TrailingLogs' worth of entries.
		chaosFor, rounds, outage = 3*time.Minute, 1000, 270*time.Second
		if s := os.Getenv("STRATA_CHAOS_OUTAGE"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				t.Fatalf("STRATA_CHAOS_OUTAGE: %v", err)
			}
			outage = d
		}
	}
	hb := 500 * time.Millisecond
	if s := os.Getenv("STRATA_CHAOS_HEARTBEAT"); s != "" { // e.g. 2s, the default, to measure failover at it
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("STRATA_CHAOS_HEARTBEAT: %v", err)
		}
		hb = d
	}
	start := time.Now()
	c := startChaosCluster(t, 3, hb)
	t.Logf("cluster of 3 up after %v (partition heartbeat timeout %v)", time.Since(start).Round(time.Millisecond), hb)
	ctx, cancel := context.WithTimeout(context.Background(), chaosFor+outage+6*time.Minute)
	defer cancel()

	admCl := c.client()
	adm := kadm.NewClient(admCl)
	if resp, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	c.waitLeaders(ctx, adm, topic, parts, 20*time.Second)

	acks := newAckLog()
	stopProduce := make(chan struct{})
	var producers sync.WaitGroup
	var pcls []*kgo.Client
	pad := []byte(strings.Repeat("x", 100))
	for i := 0; i < 2; i++ {
		cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RecordDeliveryTimeout(time.Minute), kgo.ProducerLinger(2*time.Millisecond))
		pcls = append(pcls, cl)
		producers.Add(1)
		go func(i int) {
			defer producers.Done()
			chaosProducer(cl, topic, i, parts, 64, pad, acks, stopProduce)
		}(i)
	}
	chk := newOffsetChecker()
	offs := map[int32]kgo.Offset{}
	for p := int32(0); p < parts; p++ {
		offs[p] = kgo.NewOffset().AtStart()
	}
	consCl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchMaxWait(200*time.Millisecond))
	stopConsume, consumed := make(chan struct{}), make(chan struct{})
	go consumeChecking(consCl, chk, stopConsume, consumed)

	time.Sleep(time.Second) // some traffic before the first fault
	rng := rand.New(rand.NewSource(testwait.Seed(t)))
	var failovers []time.Duration
	chaosEnd := time.Now().Add(chaosFor)
	for round := 0; round < rounds && time.Now().Before(chaosEnd); round++ {
		// 1. SIGKILL the leader of a partition, measure the time to the
		// next acknowledged produce on it, restart the broker.
		p := int32(round) % parts
		ls := c.waitLeaders(ctx, adm, topic, parts, 30*time.Second)
		victim := c.node(ls[p][0])
		t0 := time.Now()
		victim.kill()
		dead := time.Now()
		var failover time.Duration
		testwait.UntilEvery(30*time.Second, 5*time.Millisecond, func() bool {
			if at := acks.firstAckAfter(p, dead); !at.IsZero() {
				failover = at.Sub(t0)
			}
			return failover != 0
		})
		if failover == 0 {
			t.Fatalf("round %d: no produce to p%d acknowledged within 30s of SIGKILL of its leader %d", round, p, victim.id)
		}
		failovers = append(failovers, failover)
		t.Logf("round %d: SIGKILL broker %d (leader of p%d at epoch %d): next acknowledged produce to p%d after %v",
			round, victim.id, p, ls[p][1], p, failover.Round(time.Millisecond))
		time.Sleep(time.Duration(200+rng.Intn(800)) * time.Millisecond)
		rs := time.Now()
		victim.start()
		victim.waitReady(60 * time.Second)
		t.Logf("round %d: broker %d restarted, serving after %v", round, victim.id, time.Since(rs).Round(time.Millisecond))

		// 2. Cut a broker (a leader every other round) off from its peers
		// for a few seconds, then heal.
		ls = c.waitLeaders(ctx, adm, topic, parts, 30*time.Second)
		cutID := c.nodes[rng.Intn(len(c.nodes))].id
		if round%2 == 0 {
			cutID = ls[(p+1)%parts][0]
		}
		c.net.isolate(cutID)
		cutFor := time.Duration(2000+rng.Intn(2000)) * time.Millisecond
		t.Logf("round %d: broker %d cut off from its peers for %v", round, cutID, cutFor)
		time.Sleep(cutFor)
		c.net.heal(cutID)

		// 3. Sometimes kill a broker during its cut's aftermath (a
		// follower catching up), and restart it at once.
		if round%3 == 2 {
			n := c.nodes[rng.Intn(len(c.nodes))]
			time.Sleep(300 * time.Millisecond)
			n.kill()
			n.start()
			n.waitReady(60 * time.Second)
			t.Logf("round %d: broker %d SIGKILLed while catching up and restarted", round, n.id)
		}
		a, f := acks.total()
		t.Logf("round %d done at %v: %d acknowledged, %d failed", round, time.Since(start).Round(time.Millisecond), a, f)
	}

	if outage > 0 {
		// A long outage: one broker stays down while the others take
		// more entries than raft keeps (TrailingLogs) and snapshot, so on
		// its return it must be sent the leaders' segments (a snapshot
		// install).
		n := c.nodes[rng.Intn(len(c.nodes))]
		n.kill()
		t.Logf("outage: broker %d down for %v", n.id, outage)
		time.Sleep(outage)
		n.start()
		n.waitReady(60 * time.Second)
		a, f := acks.total()
		t.Logf("outage: broker %d back at %v: %d acknowledged, %d failed", n.id, time.Since(start).Round(time.Millisecond), a, f)
		time.Sleep(10 * time.Second)
		t.Logf("outage: broker %d's log: %d partition snapshot installs started, %d done; the cluster's: %d raft snapshots failed", n.id,
			strings.Count(fileTail(n.log, 1<<30), "installing a partition snapshot"), strings.Count(fileTail(n.log, 1<<30), "partition snapshot installed"),
			len(strings.Fields(strings.ReplaceAll(c.grepLogs(1<<20, "failed to take snapshot"), " ", "_"))))
	}

	// Quiet: stop producing, let everything in flight finish.
	close(stopProduce)
	producers.Wait()
	fctx, fcancel := context.WithTimeout(ctx, 90*time.Second)
	for _, cl := range pcls {
		if err := cl.Flush(fctx); err != nil {
			t.Errorf("flush: %v", err)
		}
	}
	fcancel()
	acked, failed := acks.total()
	t.Logf("chaos over after %v: %d records acknowledged, %d failed; proxies: %d connections refused, %d of unknown origin",
		time.Since(start).Round(time.Millisecond), acked, failed, c.net.refused.Load(), c.net.unknown.Load())
	if failed > 0 {
		n := 0
		for k, err := range acks.failed {
			if n++; n <= 5 {
				t.Errorf("not acknowledged: %v: %v", k, err)
			}
		}
	}

	// No partition is stuck: a new produce to each succeeds.
	final := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < parts; p++ {
		pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
		res := final.ProduceSync(pctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("final-" + strconv.Itoa(int(p)) + "-")})
		pcancel()
		if err := res.FirstErr(); err != nil {
			t.Fatalf("final produce to p%d: %v", p, err)
		}
	}

	// Every acknowledged record, read back once at its offset, in order.
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	got := readAll(t, c, topic, parts, end, 3*time.Minute)
	checkReadBack(t, acks, got, end, parts)

	// The consumer that read during the chaos caught up and saw no
	// anomaly.
	testwait.Until(20*time.Second, func() bool { return chk.reached(end, parts) }) // checked below, partition by partition
	close(stopConsume)
	<-consumed
	for _, e := range chk.errors() {
		t.Errorf("consumer during chaos: %s", e)
	}
	chk.mu.Lock()
	t.Logf("consumer during chaos: %d records, %d handed again at the same offset", chk.count, chk.repeat)
	for p := int32(0); p < parts; p++ {
		if chk.next(p) < end[p] {
			t.Errorf("consumer during chaos: p%d read to %d of %d", p, chk.next(p), end[p])
		}
	}
	chk.mu.Unlock()

	// The replicas converge on identical batches.
	var diff string
	var batches int
	testwait.UntilEvery(30*time.Second, 200*time.Millisecond, func() bool { // reads every replica from disk: every 200 ms
		batches, diff = c.compareReplicas(topic, parts)
		return diff == ""
	})
	if diff != "" {
		ls, _ := c.partitionLeaders(ctx, adm, topic)
		t.Errorf("replicas differ 30s after the cluster went quiet: %s (leaders: %v)", diff, ls)
		c.dumpGoroutines()
	} else {
		t.Logf("replicas identical (%d batches on each of the 3): %v", batches, time.Since(start).Round(time.Millisecond))
	}
	c.checkLogs()
	sort.Slice(failovers, func(i, j int) bool { return failovers[i] < failovers[j] })
	t.Logf("leader SIGKILL -> next acknowledged produce: %v (sorted), heartbeat timeout %v", failovers, hb)
}

// readAll reads partitions [0, end) from the start with a fresh
// consumer, through an offsetChecker.
func readAll(t *testing.T, c *chaosCluster, topic string, parts int32, end map[int32]int64, timeout time.Duration) *offsetChecker {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for p := int32(0); p < parts; p++ {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	defer cl.Close()
	chk := newOffsetChecker()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !chk.reached(end, parts) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back: %v (ends %v)", ctx.Err(), end)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end[r.Partition] {
				chk.see(r)
			}
		})
	}
	return chk
}

// checkReadBack checks the records read against what was acknowledged:
// each acknowledged record at its offset, each client's records of a
// partition in the order it produced them.
func checkReadBack(t *testing.T, acks *ackLog, got *offsetChecker, end map[int32]int64, parts int32) {
	t.Helper()
	for _, e := range got.errors() {
		t.Errorf("read back: %s", e)
	}
	acks.mu.Lock()
	defer acks.mu.Unlock()
	got.mu.Lock()
	defer got.mu.Unlock()
	errs := 0
	fail := func(f string, args ...any) {
		if errs++; errs <= 20 {
			t.Errorf(f, args...)
		}
	}
	for p := int32(0); p < parts; p++ {
		at := got.at[p]
		if int64(len(at)) != end[p] {
			fail("p%d: read %d records, log end %d", p, len(at), end[p])
		}
		lastSeq := map[int]int{}
		for off, key := range at {
			if key == badKey {
				continue
			}
			if prev, ok := lastSeq[key.client()]; ok && key.seq() <= prev {
				fail("p%d: %v at offset %d after seq %d (out of order)", p, key, off, prev)
			}
			lastSeq[key.client()] = key.seq()
		}
		for _, a := range acks.acks[p] {
			if a.key == badKey {
				fail("p%d: acknowledged record at %d has no test key", p, a.off)
			} else if a.off < 0 || a.off >= int64(len(at)) {
				fail("p%d: acknowledged %v at offset %d: offset not read back (lost)", p, a.key, a.off)
			} else if at[a.off] != a.key {
				fail("p%d: acknowledged %v at offset %d, read back %v there (lost or moved)", p, a.key, a.off, at[a.off])
			}
		}
	}
}

// TestClusterLeaderMovesWhileConsuming: a consumer group of two members
// reads a replication factor 3 topic while its partitions' leaders move
// (SIGKILL and restart, a leader cut off from its peers, preferred leader
// elections) and a producer keeps writing. The consumers never see an
// offset carry two different records, a record at two offsets, or a gap
// in a partition's offsets, and they read every acknowledged record at
// its offset.
func TestClusterLeaderMovesWhileConsuming(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster")
	}
	const (
		topic = "moves"
		parts = int32(4)
	)
	rounds := 4
	if chaosLong() {
		rounds = 40
	}
	start := time.Now()
	c := startChaosCluster(t, 3, 500*time.Millisecond,
		"--set", "offsets.topic.num.partitions=3", "--set", "group.initial.rebalance.delay.ms=0")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute+time.Duration(rounds)*20*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client())
	if resp, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	c.waitLeaders(ctx, adm, topic, parts, 20*time.Second)

	acks := newAckLog()
	stopProduce := make(chan struct{})
	pcl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(time.Minute), kgo.ProducerLinger(2*time.Millisecond))
	var producer sync.WaitGroup
	producer.Add(1)
	go func() {
		defer producer.Done()
		chaosProducer(pcl, topic, 0, parts, 32, []byte("payload"), acks, stopProduce)
	}()

	chk := newOffsetChecker()
	stopConsume := make(chan struct{})
	var consumers sync.WaitGroup
	for i := 0; i < 2; i++ {
		cl := c.client(kgo.ConsumerGroup("moves-group"), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.BlockRebalanceOnPoll(),
			kgo.FetchMaxWait(200*time.Millisecond))
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			for {
				select {
				case <-stopConsume:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
				fs := cl.PollFetches(pctx)
				pcancel()
				// Records are checked before the client may give their
				// partitions away (BlockRebalanceOnPoll), so a new owner
				// never starts past what the checker has seen.
				fs.EachRecord(chk.see)
				cl.AllowRebalance()
			}
		}()
	}

	time.Sleep(time.Second)
	rng := rand.New(rand.NewSource(testwait.Seed(t)))
	for round := 0; round < rounds; round++ {
		ls := c.waitLeaders(ctx, adm, topic, parts, 30*time.Second)
		p := int32(round) % parts
		leader := c.node(ls[p][0])
		switch round % 3 {
		case 0:
			leader.kill()
			t.Logf("round %d: SIGKILL broker %d (leader of p%d at epoch %d)", round, leader.id, p, ls[p][1])
			time.Sleep(time.Duration(500+rng.Intn(1000)) * time.Millisecond)
			leader.start()
			leader.waitReady(60 * time.Second)
		case 1:
			c.net.isolate(leader.id)
			t.Logf("round %d: broker %d (leader of p%d at epoch %d) cut off", round, leader.id, p, ls[p][1])
			time.Sleep(time.Duration(1500+rng.Intn(1000)) * time.Millisecond)
			c.net.heal(leader.id)
		case 2:
			ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
			set := kadm.TopicsSet{}
			for q := int32(0); q < parts; q++ {
				set.Add(topic, q)
			}
			res, err := adm.ElectLeaders(ectx, kadm.ElectPreferredReplica, set)
			ecancel()
			var moved, other []string
			for _, ps := range res {
				for _, r := range ps {
					if r.Err == nil {
						moved = append(moved, fmt.Sprintf("p%d", r.Partition))
					} else {
						other = append(other, fmt.Sprintf("p%d: %v", r.Partition, r.Err))
					}
				}
			}
			t.Logf("round %d: preferred leader election: err %v, elected %v, others %v", round, err, moved, other)
		}
		time.Sleep(time.Duration(500+rng.Intn(1000)) * time.Millisecond)
		after, _ := c.partitionLeaders(ctx, adm, topic)
		t.Logf("round %d: leaders now %v (partition: [leader epoch])", round, after)
	}

	close(stopProduce)
	producer.Wait()
	fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
	if err := pcl.Flush(fctx); err != nil {
		t.Errorf("flush: %v", err)
	}
	fcancel()
	acked, failed := acks.total()
	if failed > 0 {
		for k, err := range acks.failed {
			t.Errorf("not acknowledged: %v: %v", k, err)
			break
		}
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	caughtUp := testwait.Until(30*time.Second, func() bool { return chk.reached(end, parts) })
	close(stopConsume)
	consumers.Wait()
	for _, e := range chk.errors() {
		t.Errorf("consumer: %s", e)
	}
	chk.mu.Lock()
	defer chk.mu.Unlock()
	if !caughtUp {
		var at []int64
		for p := int32(0); p < parts; p++ {
			at = append(at, chk.next(p))
		}
		t.Errorf("consumers did not reach the log ends %v within 30s: at %v", end, at)
	}
	lost := 0
	for p, rs := range acks.acks {
		for _, a := range rs {
			if at := chk.at[p]; a.off < 0 || a.off >= int64(len(at)) || at[a.off] != a.key {
				if lost++; lost <= 10 {
					t.Errorf("p%d: acknowledged %v at %d, consumers did not see it there", p, a.key, a.off)
				}
			}
		}
	}
	t.Logf("%d acknowledged, %d failed; consumers saw %d records (%d again at the same offset); %v",
		acked, failed, chk.count, chk.repeat, time.Since(start).Round(time.Millisecond))
	c.checkLogs()
}

// TestClusterProduceThroughput measures acks=all idempotent produce
// throughput on a three-broker cluster into a replication factor 1 topic
// and a replication factor 3 topic (6 partitions each; one client, 1 KiB
// random values, uncompressed, linger 5 ms, up to 2,000 records in
// flight), 5 s each, interleaved twice (run with -v; only with
// STRATA_CHAOS_BENCH=1: it is a measurement, not a check).
func TestClusterProduceThroughput(t *testing.T) {
	if os.Getenv("STRATA_CHAOS_BENCH") == "" {
		t.Skip("STRATA_CHAOS_BENCH=1 runs it")
	}
	const parts = int32(6)
	per := 5 * time.Second
	c := startChaosCluster(t, 3, 2*time.Second)
	ctx := context.Background()
	adm := kadm.NewClient(c.client())
	for _, rf := range []int16{1, 3} {
		topic := fmt.Sprintf("rf%d", rf)
		if resp, err := adm.CreateTopic(ctx, parts, rf, nil, topic); err != nil || resp.Err != nil {
			t.Fatalf("create: %v %v", err, resp.Err)
		}
		c.waitLeaders(ctx, adm, topic, parts, 20*time.Second)
	}
	value := make([]byte, 1024)
	rand.New(rand.NewSource(1)).Read(value) // incompressible, and sent uncompressed
	res := map[int16][]float64{}
	for run := 0; run < 2; run++ {
		for _, rf := range []int16{1, 3} {
			topic := fmt.Sprintf("rf%d", rf)
			cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond),
				kgo.ProducerBatchCompression(kgo.NoCompression()))
			var n, errs int64
			var mu sync.Mutex
			stop := time.Now().Add(per)
			begin := time.Now()
			sem := make(chan struct{}, 2000)
			for time.Now().Before(stop) {
				sem <- struct{}{}
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					mu.Lock()
					if err != nil {
						errs++
					} else {
						n++
					}
					mu.Unlock()
					<-sem
				})
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			el := time.Since(begin)
			cl.Close()
			rate := float64(n) / el.Seconds()
			res[rf] = append(res[rf], rate)
			t.Logf("run %d RF%d: %d records of 1 KiB in %v: %.0f records/s, %.1f MB/s (%d errors)",
				run, rf, n, el.Round(time.Millisecond), rate, rate*1024/1e6, errs)
		}
	}
	t.Logf("RF3/RF1 produce throughput: %.2f, %.2f", res[3][0]/res[1][0], res[3][1]/res[1][1])
}

// TestClusterLeaderTailAfterRestart: a partition leader cut off from its
// followers stores batches its quorum never commits, is SIGKILLed, and
// restarts after the others elected a new leader and wrote different
// batches at those offsets. The restarted replica must drop its
// uncommitted tail and follow: that tail never counts as committed at
// restart (before the fix serve opened logs with their high watermark at
// the log end, Raft's truncation was refused, "truncate to N below high
// watermark M", and the replica stayed behind for good).
func TestClusterLeaderTailAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-broker cluster")
	}
	const topic = "tail"
	c := startChaosCluster(t, 3, 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.client())
	if resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	ls := c.waitLeaders(ctx, adm, topic, 1, 20*time.Second)
	leader := c.node(ls[0][0])
	// And a replication factor 1 topic with a partition on every broker:
	// its records, acknowledged, must all be readable after the restart
	// (one-voter groups recommit what they had).
	if resp, err := adm.CreateTopic(ctx, 3, 1, nil, "one"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	c.waitLeaders(ctx, adm, "one", 3, 20*time.Second)
	one := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 3; p++ {
		for i := 0; i < 50; i++ {
			one.Produce(ctx, &kgo.Record{Topic: "one", Partition: p, Value: fmt.Appendf(nil, "c%d-%d-", 10+p, i)}, nil)
		}
	}
	if err := one.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// Keep batches flowing to the leader, cut it off, let it take a few
	// more it cannot commit, then kill it.
	acks := newAckLog()
	stop := make(chan struct{})
	pcl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(time.Minute))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		chaosProducer(pcl, topic, 0, 1, 16, nil, acks, stop)
	}()
	testwait.For(t, 10*time.Second, func() bool { a, _ := acks.total(); return a >= 200 }, "no produce acknowledged")
	c.net.isolate(leader.id)
	time.Sleep(100 * time.Millisecond)
	leader.kill()
	c.net.heal(leader.id)
	var tail int64
	if bs, err := replicaBatches(leader.dir, topic, 0); err == nil && len(bs) > 0 {
		h, _ := segment.ParseHeader(bs[len(bs)-1]) // replicaBatches returns whole batches only
		tail = h.BaseOffset
	}
	// The others go on without it.
	ls = c.waitLeaders(ctx, adm, topic, 1, 20*time.Second)
	testwait.For(t, 20*time.Second, func() bool {
		acks.mu.Lock()
		defer acks.mu.Unlock()
		rs := acks.acks[0]
		return len(rs) > 0 && rs[len(rs)-1].off > tail+100
	}, "the new leader %d took no writes past offset %d", ls[0][0], tail+100)
	leader.start()
	leader.waitReady(60 * time.Second)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if err := pcl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var diff string
	var batches int
	testwait.UntilEvery(20*time.Second, 200*time.Millisecond, func() bool { // reads every replica from disk: every 200 ms
		batches, diff = c.compareReplicas(topic, 1)
		return diff == ""
	})
	if diff != "" {
		t.Fatalf("broker %d (the old leader, last batch at %d when killed) did not converge: %s\n%s", leader.id, tail, diff,
			c.grepLogs(10, "failed to clear log suffix", "below high watermark"))
	}
	// The old leader is a working replica: with another broker down, the
	// partition still commits (the quorum needs it).
	ls = c.waitLeaders(ctx, adm, topic, 1, 20*time.Second)
	var other *chaosNode
	for _, n := range c.nodes {
		if n.id != leader.id && n.id != ls[0][0] {
			other = n
		}
	}
	if other == nil { // the old leader leads again: stop a follower
		for _, n := range c.nodes {
			if n.id != leader.id {
				other = n
			}
		}
	}
	other.kill()
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	defer pcancel()
	if err := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(pctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce with broker %d down: %v", other.id, err)
	}
	// Every RF 1 partition, on brokers restarted within a checkpoint
	// interval of the writes, still has its acknowledged records.
	other.start()
	other.waitReady(60 * time.Second)
	c.waitLeaders(ctx, adm, "one", 3, 20*time.Second)
	got := readAll(t, c, "one", 3, map[int32]int64{0: 50, 1: 50, 2: 50}, 20*time.Second)
	for _, e := range got.errors() {
		t.Errorf("RF 1 topic: %s", e)
	}
	a, _ := acks.total()
	t.Logf("old leader %d had stored up to batch %d when killed; replicas identical (%d batches, %d acknowledged records)", leader.id, tail, batches, a)
	c.checkLogs()
}

func TestRecKey(t *testing.T) {
	for v, want := range map[string]string{"c0-0-": "c0-0", "c1-12345-xxxx": "c1-12345", "c12-7-": "c12-7"} {
		if k := keyOf([]byte(v)); k == badKey || k.String() != want {
			t.Errorf("%q: %v", v, k)
		}
	}
	for _, v := range []string{"", "c", "c1", "c1-", "c1-2", "x1-2-", "c-1-", "c1--", "final-0-", "c1-99999999999999-"} {
		if k := keyOf([]byte(v)); k != badKey {
			t.Errorf("%q: %v, want badKey", v, k)
		}
	}
}
