package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// Dead-letter topics of share groups (KIP-1191) with franz-go's share
// consumer: a poison record reaches the dead-letter topic after the
// delivery count limit with reason max-deliveries, a rejected one at once,
// each with Kafka's __dlq.errors.* headers and Strata's strata.dlq.*; a
// dead-letter topic that cannot be written does not stall the queue, and
// its letters arrive once it can be; a SIGKILL of the share partition's
// leader while records are rejected leaves each rejected record in the
// dead-letter topic exactly once.

// dlqLetter is one record read back from a dead-letter topic.
type dlqLetter struct {
	offset  int64 // in the dead-letter topic
	key     string
	value   string
	headers map[string]string
}

// readDLQ reads the dead-letter topic from the start until it holds want
// records (or limit passes), then a little longer to catch duplicates.
func readDLQ(t *testing.T, seeds []string, topic string, want int, limit time.Duration) []dlqLetter {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []dlqLetter
	deadline := time.Now().Add(limit)
	var settle time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			l := dlqLetter{offset: r.Offset, key: string(r.Key), value: string(r.Value), headers: map[string]string{}}
			for _, h := range r.Headers {
				l.headers[h.Key] = string(h.Value)
			}
			out = append(out, l)
		})
		now := time.Now()
		if len(out) >= want && settle.IsZero() {
			settle = now.Add(time.Second) // duplicates would arrive with the rest
		}
		if !settle.IsZero() && now.After(settle) {
			return out
		}
		if now.After(deadline) {
			t.Fatalf("dead-letter topic %s: %d of %d letters after %v", topic, len(out), want, limit)
		}
	}
}

func setTopicConfig(t *testing.T, cl *kgo.Client, topic, k, v string) {
	t.Helper()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: k, Value: kadm.StringPtr(v)}}, topic)
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		t.Fatalf("setting %s=%s on %s: %v", k, v, topic, err)
	}
}

func createDLQTopic(t *testing.T, st shareTarget, topic string, enable bool) {
	t.Helper()
	adm := kadm.NewClient(st.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 1, st.rf, map[string]*string{"errors.deadletterqueue.group.enable": kadm.StringPtr(strconv.FormatBool(enable))}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
}

// TestShareDLQ: poison and rejected records reach the dead-letter topic
// with their reasons and headers; single node and a 3-broker cluster.
func TestShareDLQ(t *testing.T) {
	for _, mode := range []string{"single", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			var st shareTarget
			if mode == "single" {
				st = shareSingle(t)
			} else {
				st, _ = shareCluster(t)
			}
			createShareTopic(t, st, "orders", 1)
			createDLQTopic(t, st, "dlq.orders", true)
			admCl := st.client()
			setGroupConfigs(t, admCl, "billing", "share.auto.offset.reset", "earliest",
				"errors.deadletterqueue.topic.name", "dlq.orders", "errors.deadletterqueue.copy.record.enable", "true")
			produceSeq(t, st.client(), "orders", 20)
			ledger := newShareLedger()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := newShareWorker(t, "w", st.seeds, "billing", "orders", ledger)
			w.decide = func(r *kgo.Record) kgo.AckStatus {
				switch string(r.Value) {
				case "3": // poison: released every time, dead-lettered at the limit (3)
					return kgo.AckRelease
				case "7", "11":
					return kgo.AckReject
				}
				return kgo.AckAccept
			}
			go w.run(ctx)
			waitShareDone(t, kadm.NewClient(admCl), "billing", "orders", 1, 60*time.Second)
			letters := readDLQ(t, st.seeds, "dlq.orders", 3, 60*time.Second)
			if len(letters) != 3 {
				t.Fatalf("%d dead letters, want 3: %+v", len(letters), letters)
			}
			byValue := map[string]dlqLetter{}
			for _, l := range letters {
				byValue[l.value] = l
			}
			for v, want := range map[string]struct{ reason, count, msg string }{
				"3":  {"max-deliveries", "3", "Offset delivery count exceeded the threshold."},
				"7":  {"rejected", "1", "Offset rejected by client."},
				"11": {"rejected", "1", "Offset rejected by client."},
			} {
				l, ok := byValue[v]
				if !ok {
					t.Fatalf("no dead letter for record %s: %+v", v, letters)
				}
				h := l.headers
				if h["__dlq.errors.topic"] != "orders" || h["__dlq.errors.partition"] != "0" || h["__dlq.errors.offset"] != v ||
					h["__dlq.errors.group"] != "billing" || h["__dlq.errors.delivery.count"] != want.count || h["__dlq.errors.message"] != want.msg {
					t.Errorf("record %s: Kafka's headers %v", v, h)
				}
				first, _ := strconv.ParseInt(h["strata.dlq.first.delivery.ms"], 10, 64)
				last, _ := strconv.ParseInt(h["strata.dlq.last.delivery.ms"], 10, 64)
				if h["strata.dlq.reason"] != want.reason || h["strata.dlq.member.id"] == "" || first <= 0 || last < first ||
					time.Since(time.UnixMilli(first)) > 5*time.Minute {
					t.Errorf("record %s: Strata's headers %v", v, h)
				}
				if want.count == "3" && last == first {
					t.Errorf("record %s delivered 3 times, first and last delivery at the same ms: %v", v, h)
				}
			}
			ledger.check(t)
		})
	}
}

