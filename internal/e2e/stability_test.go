package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// TestClusterStableUnderBurst (issue 15, point 3): a three-broker cluster
// stays stable under a burst of work and is quiet once the burst is over.
//
// Three `strata serve` processes (startQuorum; default.replication.factor
// 3, each with its own metrics listener on a port of its own) are asked at
// once for STRATA_STABILITY_PARTITIONS partitions at replication factor 3
// (topics of 10 partitions, CreateTopics from four goroutines with a
// client each) plus __consumer_offsets and __transaction_state (50
// partitions each, created by the first group and the first
// transactional producer). For STRATA_STABILITY_LOAD (30 s), and on until
// every burst topic is created (at most 2 minutes more), four
// transactional producers commit (and every fifth time abort)
// transactions of 100 records, three consumer groups (four members) read
// the topics read_committed, a plain consumer fetches them, and one
// goroutine creates and deletes small topics over and over. Every 500 ms
// a prober asks each broker for Metadata (every topic) and, in a loop and
// on a connection of its own, has it create a one-partition topic, each
// with a 5 s timeout (6 s on the client).
//
// During the burst, every error a client or the prober sees must be
// retriable (kerr's retriable codes, kgo's retriable connection errors,
// a deadline); no broker may leave one kind of probe unanswered (or
// answer it with a lost controller: NOT_CONTROLLER "no metadata leader",
// no controller in Metadata) for more than 10 s in a row. A probe answered
// with a retriable error -- REQUEST_TIMED_OUT from a CreateTopics queued
// behind the burst's creations, at its own timeout as Kafka answers -- is
// an answer: counted, its longest run logged, not an outage. After the load stops, every partition has a
// leader on every broker within 10 s, and then for 30 s nothing moves:
// the brokers' strata_raft_elections_total summed over both groups stays
// put, each broker shows the same leader and leader epoch for every
// partition at the start and the end, and exactly one broker is the
// active controller. Elections, pre-votes and leader changes during the
// burst and the quiet window are logged (the figures of the note), with
// how many of the burst's elections were the first elections of new
// partitions, the latencies of CreateTopics and of the probes, and every
// error kind with its count. read_committed consumers must never return a
// record of an aborted transaction.
func TestClusterStableUnderBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("three brokers under a 30 s burst and a 30 s quiet window: not in -short")
	}
	const (
		perTopic     = 10
		creators     = 4
		producers    = 4
		txnRecords   = 100
		probeEvery   = 500 * time.Millisecond
		probeTimeout = 5 * time.Second
		maxOutage    = 10 * time.Second // longest run of failed probes allowed
		settle       = 10 * time.Second // leaders everywhere after the load
		quiet        = 30 * time.Second
		createMore   = 2 * time.Minute // creating the burst topics may outlast the load by this much
	)
	partitions := stabEnvInt(t, "STRATA_STABILITY_PARTITIONS", 300)
	load := stabEnvDuration(t, "STRATA_STABILITY_LOAD", 30*time.Second)
	nTopics := (partitions + perTopic - 1) / perTopic
	// serve reads STRATA_* variables as settings, and startQuorum's
	// brokers inherit the test's environment: the test's own variables
	// are not for them (no test here runs in parallel).
	for _, name := range []string{"STRATA_STABILITY_PARTITIONS", "STRATA_STABILITY_LOAD"} {
		if v, ok := os.LookupEnv(name); ok {
			os.Unsetenv(name)
			t.Cleanup(func() { os.Setenv(name, v) })
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), load+6*time.Minute)
	defer cancel()

	begin := time.Now()
	bs := startQuorum(t, 3,
		"--set", "default.replication.factor=3",
		"--set", "metrics.listener=127.0.0.1:0", // a port of its own for each broker
		"--set", "group.initial.rebalance.delay.ms=0")
	var addrs []string
	for _, b := range bs {
		addrs = append(addrs, b.addr)
	}
	metricsAddrs := make([]string, len(bs))
	for i, b := range bs {
		metricsAddrs[i] = stabMetricsAddr(t, b)
	}
	// On failure: each broker's raft metrics and its election lines (the
	// log tails come from startQuorum's cleanup, which runs after this).
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i, b := range bs {
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			raw, err := stabScrapeRaw(sctx, metricsAddrs[i])
			scancel()
			var keep []string
			for _, l := range strings.Split(raw, "\n") {
				if strings.HasPrefix(l, "strata_raft_") || strings.HasPrefix(l, "kafka_controller_") || strings.HasPrefix(l, "kafka_server_replicamanager_") {
					keep = append(keep, l)
				}
			}
			t.Logf("broker %d metrics (%s, err %v):\n%s", i+1, metricsAddrs[i], err, strings.Join(keep, "\n"))
			b.mu.Lock()
			out := b.logs.String()
			b.mu.Unlock()
			var elect []string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "election") || strings.Contains(l, "candidate") || strings.Contains(l, "leadership") {
					elect = append(elect, l)
				}
			}
			n := len(elect)
			if n > 20 {
				elect = elect[n-20:]
			}
			t.Logf("broker %d: %d log lines about elections, last %d:\n%s", i+1, n, len(elect), strings.Join(elect, "\n"))
		}
	})
	for _, a := range addrs {
		foWaitBrokers(t, a, 3, 60*time.Second)
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RetryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	var warm kadm.CreateTopicResponse
	var warmErr error
	if !testwait.Until(40*time.Second, func() bool {
		warm, warmErr = adm.CreateTopic(ctx, 1, 3, nil, "warmup")
		return warmErr == nil && (warm.Err == nil || errors.Is(warm.Err, kerr.TopicAlreadyExists))
	}) {
		t.Fatalf("create warmup: %v %v", warmErr, warm.Err)
	}
	// One client per broker, pinned to it (its seed), for the prober and
	// the Metadata checks.
	nodeCls := make([]*kgo.Client, len(bs))
	for i, a := range addrs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(a))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		nodeCls[i] = cl
	}
	scrape := func(what string) stabSample {
		t.Helper()
		s, err := stabScrapeAll(ctx, metricsAddrs)
		if err != nil {
			t.Fatalf("metrics %s: %v", what, err)
		}
		return s
	}
	s0 := scrape("before the burst")
	before, err := stabPartitionView(ctx, nodeCls[0])
	if err != nil {
		t.Fatalf("Metadata before the burst: %v", err)
	}
	t.Logf("cluster ready after %v: %d burst partitions (%d topics of %d), load %v; before the burst: %s",
		time.Since(begin).Round(time.Millisecond), nTopics*perTopic, nTopics, perTopic, load, s0.summary())

	// ---- The burst. ----
	run := &stabRun{errs: newStabErrors(), stop: make(chan struct{})}
	loadCtx, loadCancel := context.WithCancel(ctx)
	defer loadCancel()
	burstStart := time.Now()
	var wg sync.WaitGroup
	clientOpts := func(name string, opts ...kgo.Opt) []kgo.Opt {
		return append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.RetryTimeout(10 * time.Second),
			kgo.WithHooks(&stabHooks{errs: run.errs, source: name}),
			kgo.WithLogger(&stabLogger{errs: run.errs, source: name})}, opts...)
	}
	newClient := func(name string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(clientOpts(name, opts...)...)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return nil
		}
		return cl
	}
	burstTopics := make([]string, nTopics)
	for i := range burstTopics {
		burstTopics[i] = fmt.Sprintf("stab-%04d", i)
	}

	// Metrics over time (the shape of a storm, if there is one).
	var timeline []string
	var timelineMu sync.Mutex
	scraperDone := make(chan struct{})
	go func() {
		defer close(scraperDone)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-run.stop:
				return
			case <-tick.C:
			}
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			s, err := stabScrapeAll(sctx, metricsAddrs)
			scancel()
			line := fmt.Sprintf("+%v: ", time.Since(burstStart).Round(time.Second))
			if err != nil {
				line += "scrape: " + err.Error()
			} else {
				line += s.delta(s0).summary()
			}
			timelineMu.Lock()
			timeline = append(timeline, line)
			timelineMu.Unlock()
		}
	}()

	// Prober: every 500 ms, Metadata and CreateTopics to every broker,
	// each kind in its own loop over its own connection (a broker answers
	// one connection's requests in order, and CreateTopics waits for the
	// new partition's leader).
	probe := newStabProber()
	probeLoop := func(node int, req string, do func(pin *kgo.Broker, seq int) (error, string)) {
		defer wg.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs[node-1]))
		if err != nil {
			probe.note(node, req, time.Now(), err, "")
			return
		}
		defer cl.Close()
		pin := cl.SeedBrokers()[0]
		tick := time.NewTicker(probeEvery)
		defer tick.Stop()
		for seq := 0; ; seq++ {
			select {
			case <-run.stop:
				return
			case <-tick.C:
			}
			sent := time.Now()
			err, msg := do(pin, seq)
			probe.took(node, req, time.Since(sent))
			probe.note(node, req, sent, err, msg)
		}
	}
	for i := range bs {
		node := i + 1
		wg.Add(2)
		go probeLoop(node, "Metadata", func(pin *kgo.Broker, _ int) (error, string) {
			pctx, pcancel := context.WithTimeout(ctx, probeTimeout)
			defer pcancel()
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(pctx, pin) // every topic
			if err != nil {
				return err, ""
			}
			if resp.ControllerID < 0 {
				return errStabNoController, ""
			}
			partErrs := map[string]int{}
			for _, rt := range resp.Topics {
				if e := kerr.ErrorForCode(rt.ErrorCode); e != nil {
					partErrs["topic "+e.Error()]++
				}
				for _, p := range rt.Partitions {
					if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
						partErrs["partition "+e.Error()]++
					}
				}
			}
			probe.noteParts(node, partErrs)
			return nil, ""
		})
		go probeLoop(node, "CreateTopics", func(pin *kgo.Broker, seq int) (error, string) {
			creq := kmsg.NewPtrCreateTopicsRequest()
			creq.TimeoutMillis = int32(probeTimeout / time.Millisecond)
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic = fmt.Sprintf("probe-%d-%d", node, seq)
			rt.NumPartitions, rt.ReplicationFactor = 1, 1
			creq.Topics = append(creq.Topics, rt)
			pctx, pcancel := context.WithTimeout(ctx, probeTimeout+time.Second)
			defer pcancel()
			resp, err := creq.RequestWith(pctx, pin)
			switch {
			case err != nil:
				return err, ""
			case len(resp.Topics) != 1:
				return fmt.Errorf("CreateTopics answered %d topics", len(resp.Topics)), ""
			}
			msg := ""
			if m := resp.Topics[0].ErrorMessage; m != nil {
				msg = *m
			}
			return kerr.ErrorForCode(resp.Topics[0].ErrorCode), msg
		})
	}

	// Creators: the burst topics, several goroutines at once, each with
	// its own client (a broker answers one connection's requests in
	// order). They go on past the load's end until every topic is
	// created (or creatorsDone gives up on them).
	createStart := time.Now()
	var createdAll atomic.Int64 // unix nanos when the last burst topic was created
	var createLat stabLatencies
	creatorsDone := make(chan struct{})
	var cwg sync.WaitGroup
	giveUp := make(chan struct{})
	creatorCtx, creatorCancel := context.WithCancel(ctx)
	defer creatorCancel()
	for c := 0; c < creators; c++ {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			ccl := newClient(fmt.Sprintf("creator %d", c))
			if ccl == nil {
				return
			}
			defer ccl.Close()
			cadm := kadm.NewClient(ccl)
			for i := c; i < nTopics; i += creators {
				for {
					select {
					case <-giveUp:
						return
					default:
					}
					sent := time.Now()
					resp, err := cadm.CreateTopic(creatorCtx, perTopic, 3, nil, burstTopics[i])
					if err == nil {
						err = resp.Err
						if errors.Is(err, kerr.TopicAlreadyExists) {
							// An earlier try the client gave up on
							// created it.
							run.errs.note("create", err)
							err = nil
						}
					}
					if err == nil {
						createLat.add(time.Since(sent))
						if run.addCreated(burstTopics[i]) == nTopics {
							createdAll.Store(time.Now().UnixNano())
						}
						break
					}
					run.errs.note("create", err)
					select {
					case <-giveUp:
						return
					case <-time.After(200 * time.Millisecond):
					}
				}
			}
		}()
	}
	go func() { cwg.Wait(); close(creatorsDone) }()

	// Transactional producers.
	for i := 0; i < producers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("producer %d", i)
			newProducer := func() *kgo.Client {
				return newClient(name, kgo.TransactionalID(fmt.Sprintf("stab-txn-%d", i)),
					kgo.TransactionTimeout(60*time.Second), kgo.ProducerLinger(5*time.Millisecond))
			}
			cl := newProducer()
			if cl == nil {
				return
			}
			defer func() { cl.Close() }()
			rng := rand.New(rand.NewSource(int64(i)))
			for txn := 0; !run.stopped(); txn++ {
				topics := run.createdTopics()
				if len(topics) == 0 {
					run.pause(50 * time.Millisecond)
					continue
				}
				abort := txn%5 == 4
				tag := "c"
				if abort {
					tag = "a"
				}
				if err := cl.BeginTransaction(); err != nil {
					run.errs.note(name+" begin", err)
					cl.Close()
					if cl = newProducer(); cl == nil {
						return
					}
					continue
				}
				var failed atomic.Bool
				for j := 0; j < txnRecords; j++ {
					r := &kgo.Record{Topic: topics[rng.Intn(len(topics))], Value: []byte(fmt.Sprintf("p%d-t%d-%s-%d", i, txn, tag, j))}
					cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
						if err != nil {
							failed.Store(true)
							run.errs.note(name+" produce", err)
						}
					})
				}
				if err := cl.Flush(ctx); err != nil {
					failed.Store(true)
					run.errs.note(name+" flush", err)
				}
				commit := !abort && !failed.Load()
				if failed.Load() {
					if err := cl.AbortBufferedRecords(ctx); err != nil {
						run.errs.note(name+" abort buffered", err)
					}
				}
				if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
					run.errs.note(name+" end", err)
					cl.Close()
					if cl = newProducer(); cl == nil {
						return
					}
					continue
				}
				if commit {
					run.commits.Add(1)
				} else {
					run.aborts.Add(1)
				}
			}
		}()
	}

	// Consumer groups (read_committed) and a plain fetcher.
	type member struct {
		name string
		opts []kgo.Opt
	}
	var members []member
	for g := 0; g < 3; g++ {
		n := 1
		if g == 0 {
			n = 2
		}
		for m := 0; m < n; m++ {
			members = append(members, member{fmt.Sprintf("group %d member %d", g, m), []kgo.Opt{
				kgo.ConsumerGroup(fmt.Sprintf("stab-group-%d", g)), kgo.FetchIsolationLevel(kgo.ReadCommitted())}})
		}
	}
	members = append(members, member{"fetcher", []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadUncommitted())}})
	for _, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			readCommitted := m.name != "fetcher"
			cl := newClient(m.name, append(m.opts, kgo.ConsumeTopics(burstTopics...),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond),
				kgo.MetadataMaxAge(5*time.Second))...)
			if cl == nil {
				return
			}
			defer cl.Close()
			for !run.stopped() {
				fs := cl.PollFetches(loadCtx)
				fs.EachError(func(topic string, p int32, err error) {
					run.errs.note(m.name+" fetch", err)
				})
				fs.EachRecord(func(r *kgo.Record) {
					run.consumed.Add(1)
					if readCommitted && strings.Contains(string(r.Value), "-a-") {
						run.errs.bad(m.name, fmt.Sprintf("read_committed returned %q (%s/%d@%d) of an aborted transaction", r.Value, r.Topic, r.Partition, r.Offset))
					}
				})
			}
			if readCommitted {
				lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
				if err := cl.LeaveGroupContext(lctx); err != nil {
					run.errs.note(m.name+" leave", err)
				}
				lcancel()
			}
		}()
	}

	// Topic churn: small topics created and deleted over and over.
	wg.Add(1)
	go func() {
		defer wg.Done()
		ccl := newClient("churn")
		if ccl == nil {
			return
		}
		defer ccl.Close()
		adm := kadm.NewClient(ccl)
		var live []string
		drop := func(name string) bool {
			resp, err := adm.DeleteTopic(ctx, name)
			if err == nil {
				err = resp.Err
			}
			if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
				run.errs.note("churn delete", err)
				return false
			}
			return true
		}
		for k := 0; !run.stopped(); k++ {
			name := fmt.Sprintf("stab-churn-%d", k)
			resp, err := adm.CreateTopic(ctx, 3, 3, nil, name)
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				run.errs.note("churn create", err)
			} else {
				run.churnCreated.Add(1)
			}
			live = append(live, name) // deleted whether or not the create answered
			if len(live) > 2 && drop(live[0]) {
				live = live[1:]
				run.churned.Add(1)
			}
			run.pause(300 * time.Millisecond)
		}
		// Leave none behind: the quiet window watches every topic.
		testwait.UntilEvery(30*time.Second, 200*time.Millisecond, func() bool {
			for len(live) > 0 && drop(live[0]) {
				live = live[1:]
			}
			return len(live) == 0
		})
		if len(live) > 0 {
			run.errs.bad("churn", fmt.Sprintf("topics %v not deleted within 30s of the load's end", live))
		}
	}()

	// The load runs for its time, unless a broker dies, and on until
	// every burst topic is created (at most createMore more).
	stabWatch(t, bs, nil, load)
	if !stabWatch(t, bs, creatorsDone, createMore) {
		// (A creation abandoned here may still land later and elect
		// leaders in the quiet window; the test fails on the missing
		// topics anyway.)
		run.errs.stopping.Store(true)
		close(giveUp)
		creatorCancel()
		<-creatorsDone
	}
	loadEnd := time.Now()
	run.errs.stopping.Store(true)
	close(run.stop)
	loadCancel()
	stopped := make(chan struct{})
	go func() { wg.Wait(); <-scraperDone; close(stopped) }()
	if !stabWatch(t, bs, stopped, 90*time.Second) {
		t.Fatalf("the load did not stop within 90s (producers' last transactions, consumers leaving, churn deletes)")
	}
	s1 := scrape("after the burst")
	t.Logf("load stopped %v after it was told to (clients closed)", time.Since(loadEnd).Round(time.Millisecond))
	created := run.createdTopics()
	if at := createdAll.Load(); at != 0 {
		t.Logf("burst topics: %d partitions created in %v (CreateTopics of one topic took %s)",
			nTopics*perTopic, time.Unix(0, at).Sub(createStart).Round(time.Millisecond), createLat.summary())
	} else {
		t.Errorf("burst topics: only %d of %d created by %v past the load's time (CreateTopics took %s)", len(created), nTopics, createMore, createLat.summary())
	}

	// ---- Leaders everywhere within 10 s. ----
	settleStart := time.Now()
	var last string
	settled := testwait.UntilEvery(settle, 100*time.Millisecond, func() bool { // the figure's resolution
		for i := range bs {
			md, err := stabPartitionView(ctx, nodeCls[i])
			if err != nil {
				last = fmt.Sprintf("broker %d: %v", i+1, err)
				return false
			}
			if why := md.unled(created, perTopic); why != "" {
				last = fmt.Sprintf("broker %d: %s", i+1, why)
				return false
			}
		}
		return true
	})
	if settled {
		t.Logf("every partition had a leader on every broker %v after the load stopped", time.Since(settleStart).Round(time.Millisecond))
	} else {
		t.Errorf("partitions without a leader %v after the load stopped: %s", settle, last)
	}

	// ---- The quiet window: nothing moves for 30 s. ----
	q0 := scrape("at the start of the quiet window")
	views0 := make([]stabView, len(bs))
	for i := range bs {
		if views0[i], err = stabPartitionView(ctx, nodeCls[i]); err != nil {
			t.Fatalf("broker %d: Metadata at the start of the quiet window: %v", i+1, err)
		}
	}
	quietStart := time.Now()
	var quietLine []string
	for time.Since(quietStart) < quiet {
		stabWatch(t, bs, nil, min(5*time.Second, quiet-time.Since(quietStart)))
		if s, err := stabScrapeAll(ctx, metricsAddrs); err == nil {
			quietLine = append(quietLine, fmt.Sprintf("+%v: %s", time.Since(quietStart).Round(time.Second), s.delta(q0).summary()))
		}
	}
	q1 := scrape("at the end of the quiet window")
	views1 := make([]stabView, len(bs))
	for i := range bs {
		if views1[i], err = stabPartitionView(ctx, nodeCls[i]); err != nil {
			t.Fatalf("broker %d: Metadata at the end of the quiet window: %v", i+1, err)
		}
	}

	// ---- Report. ----
	timelineMu.Lock()
	t.Logf("burst timeline (counts since the burst began):\n  %s", strings.Join(timeline, "\n  "))
	timelineMu.Unlock()
	t.Logf("quiet timeline (counts since the window began):\n  %s", strings.Join(quietLine, "\n  "))
	t.Logf("BURST (%v from its start to the clients closed): %s", s1.at.Sub(burstStart).Round(time.Millisecond), s1.delta(s0).summary())
	t.Logf("SETTLE (load stopped to quiet window, %v): %s", q0.at.Sub(s1.at).Round(time.Millisecond), q0.delta(s1).summary())
	t.Logf("QUIET (%v): %s", q1.at.Sub(q0.at).Round(time.Millisecond), q1.delta(q0).summary())
	t.Logf("clients: %d transactions committed, %d aborted, %d records consumed, %d churn topics created (3 partitions each, deleted)",
		run.commits.Load(), run.aborts.Load(), run.consumed.Load(), run.churnCreated.Load())
	// Each new partition with several replicas has one election of its
	// own (its first replica's): what the burst counted beyond that is
	// leadership lost and won again.
	_, rep0 := before.partitions()
	all1, rep1 := views0[0].partitions()
	newGroups := rep1 - rep0 + 3*int(run.churnCreated.Load())
	burstElections := int(s1.delta(s0).get(stabElections, "partition"))
	t.Logf("partitions at the end: %d (%d replicated); the burst made %d replicated partition groups (with churn), so %d of its %d partition elections were first elections and %d re-elections",
		all1, rep1, newGroups, min(newGroups, burstElections), burstElections, burstElections-min(newGroups, burstElections))
	outages := probe.outages(loadEnd, maxOutage) // closes the runs still open
	t.Logf("client errors by kind:\n%s", run.errs.report())
	t.Logf("probes:\n%s", probe.report())

	// ---- Verdict. ----
	if bad := run.errs.badList(); len(bad) > 0 {
		t.Errorf("%d non-retriable client errors during the burst, first ones:\n  %s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n  "))
	}
	if bad := probe.badList(); len(bad) > 0 {
		t.Errorf("%d non-retriable probe errors, first ones:\n  %s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n  "))
	}
	for _, a := range probe.answeredRunsReport(loadEnd) {
		t.Logf("probe: %s", a)
	}
	for _, o := range outages {
		t.Errorf("probe outage: %s", o)
	}
	if d := q1.delta(q0); d.get(stabElections, "") != 0 {
		t.Errorf("%v elections in the quiet window (metadata %v, partition %v): the cluster is not stable after the burst",
			d.get(stabElections, ""), d.get(stabElections, "metadata"), d.get(stabElections, "partition"))
	}
	for _, s := range []stabSample{q0, q1} {
		if n := s.get(stabActiveCtl, ""); n != 1 {
			t.Errorf("%d active controllers (kafka_controller_kafkacontroller_activecontrollercount summed) at %v", int(n), s.at.Format("15:04:05.000"))
		}
	}
	for i := range bs {
		if diff := views0[i].diff(views1[i]); len(diff) > 0 {
			t.Errorf("broker %d: %d partitions changed leader or epoch in the quiet window, e.g. %s", i+1, len(diff), strings.Join(diff[:min(len(diff), 5)], "; "))
		}
	}
}

