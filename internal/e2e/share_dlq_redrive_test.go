package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/dlq"
)

// Redrive (`strata dlq redrive`): a dry run changes nothing; --execute
// re-publishes each dead letter's record (key, value, headers) once,
// with strata.redrive.count; a run SIGKILLed between a batch's produce
// and its commit, run again, moves nothing twice (read_committed sees
// each record once; the aborted batch is in the log, uncommitted); the
// redrive limit refuses records redriven too often and they stay;
// letters without a copy are read back from the source, and a record
// retention removed is reported and skipped. `strata dlq list` and
// `inspect` show what waits.

// strataCLI runs the strata binary; err is the process's (an
// *exec.ExitError when it failed or was killed).
func strataCLI(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, strataBin, args...)
	cmd.Env = append(brokerEnv(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := strataCLI(t, nil, args...)
	if err != nil {
		t.Fatalf("strata %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// readTopic0 reads topic's partition 0 from the start: every record up to
// its end offset (or every committed record), until nothing more comes
// for 3 s (transaction markers and aborted records are never returned:
// there is no record at the end to wait for).
func readTopic0(t *testing.T, seeds []string, topic string, committed bool) []*kgo.Record {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200 * time.Millisecond)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	end := endOffset(t, kadm.NewClient(cl), topic)
	var out []*kgo.Record
	next := int64(0)
	deadline := time.Now().Add(90 * time.Second)
	for next < end && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 && ctx.Err() != nil {
			return out // the rest is markers (or, committed, aborted)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			next = r.Offset + 1
		})
	}
	if time.Now().After(deadline) {
		t.Fatalf("reading %s: at %d of %d after 90 s", topic, next, end)
	}
	return out
}

func header(r *kgo.Record, k string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value), true
		}
	}
	return "", false
}

// redriven returns the records of topic that a redrive published
// (committed only, or every one), by their strata.redrive.from.
func redriven(t *testing.T, seeds []string, topic string, committed bool) map[string][]*kgo.Record {
	out := map[string][]*kgo.Record{}
	for _, r := range readTopic0(t, seeds, topic, committed) {
		if from, ok := header(r, dlq.HeaderRedriveFrom); ok {
			out[from] = append(out[from], r)
		}
	}
	return out
}