// TestShareDLQUnwritable: while the dead-letter topic refuses dead
// letters (errors.deadletterqueue.group.enable=false) the queue goes on;
// once it is enabled the letters that waited arrive, once each.
func TestShareDLQUnwritable(t *testing.T) {
	st := shareSingle(t)
	createShareTopic(t, st, "mail", 1)
	createDLQTopic(t, st, "dlq.mail", false)
	admCl := st.client()
	setGroupConfigs(t, admCl, "senders", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.mail")
	produceSeq(t, st.client(), "mail", 100)
	ledger := newShareLedger()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newShareWorker(t, "w", st.seeds, "senders", "mail", ledger)
	w.decide = func(r *kgo.Record) kgo.AckStatus {
		if n, _ := strconv.Atoi(string(r.Value)); n%10 == 0 {
			return kgo.AckReject
		}
		return kgo.AckAccept
	}
	go w.run(ctx)
	// Every record is done (accepted or rejected) though no letter could
	// be written: the worker saw each acknowledgement confirmed (the group
	// may show lag 0 before its share partition is initialized, so that
	// alone proves nothing), and the lag is 0.
	if !testwait.Until(20*time.Second, func() bool { _, confirmed := ledger.counts(); return confirmed == 100 }) {
		_, confirmed := ledger.counts()
		t.Fatalf("%d records confirmed, want 100", confirmed)
	}
	waitShareDone(t, kadm.NewClient(admCl), "senders", "mail", 1, 60*time.Second)
	ds, err := kadm.NewClient(admCl).ListEndOffsets(context.Background(), "dlq.mail")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ds.Lookup("dlq.mail", 0); o.Offset != 0 {
		t.Fatalf("the disabled dead-letter topic holds %d records", o.Offset)
	}
	setTopicConfig(t, admCl, "dlq.mail", "errors.deadletterqueue.group.enable", "true")
	letters := readDLQ(t, st.seeds, "dlq.mail", 10, 30*time.Second)
	seen := map[string]int{}
	for _, l := range letters {
		seen[l.headers["__dlq.errors.offset"]]++
		if l.headers["strata.dlq.reason"] != "rejected" || l.value != "" {
			t.Errorf("letter %+v (copy.record.enable is false: no value)", l)
		}
	}
	for i := 0; i < 100; i += 10 {
		if seen[strconv.Itoa(i)] != 1 {
			t.Errorf("offset %d dead-lettered %d times", i, seen[strconv.Itoa(i)])
		}
	}
	if len(letters) != 10 {
		t.Fatalf("%d letters, want 10", len(letters))
	}
	ledger.check(t)
}

// TestShareDLQFailover: SIGKILL the share partition's leader while a
// worker rejects every other record; each rejected record is in the
// dead-letter topic exactly once. 3 kills; STRATA_SHARE_DLQ_LONG=1: 20.
func TestShareDLQFailover(t *testing.T) {
	st, c := shareCluster(t)
	createShareTopic(t, st, "tasks", 1)
	createDLQTopic(t, st, "dlq.tasks", true)
	admCl := st.client()
	adm := kadm.NewClient(admCl)
	setGroupConfigs(t, admCl, "crew", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.tasks",
		"errors.deadletterqueue.copy.record.enable", "true")
	kills := 3
	if os.Getenv("STRATA_SHARE_DLQ_LONG") != "" {
		kills = 20
	}
	perRound := 200
	total := perRound * (kills + 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ledger := newShareLedger()
	var mu sync.Mutex
	rejected := map[string]bool{} // value of every record rejected (confirmed or not)
	var workers []*shareWorker
	for i := range 2 {
		w := newShareWorker(t, fmt.Sprintf("w%d", i), st.seeds, "crew", "tasks", ledger)
		w.decide = func(r *kgo.Record) kgo.AckStatus {
			if n, _ := strconv.Atoi(string(r.Value)); n%2 == 1 {
				mu.Lock()
				rejected[string(r.Value)] = true
				mu.Unlock()
				return kgo.AckReject
			}
			return kgo.AckAccept
		}
		workers = append(workers, w)
		go w.run(ctx)
	}
	prod := st.client()
	next := 0
	produceRange := func(n int) {
		pctx, pcancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer pcancel()
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			v := strconv.Itoa(next)
			next++
			prod.Produce(pctx, &kgo.Record{Topic: "tasks", Value: []byte(v)}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("produce %s: %v", v, err)
				}
			})
		}
		wg.Wait()
	}
	for k := 0; k <= kills; k++ {
		produceRange(perRound)
		if k == kills {
			break
		}
		// Kill the leader while the round is being consumed.
		testwait.For(t, 30*time.Second, func() bool {
			d, _ := ledger.counts()
			return d > 0 && workers[0].got.Load()+workers[1].got.Load() > int64(k*perRound+perRound/4)
		}, "round %d: workers got nothing", k)
		leaders := c.waitLeaders(context.Background(), adm, "tasks", 1, 30*time.Second)
		victim := leaders[0][0]
		t.Logf("round %d: SIGKILL broker %d (leader of tasks-0)", k, victim)
		c.node(victim).kill()
		c.node(victim).start()
		c.node(victim).waitReady(60 * time.Second)
	}
	waitShareDone(t, adm, "crew", "tasks", 1, 120*time.Second)
	want := total / 2 // the odd values, each rejected (or, after failovers, archived at the limit first)
	letters := readDLQ(t, st.seeds, "dlq.tasks", want, 90*time.Second)
	// By value (copy.record.enable): every odd value exactly once; an even
	// one only if failovers took it to the delivery count limit before an
	// acceptance was confirmed (max-deliveries), and once.
	byValue := map[string]int{}
	offsets := map[string]int{}
	for _, l := range letters {
		byValue[l.value]++
		offsets[l.headers["__dlq.errors.offset"]]++
		if n, _ := strconv.Atoi(l.value); n%2 == 0 && l.headers["strata.dlq.reason"] != "max-deliveries" {
			t.Errorf("even value %s dead-lettered as %q", l.value, l.headers["strata.dlq.reason"])
		}
	}
	missing, dups := 0, 0
	for i := 1; i < total; i += 2 {
		if byValue[strconv.Itoa(i)] == 0 {
			missing++
		}
	}
	for v, n := range byValue {
		if n > 1 {
			dups++
			t.Errorf("value %s dead-lettered %d times", v, n)
		}
	}
	if missing > 0 || dups > 0 || len(offsets) != len(letters) {
		t.Fatalf("%d letters: %d odd values missing, %d duplicated, %d distinct offsets", len(letters), missing, dups, len(offsets))
	}
	t.Logf("%d kills: %d dead letters, %d of them beyond the %d rejected values", kills, len(letters), len(letters)-want, want)
	ledger.check(t)
}