var errStabNoController = errors.New("Metadata names no controller (-1)")

const (
	stabElections = "strata_raft_elections_total"
	stabPreVotes  = "strata_raft_prevotes_total"
	stabLeaderChg = "strata_raft_leader_changes_total"
	stabActiveCtl = "kafka_controller_kafkacontroller_activecontrollercount"
)

func stabEnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// stabEnvDuration reads a Go duration ("45s", "2m") or a number of
// seconds.
func stabEnvDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a duration such as 30s", name, v)
	}
	return d
}

// stabWatch waits until done is closed (true) or d has passed (false),
// failing the test if a broker process exits meanwhile.
func stabWatch(t *testing.T, bs []*broker, done <-chan struct{}, d time.Duration) bool {
	t.Helper()
	var exited []chan struct{}
	for _, b := range bs {
		b.mu.Lock()
		exited = append(exited, b.done)
		b.mu.Unlock()
	}
	return testwait.Until(d, func() bool {
		for i, e := range exited {
			select {
			case <-e:
				t.Fatalf("broker %d exited during the test", i+1)
			default:
			}
		}
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

// stabMetricsAddr finds the broker's metrics listener in its log
// ("metrics listener up" addr=...), written before the broker is ready.
func stabMetricsAddr(t *testing.T, b *broker) string {
	t.Helper()
	b.mu.Lock()
	out := b.logs.String()
	b.mu.Unlock()
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "metrics listener up") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if a, ok := strings.CutPrefix(f, "addr="); ok {
				return strings.Trim(a, `"`)
			}
		}
	}
	t.Fatalf("broker at %s: no \"metrics listener up\" line in its log", b.addr)
	return ""
}

