package protocol

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/groupcoord"
	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/txncoord"
)

// newTxnCluster is one broker with small coordinator topics and fast
// transaction timers.
func newTxnCluster(t testing.TB) *testCluster { return newTxnClusterTV(t, 2) }

// newTxnClusterTV is newTxnCluster at a transaction.version level: 2 lets
// kgo use KIP-890 part 2, 1 keeps it on the KIP-98 protocol.
func newTxnClusterTV(t testing.TB, tv int16) *testCluster {
	t.Helper()
	var b *replication.Broker
	cfg := Config{
		Groups: groupcoord.Config{NumPartitions: 4, InitialRebalanceDelay: -1, TickInterval: 20 * time.Millisecond},
		Txns:   txncoord.Config{NumPartitions: 4, AbortTimedOutInterval: 50 * time.Millisecond, TransactionVersion: tv},
	}
	s, addr := startServerWith(t, cfg, func(p int32) *replication.Broker {
		b = testBroker(t, func(c *replication.BrokerConfig) { c.AdvertisedPort = p })
		return b
	})
	return &testCluster{t: t, b: b, s: s, addr: addr, broker: b}
}

func txnProduce(t *testing.T, cl *kgo.Client, topic string, from, n int, commit bool) {
	t.Helper()
	ctx := testCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := from; i < from+n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// consumeAll reads topic from the start until want records arrived or
// the log end was reached with nothing more for a while.
func consumeAll(t *testing.T, c *testCluster, topic string, committed bool, want int) []string {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := c.client(opts...)
	var out []string
	deadline := time.Now().Add(3 * time.Second)
	for len(out) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	// Nothing more should come.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	cancel()
	return out
}

// TestTransactionsIsolation: committed records reach read_committed
// consumers, aborted ones only read_uncommitted consumers; the LSO stops
// at an open transaction (ListOffsets read_committed).
func TestTransactionsIsolation(t *testing.T) {
	for _, tv := range []int16{1, 2} {
		t.Run(fmt.Sprintf("transaction.version=%d", tv), func(t *testing.T) { testTransactionsIsolation(t, tv) })
	}
}

func testTransactionsIsolation(t *testing.T, tv int16) {
	c := newTxnClusterTV(t, tv)
	c.createTopic("t", 2)
	cl := c.client(kgo.TransactionalID("iso"), kgo.DefaultProduceTopic("t"))
	txnProduce(t, cl, "t", 0, 10, true)
	txnProduce(t, cl, "t", 100, 10, false)
	txnProduce(t, cl, "t", 10, 5, true)
	// KIP-890 part 2 bumps the epoch at every EndTxn; KIP-98 does not.
	if dt, err := c.admin().DescribeTransactions(testCtx(t), "iso"); err != nil || dt["iso"].ProducerEpoch != map[int16]int16{1: 0, 2: 3}[tv] || dt["iso"].State != "CompleteCommit" {
		t.Fatalf("after three transactions: %+v %v", dt["iso"], err)
	}

	got := consumeAll(t, c, "t", true, 15)
	if len(got) != 15 {
		t.Fatalf("read_committed got %d records: %v", len(got), got)
	}
	for _, v := range got {
		if len(v) == 3 {
			t.Fatalf("read_committed saw aborted record %s", v)
		}
	}
	if got := consumeAll(t, c, "t", false, 25); len(got) != 25 {
		t.Fatalf("read_uncommitted got %d records", len(got))
	}

	// An open transaction holds the LSO back; the high watermark moves on.
	ctx := testCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: 0, Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := c.admin()
	hw, err := adm.ListEndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	lso, err := adm.ListCommittedOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	diff := 0
	hw.Each(func(o kadm.ListedOffset) {
		l, _ := lso.Lookup(o.Topic, o.Partition)
		if l.Offset > o.Offset {
			t.Fatalf("LSO %d above high watermark %d", l.Offset, o.Offset)
		}
		if l.Offset < o.Offset {
			diff++
		}
	})
	if diff == 0 {
		t.Fatal("no partition has its LSO below the high watermark during an open transaction")
	}
	// DescribeProducers shows the open transaction's first offset.
	dp, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"t": {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	open := 0
	dp.EachProducer(func(p kadm.DescribedProducer) {
		if p.CurrentTxnStartOffset >= 0 {
			open++
		}
	})
	if open != 1 {
		t.Fatalf("DescribeProducers: %d open transactions, want 1", open)
	}
	// DescribeTransactions / ListTransactions see it Ongoing.
	dt, err := adm.DescribeTransactions(ctx, "iso")
	if err != nil {
		t.Fatal(err)
	}
	if d := dt["iso"]; d.Err != nil || d.State != "Ongoing" || len(d.Topics["t"]) == 0 {
		t.Fatalf("DescribeTransactions: %+v", d)
	}
	lt, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lt) != 1 {
		t.Fatalf("ListTransactions Ongoing: %+v", lt)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	lso, _ = adm.ListCommittedOffsets(ctx, "t")
	hw, _ = adm.ListEndOffsets(ctx, "t")
	hw.Each(func(o kadm.ListedOffset) {
		if l, _ := lso.Lookup(o.Topic, o.Partition); l.Offset != o.Offset {
			t.Fatalf("after commit LSO %d, high watermark %d", l.Offset, o.Offset)
		}
	})
}

// TestTransactionsFencing: a second producer with the same
// transactional ID fences the first, whose open transaction is aborted.
func TestTransactionsFencing(t *testing.T) {
	c := newTxnCluster(t)
	c.createTopic("f", 1)
	ctx := testCtx(t)
	a := c.client(kgo.TransactionalID("fence"), kgo.DefaultProduceTopic("f"))
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := a.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b := c.client(kgo.TransactionalID("fence"), kgo.DefaultProduceTopic("f"))
	txnProduce(t, b, "f", 0, 3, true)

	err := a.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie2")}).FirstErr()
	if err == nil {
		err = a.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Fatalf("fenced producer: %v", err)
	}
	got := consumeAll(t, c, "f", true, 3)
	if len(got) != 3 {
		t.Fatalf("read_committed: %v", got)
	}
	for _, v := range got {
		if v == "zombie" || v == "zombie2" {
			t.Fatalf("zombie record visible: %v", got)
		}
	}
}

// TestTransactionTimeoutAborts: a transaction left open past its timeout
// is aborted by the coordinator with an epoch bump.
func TestTransactionTimeoutAborts(t *testing.T) {
	c := newTxnCluster(t)
	c.createTopic("to", 1)
	ctx := testCtx(t)
	cl := c.client(kgo.TransactionalID("slow"), kgo.DefaultProduceTopic("to"), kgo.TransactionTimeout(time.Second))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := c.admin()
	var d kadm.DescribedTransaction
	if !testwait.Until(5*time.Second, func() bool {
		dt, err := adm.DescribeTransactions(ctx, "slow")
		if err != nil {
			t.Fatal(err)
		}
		d = dt["slow"]
		return d.State == "CompleteAbort"
	}) {
		t.Fatalf("not aborted: %+v", d)
	}
	if d.ProducerEpoch != 1 {
		t.Fatalf("epoch after the timeout abort %d, want 1", d.ProducerEpoch)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("commit after the timeout abort succeeded")
	}
	if got := consumeAll(t, c, "to", true, 0); len(got) != 0 {
		t.Fatalf("read_committed after the timeout abort: %v", got)
	}
}

// TestTransactionMetrics: the coordinator's series after one committed
// transaction.
func TestTransactionMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	var b *replication.Broker
	cfg := Config{Registerer: reg, Txns: txncoord.Config{NumPartitions: 2}, Groups: groupcoord.Config{NumPartitions: 2}}
	s, addr := startServerWith(t, cfg, func(p int32) *replication.Broker {
		b = testBroker(t, func(c *replication.BrokerConfig) { c.AdvertisedPort = p })
		return b
	})
	c := &testCluster{t: t, b: b, s: s, addr: addr, broker: b}
	c.createTopic("m", 3)
	cl := c.client(kgo.TransactionalID("metrics"), kgo.DefaultProduceTopic("m"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	txnProduce(t, cl, "m", 0, 6, true)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			if m.GetGauge() != nil {
				got[name] = m.GetGauge().GetValue()
			} else if m.GetCounter() != nil {
				got[name] = m.GetCounter().GetValue()
			}
		}
	}
	if got["kafka_coordinator_transaction_num_transactions/CompleteCommit"] != 1 || got["strata_transaction_markers_written_total"] != 3 {
		t.Fatalf("series: committed %v, markers %v", got["kafka_coordinator_transaction_num_transactions/CompleteCommit"], got["strata_transaction_markers_written_total"])
	}
}

// TestReadCommittedLongPollAtOpenTransaction: a read_committed long poll
// at the last stable offset (an open transaction there, the high
// watermark past it) waits for its MaxWait and is answered empty, then a
// second one is woken by the commit. The first used to spin, reading
// nothing, until the transaction ended, never looking at its deadline or
// its connection (issue 15: 170 such requests kept two cores busy).
func TestReadCommittedLongPollAtOpenTransaction(t *testing.T) {
	c := newTxnCluster(t)
	c.createTopic("lp", 1)
	cl := c.client(kgo.TransactionalID("lp"), kgo.DefaultProduceTopic("lp"))
	ctx := testCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lp", Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, c.addr) // its reads end after 20 s
	poll := func(wait int32) (kmsg.FetchResponseTopicPartition, time.Duration) {
		req := fetchReq(11, "lp", 0, 0)
		req.IsolationLevel, req.MaxWaitMillis = 1, wait
		start := time.Now()
		return fetchPartResp(t, rc.roundTrip(req)), time.Since(start)
	}
	p, took := poll(300)
	if p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.LastStableOffset != 0 || p.HighWatermark < 1 {
		t.Fatalf("at the open transaction: err %d, %d record bytes, LSO %d, HW %d; want no records, LSO 0, HW >= 1",
			p.ErrorCode, len(p.RecordBatches), p.LastStableOffset, p.HighWatermark)
	}
	t.Logf("empty long poll answered after %v (MaxWait 300 ms)", took)

	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Error(err)
		}
	}()
	p, took = poll(15000)
	<-done
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.LastStableOffset < 1 {
		t.Fatalf("after the commit: err %d, %d record bytes, LSO %d; want the committed record", p.ErrorCode, len(p.RecordBatches), p.LastStableOffset)
	}
	if took > 10*time.Second {
		t.Fatalf("the commit did not wake the long poll: answered after %v of its 15 s", took)
	}
}