// TestShareDLQFloodGuard: with strata.share.dlq.flood.ratio set, a group
// whose dead letters reach that share of its deliveries is paused -- no
// more records are delivered, describe says so -- until strata
// share-group resume; then the rest is delivered.
func TestShareDLQFloodGuard(t *testing.T) {
	b := startBroker(t, "", append(append([]string{}, shareSettings...),
		"--set", "strata.share.dlq.flood.ratio=0.5", "--set", "strata.share.dlq.flood.min.deliveries=10")...)
	st := shareTarget{seeds: []string{b.addr}, client: b.client, rf: 1}
	createShareTopic(t, st, "hooks", 1)
	createDLQTopic(t, st, "dlq.hooks", true)
	admCl := st.client()
	setGroupConfigs(t, admCl, "callers", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.hooks")
	produceSeq(t, st.client(), "hooks", 20) // values 0-19: all rejected (a bad deploy)
	ledger := newShareLedger()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newShareWorker(t, "w", st.seeds, "callers", "hooks", ledger)
	w.decide = func(r *kgo.Record) kgo.AckStatus {
		if n, _ := strconv.Atoi(string(r.Value)); n < 20 {
			return kgo.AckReject
		}
		return kgo.AckAccept
	}
	go w.run(ctx)
	letters := readDLQ(t, st.seeds, "dlq.hooks", 20, 30*time.Second)
	if len(letters) != 20 {
		t.Fatalf("%d dead letters, want 20", len(letters))
	}
	describe := func() string {
		return run(t, 30*time.Second, "", strataBin, "share-group", "describe", "callers", "--bootstrap-server", b.addr)
	}
	if !testwait.UntilEvery(20*time.Second, 100*time.Millisecond, func() bool { // each look runs the strata binary
		return strings.Contains(describe(), "PAUSED by the dead-letter flood guard")
	}) {
		t.Fatalf("the group was not paused:\n%s", describe())
	}
	// Paused: 20 good records are not delivered.
	got := w.got.Load()
	produceSeq2 := func(from, n int) {
		cl := st.client()
		defer cl.Close()
		for i := from; i < from+n; i++ {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "hooks", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produceSeq2(20, 20)
	testwait.Hold(t, 2*time.Second, func() bool { return w.got.Load() == got }, "a paused group got more records than the %d it had", got)
	if out := run(t, 30*time.Second, "", strataBin, "share-group", "resume", "callers", "--bootstrap-server", b.addr); !strings.Contains(out, "share group callers resumed") {
		t.Fatalf("resume: %s", out)
	}
	waitShareDone(t, kadm.NewClient(admCl), "callers", "hooks", 1, 30*time.Second)
	if !testwait.Until(30*time.Second, func() bool { _, confirmed := ledger.counts(); return confirmed == 40 }) {
		_, confirmed := ledger.counts()
		t.Fatalf("%d of 40 records confirmed after the resume", confirmed)
	}
	if out := describe(); strings.Contains(out, "PAUSED") {
		t.Fatalf("still paused after resume:\n%s", out)
	}
	ledger.check(t)
}

// TestShareDLQAutoCreate: with errors.deadletterqueue.auto.create.topics.enable
// a group's missing dead-letter topic is created (with
// errors.deadletterqueue.group.enable=true) and takes the letters; a name
// without the required prefix is never used.
func TestShareDLQAutoCreate(t *testing.T) {
	b := startBroker(t, "", append(append([]string{}, shareSettings...), "--set", "errors.deadletterqueue.auto.create.topics.enable=true")...)
	st := shareTarget{seeds: []string{b.addr}, client: b.client, rf: 1}
	createShareTopic(t, st, "pdfs", 1)
	admCl := st.client()
	setGroupConfigs(t, admCl, "render", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.pdfs")
	setGroupConfigs(t, admCl, "render2", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "pdfs-dead")
	produceSeq(t, st.client(), "pdfs", 5)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ledgers := map[string]*shareLedger{}
	for _, g := range []string{"render", "render2"} {
		ledgers[g] = newShareLedger()
		w := newShareWorker(t, g, st.seeds, g, "pdfs", ledgers[g])
		w.decide = func(r *kgo.Record) kgo.AckStatus {
			if string(r.Value) == "2" {
				return kgo.AckReject
			}
			return kgo.AckAccept
		}
		go w.run(ctx)
	}
	letters := readDLQ(t, st.seeds, "dlq.pdfs", 1, 30*time.Second)
	if len(letters) != 1 || letters[0].headers["__dlq.errors.offset"] != "2" || letters[0].headers["__dlq.errors.group"] != "render" {
		t.Fatalf("letters %+v", letters)
	}
	adm := kadm.NewClient(admCl)
	rc, err := adm.DescribeTopicConfigs(context.Background(), "dlq.pdfs")
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On("dlq.pdfs", nil)
	if err != nil {
		t.Fatal(err)
	}
	enabled := false
	for _, e := range c.Configs {
		if e.Key == "errors.deadletterqueue.group.enable" && e.MaybeValue() == "true" {
			enabled = true
		}
	}
	if !enabled {
		t.Fatalf("auto-created dlq.pdfs without errors.deadletterqueue.group.enable=true: %+v", c.Configs)
	}
	// render2's topic name lacks the prefix "dlq.": never created, though
	// its letter waits (the writer looks every 200 ms: a 1 s window).
	testwait.For(t, 30*time.Second, func() bool { _, confirmed := ledgers["render2"].counts(); return confirmed == 5 },
		"render2's acknowledgements were never confirmed")
	testwait.Hold(t, time.Second, func() bool {
		td, err := adm.ListTopics(context.Background(), "pdfs-dead")
		return err == nil && !td.Has("pdfs-dead")
	}, "pdfs-dead created (or ListTopics failed): a name without the prefix")
}

// TestShareRedeliveryBackoff: with strata.share.redelivery.backoff.*, a
// released record comes back only after its backoff (1 s, then 2 s),
// measured loosely by the worker's clock; at the delivery count limit (3)
// it is archived, and dead-lettered.
func TestShareRedeliveryBackoff(t *testing.T) {
	st := shareSingle(t)
	createShareTopic(t, st, "retries", 1)
	createDLQTopic(t, st, "dlq.retries", true)
	admCl := st.client()
	setGroupConfigs(t, admCl, "retriers", "share.auto.offset.reset", "earliest", "errors.deadletterqueue.topic.name", "dlq.retries",
		"strata.share.redelivery.backoff.initial.ms", "1000", "strata.share.redelivery.backoff.multiplier", "2")
	produceSeq(t, st.client(), "retries", 3)
	var mu sync.Mutex
	var at []time.Time
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newShareWorker(t, "w", st.seeds, "retriers", "retries", newShareLedger())
	w.decide = func(r *kgo.Record) kgo.AckStatus {
		if string(r.Value) == "1" {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
			return kgo.AckRelease
		}
		return kgo.AckAccept
	}
	go w.run(ctx)
	letters := readDLQ(t, st.seeds, "dlq.retries", 1, 30*time.Second)
	if len(letters) != 1 || letters[0].headers["strata.dlq.reason"] != "max-deliveries" || letters[0].headers["__dlq.errors.delivery.count"] != "3" {
		t.Fatalf("letters %+v", letters)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 3 {
		t.Fatalf("%d deliveries of the released record, want 3", len(at))
	}
	// The backoff starts when the release is applied, a little after the
	// worker saw the record: allow 150 ms of that.
	if g1, g2 := at[1].Sub(at[0]), at[2].Sub(at[1]); g1 < 850*time.Millisecond || g2 < 1850*time.Millisecond {
		t.Fatalf("redeliveries %v and %v apart, want at least 1 s and 2 s", g1, g2)
	} else {
		t.Logf("redeliveries %v and %v apart (backoff 1 s, 2 s)", g1, g2)
	}
}