func stabScrapeRaw(ctx context.Context, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return string(body), nil
}

// stabSample is one scrape of every broker's raft counters and active
// controller gauge: series ("name{labels}") to value, per broker.
type stabSample struct {
	at  time.Time
	per []map[string]float64
}

// stabScrapeAll scrapes every broker (three tries each, 10 s apiece).
func stabScrapeAll(ctx context.Context, addrs []string) (stabSample, error) {
	s := stabSample{at: time.Now()}
	for i, a := range addrs {
		var raw string
		var err error
		for try := 0; try < 3; try++ {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			raw, err = stabScrapeRaw(sctx, a)
			cancel()
			if err == nil {
				break
			}
		}
		if err != nil {
			return s, fmt.Errorf("broker %d (%s): %w", i+1, a, err)
		}
		m := map[string]float64{}
		sc := bufio.NewScanner(strings.NewReader(raw))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			if !strings.HasPrefix(l, "strata_raft_") && !strings.HasPrefix(l, "kafka_controller_") {
				continue
			}
			sp := strings.LastIndexByte(l, ' ')
			if sp < 0 {
				continue
			}
			v, err := strconv.ParseFloat(l[sp+1:], 64)
			if err != nil {
				continue
			}
			m[l[:sp]] = v
		}
		for _, need := range []string{stabElections, stabActiveCtl} {
			found := false
			for k := range m {
				found = found || strings.HasPrefix(k, need)
			}
			if !found {
				return s, fmt.Errorf("broker %d (%s): no %s in /metrics", i+1, a, need)
			}
		}
		s.per = append(s.per, m)
	}
	return s, nil
}