func TestShareDLQRedrive(t *testing.T) {
	st := shareSingle(t)
	createShareTopic(t, st, "orders", 1)
	createDLQTopic(t, st, "dlq.orders", true)
	createDLQTopic(t, st, "dlq.audit", true)
	createShareTopic(t, st, "orders.retry", 1)
	createShareTopic(t, st, "orders.audit", 1)
	admCl := st.client()
	adm := kadm.NewClient(admCl)
	setGroupConfigs(t, admCl, "billing", "share.auto.offset.reset", "earliest", "share.isolation.level", "read_committed",
		"errors.deadletterqueue.topic.name", "dlq.orders", "errors.deadletterqueue.copy.record.enable", "true")
	setGroupConfigs(t, admCl, "audit", "share.auto.offset.reset", "earliest",
		"errors.deadletterqueue.topic.name", "dlq.audit", "errors.deadletterqueue.copy.record.enable", "false")

	// 60 records with keys and a header; billing rejects every third and
	// releases 1, 11, 31, 41 until the delivery limit; audit rejects
	// every third.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	var recs []*kgo.Record
	for i := range 60 {
		recs = append(recs, &kgo.Record{Topic: "orders", Key: []byte("k" + strconv.Itoa(i)), Value: []byte(strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t" + strconv.Itoa(i))}}})
	}
	if err := admCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cancel()
	poison := func(r *kgo.Record) bool {
		_, again := header(r, dlq.HeaderRedriveCount)
		return again
	}
	wctx, wcancel := context.WithCancel(context.Background())
	bw := newShareWorker(t, "billing-w", st.seeds, "billing", "orders", newShareLedger())
	bw.decide = func(r *kgo.Record) kgo.AckStatus {
		i, _ := strconv.Atoi(string(r.Value))
		switch {
		case poison(r) || i%3 == 0:
			return kgo.AckReject
		case i%10 == 1:
			return kgo.AckRelease
		}
		return kgo.AckAccept
	}
	aw := newShareWorker(t, "audit-w", st.seeds, "audit", "orders", newShareLedger())
	aw.decide = func(r *kgo.Record) kgo.AckStatus {
		if i, _ := strconv.Atoi(string(r.Value)); i%3 == 0 {
			return kgo.AckReject
		}
		return kgo.AckAccept
	}
	go bw.run(wctx)
	go aw.run(wctx)
	waitShareDone(t, adm, "billing", "orders", 1, 90*time.Second)
	waitShareDone(t, adm, "audit", "orders", 1, 90*time.Second)
	wcancel()
	readDLQ(t, st.seeds, "dlq.orders", 24, 60*time.Second)
	readDLQ(t, st.seeds, "dlq.audit", 20, 60*time.Second)
	bs := []string{"--bootstrap-server", st.seeds[0]}

	out := mustCLI(t, append([]string{"dlq", "inspect", "--group", "billing"}, bs...)...)
	if !strings.Contains(out, "24 letters waiting (of 24 in the topic)") || !strings.Contains(out, "max-deliveries=4 rejected=20") {
		t.Fatalf("inspect:\n%s", out)
	}
	out = mustCLI(t, append([]string{"dlq", "list"}, bs...)...)
	if !strings.Contains(out, "billing") || !strings.Contains(out, "dlq.audit") {
		t.Fatalf("list:\n%s", out)
	}

	// The plan changes nothing.
	endBefore := endOffset(t, adm, "orders")
	out = mustCLI(t, append([]string{"dlq", "redrive", "--group", "billing"}, bs...)...)
	if !strings.Contains(out, "Plan (nothing changed") || !strings.Contains(out, ": 24 records") || !strings.Contains(out, "max-deliveries=4 rejected=20") {
		t.Fatalf("plan:\n%s", out)
	}
	if e := endOffset(t, adm, "orders"); e != endBefore {
		t.Fatalf("the plan wrote to orders: end %d -> %d", endBefore, e)
	}
	for _, reason := range dlq.Reasons {
		offs, err := adm.FetchOffsets(context.Background(), dlq.CursorGroup("billing", reason))
		if err == nil && len(offs) != 0 {
			t.Fatalf("the plan committed cursor %s: %v", reason, offs)
		}
	}

	// Killed between batch 2's produce and its commit, then run again.
	out, err := strataCLI(t, []string{"STRATA_DLQ_REDRIVE_KILL_AFTER=2"}, append([]string{"dlq", "redrive", "--group", "billing", "--execute", "--batch", "5"}, bs...)...)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Success() || !strings.Contains(ee.ProcessState.String(), "killed") {
		t.Fatalf("the redrive was not killed: %v\n%s", err, out)
	}
	if got := redriven(t, st.seeds, "orders", true); len(got) != 5 {
		t.Fatalf("after the kill, %d redriven records committed, want 5 (batch 1)", len(got))
	}
	out = mustCLI(t, append([]string{"dlq", "redrive", "--group", "billing", "--execute", "--batch", "5"}, bs...)...)
	if !strings.Contains(out, "Redrove 19 records") {
		t.Fatalf("second run:\n%s", out)
	}
	out = mustCLI(t, append([]string{"dlq", "redrive", "--group", "billing", "--execute"}, bs...)...)
	if !strings.Contains(out, "Redrove 0 records") {
		t.Fatalf("third run:\n%s", out)
	}
	got := redriven(t, st.seeds, "orders", true)
	all := redriven(t, st.seeds, "orders", false)
	n := 0
	for _, rs := range all {
		n += len(rs)
	}
	if n != 29 {
		t.Errorf("%d redriven records in the log, want 29 (24 committed + 5 of the killed run's batch, aborted)", n)
	}
	if len(got) != 24 {
		t.Fatalf("%d letters redriven (committed), want 24", len(got))
	}
	for from, rs := range got {
		if len(rs) != 1 {
			t.Errorf("letter %s redriven %d times", from, len(rs))
		}
		r := rs[0]
		i, _ := strconv.Atoi(string(r.Value))
		tr, _ := header(r, "trace")
		c, _ := header(r, dlq.HeaderRedriveCount)
		if string(r.Key) != "k"+string(r.Value) || tr != "t"+string(r.Value) || c != "1" || !(i%3 == 0 || i%10 == 1) {
			t.Errorf("letter %s: key %q value %q trace %q count %q", from, r.Key, r.Value, tr, c)
		}
		for _, h := range r.Headers {
			if strings.HasPrefix(h.Key, "__dlq.") || strings.HasPrefix(h.Key, "strata.dlq.") {
				t.Errorf("letter %s re-published with the letter's header %s", from, h.Key)
			}
		}
	}
	out = mustCLI(t, append([]string{"dlq", "inspect", "--group", "billing"}, bs...)...)
	if !strings.Contains(out, "0 letters waiting (of 24 in the topic)") {
		t.Fatalf("inspect after the redrive:\n%s", out)
	}

	// The loop guard: the redriven records are poison still; rejected
	// again, their letters carry strata.redrive.count=1 and a redrive
	// with --limit 1 refuses them (they stay).
	wctx, wcancel = context.WithCancel(context.Background())
	bw2 := newShareWorker(t, "billing-w2", st.seeds, "billing", "orders", newShareLedger())
	bw2.decide = bw.decide
	go bw2.run(wctx)
	letters := readDLQ(t, st.seeds, "dlq.orders", 48, 90*time.Second)
	wcancel()
	if len(letters) != 48 {
		t.Fatalf("%d letters, want 48", len(letters))
	}
	out = mustCLI(t, append([]string{"dlq", "redrive", "--group", "billing", "--execute", "--limit", "1"}, bs...)...)
	if !strings.Contains(out, "Redrove 0 records") || !strings.Contains(out, "Refused (already redriven 1 times; they stay): 24") {
		t.Fatalf("redrive past the limit:\n%s", out)
	}
	out = mustCLI(t, append([]string{"dlq", "inspect", "--group", "billing", "--reason", "rejected"}, bs...)...)
	if !strings.Contains(out, "24 letters waiting") {
		t.Fatalf("refused letters do not stay:\n%s", out)
	}
	out = mustCLI(t, append([]string{"dlq", "redrive", "--group", "billing", "--reason", "rejected", "--to", "orders.retry", "--execute", "--limit", "2"}, bs...)...)
	if !strings.Contains(out, "Redrove 24 records") {
		t.Fatalf("redrive under a raised limit:\n%s", out)
	}
	retry := redriven(t, st.seeds, "orders.retry", true)
	if len(retry) != 24 {
		t.Fatalf("%d records in orders.retry, want 24", len(retry))
	}
	for from, rs := range retry {
		if c, _ := header(rs[0], dlq.HeaderRedriveCount); len(rs) != 1 || c != "2" {
			t.Errorf("letter %s: %d copies, count %q", from, len(rs), c)
		}
	}

	// Letters without a copy: read back from the source; those below
	// the source's start offset (records 0, 3, 6, 9 deleted) are skipped.
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer dcancel()
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 10})
	if rs, err := adm.DeleteRecords(dctx, del); err != nil || rs.Error() != nil {
		t.Fatalf("delete records: %v %v", err, rs.Error())
	}
	out = mustCLI(t, append([]string{"dlq", "redrive", "--group", "audit", "--to", "orders.audit"}, bs...)...)
	if !strings.Contains(out, ": 16 records") || !strings.Contains(out, "no longer in its source") {
		t.Fatalf("audit plan:\n%s", out)
	}
	out = mustCLI(t, append([]string{"dlq", "redrive", "--group", "audit", "--to", "orders.audit", "--execute"}, bs...)...)
	if !strings.Contains(out, "Redrove 16 records") || !strings.Contains(out, "(retention, or topic deleted): 4") {
		t.Fatalf("audit redrive:\n%s", out)
	}
	for from, rs := range redriven(t, st.seeds, "orders.audit", true) {
		r := rs[0]
		i, _ := strconv.Atoi(string(r.Value))
		tr, _ := header(r, "trace")
		if len(rs) != 1 || i%3 != 0 || i < 10 || string(r.Key) != fmt.Sprintf("k%d", i) || tr != fmt.Sprintf("t%d", i) {
			t.Errorf("audit letter %s: %d copies, key %q value %q trace %q", from, len(rs), r.Key, r.Value, tr)
		}
	}
}

func endOffset(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := ends.Lookup(topic, 0)
	return e.Offset
}
