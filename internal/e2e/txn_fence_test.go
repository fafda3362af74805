package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestStaleTxnMarkerFenced: a WriteTxnMarkers from a coordinator older than
// the one that wrote the producer's last marker (a deposed coordinator's
// late retry) gets TRANSACTION_COORDINATOR_FENCED and does not end the
// producer's next transaction: a read_committed consumer still sees none
// of its records until the producer commits. The fault harness found the
// bug this guards (seed 3: read_committed returned a transaction's records
// before its EndTxn).
func TestStaleTxnMarkerFenced(t *testing.T) {
	b := startBroker(t, "")
	const topic = "fence"
	adm := kadm.NewClient(b.client())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod := b.client(kgo.TransactionalID("fenced-txn"), kgo.DefaultProduceTopic(topic))
	txn := func(value string, commit bool) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, kgo.StringRecord(value)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}
	txn("first", true)
	txn("second", false) // open

	ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var pid int64 = -1
	var epoch int16
	ps.EachPartition(func(p kadm.DescribedProducersPartition) {
		for _, d := range p.ActiveProducers {
			pid, epoch = d.ProducerID, d.ProducerEpoch
		}
	})
	if pid < 0 {
		t.Fatalf("no active producer on %s-0: %+v", topic, ps)
	}

	// A commit marker for the open transaction from coordinator epoch -1,
	// older than any that wrote the first commit.
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, true, -1
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: topic, Partitions: []int32{0}}}
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctx, b.client())
	if err != nil {
		t.Fatal(err)
	}
	code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode
	if code != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("stale marker answered %v, want TRANSACTION_COORDINATOR_FENCED", kerr.ErrorForCode(code))
	}

	// read_committed sees the first transaction only, until the second
	// commits.
	read := func(want int) []string {
		t.Helper()
		cl := b.client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cl.Close()
		var got []string
		deadline := time.Now().Add(30 * time.Second)
		for len(got) < want && time.Now().Before(deadline) {
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			pcancel()
		}
		// Anything past want would show up in one more poll.
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		pcancel()
		return got
	}
	if got := read(1); len(got) != 1 || got[0] != "first" {
		t.Fatalf("read_committed after the stale marker: %q, want [first]", got)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := read(2); len(got) != 2 || got[1] != "second" {
		t.Fatalf("read_committed after the commit: %q, want [first second]", got)
	}
}