// get sums name over the brokers, for one group label ("" = all).
func (s stabSample) get(name, group string) float64 {
	var sum float64
	for _, m := range s.per {
		for k, v := range m {
			if k == name || (strings.HasPrefix(k, name+"{") && (group == "" || strings.Contains(k, `group="`+group+`"`))) {
				sum += v
			}
		}
	}
	return sum
}

// delta is s minus an earlier sample (the gauge keeps s's value).
func (s stabSample) delta(from stabSample) stabSample {
	d := stabSample{at: s.at}
	for i, m := range s.per {
		dm := map[string]float64{}
		for k, v := range m {
			if k == stabActiveCtl || i >= len(from.per) {
				dm[k] = v
				continue
			}
			dm[k] = v - from.per[i][k]
		}
		d.per = append(d.per, dm)
	}
	return d
}

func (s stabSample) summary() string {
	f := func(name string) string {
		return fmt.Sprintf("metadata %v partition %v", s.get(name, "metadata"), s.get(name, "partition"))
	}
	return fmt.Sprintf("elections [%s], pre-votes [%s], leader changes [%s], active controllers %v",
		f(stabElections), f(stabPreVotes), f(stabLeaderChg), s.get(stabActiveCtl, ""))
}

// stabView is one broker's Metadata: topic -> partition -> leader/epoch,
// with the error codes.
type stabView map[string]map[int32]stabLeader

type stabLeader struct {
	leader, epoch int32
	err           int16
	replicas      int
}

// stabPartitionView asks the broker its client is pinned to (its seed)
// for every topic, leaving out the churn topics (deleted by now, perhaps
// not yet everywhere).
func stabPartitionView(ctx context.Context, cl *kgo.Client) (stabView, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl.SeedBrokers()[0])
	if err != nil {
		return nil, err
	}
	v := stabView{}
	for _, rt := range resp.Topics {
		if rt.Topic == nil || strings.HasPrefix(*rt.Topic, "stab-churn-") {
			continue
		}
		if rt.ErrorCode != 0 {
			return nil, fmt.Errorf("topic %s: %v", *rt.Topic, kerr.ErrorForCode(rt.ErrorCode))
		}
		ps := map[int32]stabLeader{}
		for _, p := range rt.Partitions {
			ps[p.Partition] = stabLeader{p.Leader, p.LeaderEpoch, p.ErrorCode, len(p.Replicas)}
		}
		v[*rt.Topic] = ps
	}
	return v, nil
}

// unled says what is missing: a burst topic, or a partition without a
// leader ("" when nothing is).
func (v stabView) unled(burst []string, perTopic int) string {
	for _, name := range burst {
		if len(v[name]) != perTopic {
			return fmt.Sprintf("topic %s has %d partitions", name, len(v[name]))
		}
	}
	for _, name := range []string{"__consumer_offsets", "__transaction_state"} {
		if len(v[name]) == 0 {
			return name + " missing"
		}
	}
	n, first := 0, ""
	for topic, ps := range v {
		for p, l := range ps {
			if l.err != 0 || l.leader < 0 {
				if n == 0 {
					first = fmt.Sprintf("%s/%d leader %d epoch %d %v", topic, p, l.leader, l.epoch, kerr.ErrorForCode(l.err))
				}
				n++
			}
		}
	}
	if n > 0 {
		return fmt.Sprintf("%d partitions without a leader, e.g. %s", n, first)
	}
	return ""
}

// partitions counts v's partitions, and those with several replicas.
func (v stabView) partitions() (all, replicated int) {
	for _, ps := range v {
		for _, l := range ps {
			all++
			if l.replicas > 1 {
				replicated++
			}
		}
	}
	return all, replicated
}

// diff lists the partitions of v whose leader or epoch is different (or
// gone) in later.
func (v stabView) diff(later stabView) []string {
	var out []string
	for topic, ps := range v {
		for p, l := range ps {
			if l2, ok := later[topic][p]; !ok || l2 != l {
				out = append(out, fmt.Sprintf("%s/%d leader %d epoch %d -> leader %d epoch %d (present %v)", topic, p, l.leader, l.epoch, l2.leader, l2.epoch, ok))
			}
		}
	}
	slices.Sort(out)
	return out
}

// stabRun is the state the load goroutines share.
type stabRun struct {
	errs *stabErrors
	stop chan struct{}

	mu      sync.Mutex
	created []string

	commits, aborts, consumed, churned, churnCreated atomic.Int64
}

func (r *stabRun) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// pause paces a loop (d, or less when the load stops).
func (r *stabRun) pause(d time.Duration) {
	select {
	case <-r.stop:
	case <-time.After(d):
	}
}

func (r *stabRun) addCreated(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.created = append(r.created, name)
	return len(r.created)
}

func (r *stabRun) createdTopics() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.created)
}

// stabErrors tallies the errors the load's clients saw, by source and
// kind, and keeps the non-retriable ones.
type stabErrors struct {
	stopping atomic.Bool // the load is being stopped: cancellations are ours

	mu     sync.Mutex
	counts map[string]int
	first  map[string]string
	bads   []string
}

func newStabErrors() *stabErrors {
	return &stabErrors{counts: map[string]int{}, first: map[string]string{}}
}

func (e *stabErrors) note(source string, err error) {
	if err == nil {
		return
	}
	if e.stopping.Load() && (errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed)) {
		return
	}
	kind, retriable := stabClassify(err)
	key := source + ": " + kind
	e.mu.Lock()
	defer e.mu.Unlock()
	e.counts[key]++
	if _, ok := e.first[key]; !ok {
		e.first[key] = err.Error()
	}
	if !retriable {
		e.bads = append(e.bads, fmt.Sprintf("%s: %v", source, err))
	}
}

func (e *stabErrors) bad(source, what string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.counts[source+": "+what]++
	e.bads = append(e.bads, source+": "+what)
}

func (e *stabErrors) badList() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.bads)
}

func (e *stabErrors) report() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return stabCounts(e.counts, e.first)
}

// stabCounts lists counts, most frequent first.
func stabCounts(counts map[string]int, first map[string]string) string {
	if len(counts) == 0 {
		return "  (none)"
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %6d  %s", counts[k], k)
		if f := first[k]; f != "" && !strings.HasSuffix(k, f) {
			if len(f) > 160 {
				f = f[:160] + "..."
			}
			fmt.Fprintf(&b, "  (first: %s)", f)
		}
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// stabClassify names an error's kind and says whether a client may
// retry it: Kafka's retriable codes, franz-go's retriable connection
// errors, deadlines (a request that took too long, counted), and
// franz-go's "no controller / coordinator yet".
func stabClassify(err error) (string, bool) {
	var ke *kerr.Error
	switch {
	case errors.Is(err, errStabNoController):
		return err.Error(), true
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded", true
	case errors.Is(err, context.Canceled):
		return "canceled", true
	case errors.As(err, &ke):
		return ke.Message, ke.Retriable
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by the broker (EOF)", kgo.IsRetryableBrokerErr(err)
	case kgo.IsRetryableBrokerErr(err):
		s := err.Error()
		if len(s) > 80 {
			s = s[:80]
		}
		return "retriable connection error: " + s, true
	}
	return err.Error(), false
}

// stabHooks counts the connection errors a client meets (franz-go retries
// them itself). A request the client cancelled itself (a fetch dropped by
// a rebalance) is not the broker's error.
type stabHooks struct {
	errs   *stabErrors
	source string
}

func (h *stabHooks) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ io.Closer, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		h.errs.note(h.source+" connect", err)
	}
}

func (h *stabHooks) OnBrokerWrite(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		h.errs.note(h.source+" write", err)
	}
}

func (h *stabHooks) OnBrokerRead(_ kgo.BrokerMetadata, _ int16, _ int, _, _ time.Duration, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		h.errs.note(h.source+" read", err)
	}
}

// stabLogger counts franz-go's warnings and errors: what it met and
// retried (NOT_LEADER, NOT_COORDINATOR, ...). Counted, not judged: what
// reaches the application is judged where it arrives.
type stabLogger struct {
	errs   *stabErrors
	source string
}

func (l *stabLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l *stabLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	if level > kgo.LogLevelWarn {
		return
	}
	kind := msg
	for i := 0; i+1 < len(kv); i += 2 {
		if err, ok := kv[i+1].(error); ok {
			k, _ := stabClassify(err)
			kind += ": " + k
			break
		}
	}
	l.errs.mu.Lock()
	l.errs.counts["kgo log ("+l.source+") "+level.String()+": "+kind]++
	l.errs.mu.Unlock()
}

// stabLatencies collects durations.
type stabLatencies struct {
	mu sync.Mutex
	ds []time.Duration
}

func (l *stabLatencies) add(d time.Duration) {
	l.mu.Lock()
	l.ds = append(l.ds, d)
	l.mu.Unlock()
}

func (l *stabLatencies) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ds) == 0 {
		return "no answers"
	}
	ds := slices.Clone(l.ds)
	slices.Sort(ds)
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("%d: min %v, median %v, p90 %v, max %v", len(ds), r(ds[0]), r(ds[len(ds)/2]), r(ds[len(ds)*9/10]), r(ds[len(ds)-1]))
}

// stabProber tallies the probes: per broker and request, the outcomes,
// the error kinds and the runs of failures.
type stabProber struct {
	mu     sync.Mutex
	counts map[string]int
	first  map[string]string
	bads   []string
	runs   map[string]*stabRunOfFailures
	// answeredRuns are runs of probes answered with a retriable error
	// (logged, not an outage).
	answeredRuns map[string]*stabRunOfFailures
	lat          map[string]*stabLatencies
}

type stabRunOfFailures struct {
	since    time.Time // send time of the first failure of the current run; zero when none
	lastErr  string
	longest  time.Duration
	worstEnd time.Time
	worstErr string
}

func newStabProber() *stabProber {
	return &stabProber{counts: map[string]int{}, first: map[string]string{}, runs: map[string]*stabRunOfFailures{}, answeredRuns: map[string]*stabRunOfFailures{}, lat: map[string]*stabLatencies{}}
}

// took records how long a probe took, answered or not.
func (p *stabProber) took(node int, req string, d time.Duration) {
	p.mu.Lock()
	key := fmt.Sprintf("broker %d %s", node, req)
	l := p.lat[key]
	if l == nil {
		l = &stabLatencies{}
		p.lat[key] = l
	}
	p.mu.Unlock()
	l.add(d)
}

func (p *stabProber) note(node int, req string, sent time.Time, err error, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := fmt.Sprintf("broker %d %s", node, req)
	r := p.runs[key]
	if r == nil {
		r = &stabRunOfFailures{}
		p.runs[key] = r
	}
	if err == nil {
		p.counts[key+": ok"]++
		if !r.since.IsZero() {
			r.close(sent)
		}
		if a := p.answeredRuns[key]; a != nil && !a.since.IsZero() {
			a.close(sent)
		}
		return
	}
	kind, retriable := stabClassify(err)
	lostController := strings.Contains(msg, "no metadata leader")
	if lostController {
		kind += " (no metadata leader)"
	}
	// An answer carrying a retriable error (REQUEST_TIMED_OUT from a
	// CreateTopics queued behind the burst's creations, at its own
	// timeout, as Kafka answers) is an answer: counted, and its longest
	// run logged, but it ends an outage. No answer at all, or a lost
	// controller, is the outage the issue forbids.
	var ke *kerr.Error
	answered := errors.As(err, &ke) && retriable && !lostController
	p.counts[key+": "+kind]++
	full := err.Error()
	if msg != "" {
		full += ": " + msg
	}
	if _, ok := p.first[key+": "+kind]; !ok {
		p.first[key+": "+kind] = full
	}
	if !retriable {
		p.bads = append(p.bads, key+": "+full)
	}
	if answered {
		a := p.answeredRuns[key]
		if a == nil {
			a = &stabRunOfFailures{}
			p.answeredRuns[key] = a
		}
		if a.since.IsZero() {
			a.since = sent
		}
		a.lastErr = kind
		if !r.since.IsZero() {
			r.close(sent)
		}
		return
	}
	if r.since.IsZero() {
		r.since = sent
	}
	r.lastErr = kind
}

func (r *stabRunOfFailures) close(at time.Time) {
	if d := at.Sub(r.since); d > r.longest {
		r.longest, r.worstEnd, r.worstErr = d, at, r.lastErr
	}
	r.since = time.Time{}
}

// noteParts counts a Metadata answer's topic and partition errors (a
// leaderless partition answers LEADER_NOT_AVAILABLE): counted, judged
// only when not retriable.
func (p *stabProber) noteParts(node int, errs map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, n := range errs {
		key := fmt.Sprintf("broker %d Metadata answer: %s", node, k)
		p.counts[key] += n
		code := k[strings.IndexByte(k, ' ')+1:]
		for _, e := range []*kerr.Error{kerr.LeaderNotAvailable, kerr.NotLeaderForPartition, kerr.UnknownTopicOrPartition, kerr.ReplicaNotAvailable} {
			if code == e.Error() {
				code = ""
			}
		}
		if code != "" {
			p.bads = append(p.bads, key)
		}
	}
}

func (p *stabProber) badList() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.bads)
}

// outages lists the runs of failed probes longer than limit (a run still
// open ends at end).
func (p *stabProber) outages(end time.Time, limit time.Duration) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for key, r := range p.runs {
		if !r.since.IsZero() {
			r.close(end)
		}
		if r.longest > limit {
			out = append(out, fmt.Sprintf("%s failed for %v in a row (until %v; last error %s)",
				key, r.longest.Round(time.Millisecond), r.worstEnd.Format("15:04:05.000"), r.worstErr))
		}
	}
	slices.Sort(out)
	return out
}

// answeredRunsReport lists each probe's longest run of answers with a
// retriable error (closing the runs still open at end).
func (p *stabProber) answeredRunsReport(end time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for key, r := range p.answeredRuns {
		if !r.since.IsZero() {
			r.close(end)
		}
		if r.longest > 0 {
			out = append(out, fmt.Sprintf("%s answered with a retriable error for %v in a row (until %v; %s)",
				key, r.longest.Round(time.Millisecond), r.worstEnd.Format("15:04:05.000"), r.worstErr))
		}
	}
	slices.Sort(out)
	return out
}

func (p *stabProber) report() string {
	p.mu.Lock()
	var longest []string
	for key, r := range p.runs {
		if r.longest > 0 {
			longest = append(longest, fmt.Sprintf("  longest run of failures: %s %v", key, r.longest.Round(time.Millisecond)))
		}
	}
	for key, l := range p.lat {
		longest = append(longest, fmt.Sprintf("  %s took %s", key, l.summary()))
	}
	counts := stabCounts(p.counts, p.first)
	p.mu.Unlock()
	slices.Sort(longest)
	if len(longest) > 0 {
		counts += "\n" + strings.Join(longest, "\n")
	}
	return counts
}
