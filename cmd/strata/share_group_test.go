package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// runShareGroup runs `strata share-group args... --bootstrap-server addr`.
func runShareGroup(t *testing.T, addr string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"share-group"}, args...)
	args = append(args, "--bootstrap-server", addr, "--timeout", "15s")
	code := run(args, nil, &out, &errOut)
	return code, out.String(), errOut.String()
}

// shareCLI runs share-group commands against one broker and checks their
// exit codes and output.
type shareCLI struct {
	t    *testing.T
	addr string
}

func (c shareCLI) ok(want string, args ...string) string {
	c.t.Helper()
	code, out, errOut := runShareGroup(c.t, c.addr, args...)
	if code != exitOK || !strings.Contains(out, want) {
		c.t.Fatalf("strata share-group %v: exit %d\nstdout:\n%s\nstderr:\n%s\nwant stdout containing %q", args, code, out, errOut, want)
	}
	return out
}

func (c shareCLI) fail(wantCode int, want string, args ...string) {
	c.t.Helper()
	code, out, errOut := runShareGroup(c.t, c.addr, args...)
	if code != wantCode || !strings.Contains(errOut, want) {
		c.t.Fatalf("strata share-group %v: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d naming %q", args, code, out, errOut, wantCode, want)
	}
}

// row finds the table row of out whose fields start with prefix
// (whitespace-collapsed) and returns it collapsed.
func row(t *testing.T, out, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Join(strings.Fields(l), " "); strings.HasPrefix(f, prefix) {
			return f
		}
	}
	t.Fatalf("no row %q in:\n%s", prefix, out)
	return ""
}

// startServeMetrics is startServe with metrics.listener on a free port;
// it returns the broker's address and the /metrics URL.
func startServeMetrics(t *testing.T) (addr, metricsURL string) {
	t.Helper()
	cfg, _, err := loadConfig([]string{"--listeners", "PLAINTEXT://127.0.0.1:0", "--log-dirs", t.TempDir(),
		"--set", "metrics.listener=127.0.0.1:0"}, nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	bound := make(chan net.Addr, 1)
	cfg.Monitoring.bound = func(a net.Addr) { bound <- a }
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, nil, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), ready) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop within 20s")
		}
	})
	for metricsURL == "" || addr == "" {
		select {
		case a := <-bound:
			metricsURL = "http://" + a.String() + "/metrics"
		case a := <-ready:
			addr = a.String()
		case err := <-done:
			t.Fatalf("serve failed: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("serve not ready within 20s")
		}
	}
	return addr, metricsURL
}

// produceAt writes n records with value v to partition p of topic, each
// stamped ts.
func produceAt(t *testing.T, cl *kgo.Client, topic string, p int32, n int, ts time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte("job"), Timestamp: ts}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// The offsets side of share-group against one broker, with records
// acquired and acknowledged by hand (ShareFetch, ShareAcknowledge over a
// real socket): reset-offsets' plan changes nothing and --execute does;
// --to-earliest/--to-offset/--to-datetime/--to-latest; describe's start
// offset, lag, and records in flight and archived from /metrics;
// delete-offsets; the refusals and exit codes.
func TestShareGroupCLIOffsets(t *testing.T) {
	requireStorage(t)
	addr, metricsURL := startServeMetrics(t)
	c := shareCLI{t, addr}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "jobs", 2, 1
	create.Topics = append(create.Topics, ct)
	if resp, err := create.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %v", err, resp)
	}
	t0 := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	produceAt(t, cl, "jobs", 0, 5, t0)
	produceAt(t, cl, "jobs", 0, 5, t0.Add(time.Hour))
	produceAt(t, cl, "jobs", 1, 4, t0)

	// No state yet: nothing listed, describe names the missing group
	// (or, before the broker serves ShareGroupDescribe, says so).
	notFound := "GROUP_ID_NOT_FOUND"
	if !apiServed(t, addr, 77) {
		notFound = "broker is too old"
	}
	if out := c.ok("GROUP", "list"); strings.Contains(out, "g1") {
		t.Fatalf("list before any state:\n%s", out)
	}
	c.fail(exitError, notFound, "describe", "g1")

	// The plan changes nothing.
	out := c.ok("Dry run: nothing changed", "reset-offsets", "g1", "--topic", "jobs", "--to-earliest")
	if r := row(t, out, "jobs 0"); r != "jobs 0 - 0 - 10" {
		t.Fatalf("plan row: %q\n%s", r, out)
	}
	c.fail(exitError, notFound, "describe", "g1")

	// --execute sets the start offsets; describe reads them back.
	c.ok("Reset 2 start offset(s) for share group g1.", "reset-offsets", "g1", "--topic", "jobs", "--to-earliest", "--execute")
	out = c.ok("TOTAL LAG 14", "describe", "g1")
	if r := row(t, out, "jobs 0"); !strings.HasPrefix(r, "jobs 0 0 10 ") {
		t.Fatalf("describe row after reset to earliest: %q\n%s", r, out)
	}
	if r := row(t, out, "jobs 1"); !strings.HasPrefix(r, "jobs 1 0 4 ") {
		t.Fatalf("describe row after reset to earliest: %q\n%s", r, out)
	}
	// --to-datetime: the first record at or after t0+30m is offset 5;
	// the plan shows the old start offset and lag.
	out = c.ok("Dry run", "reset-offsets", "g1", "--topic", "jobs:0", "--to-datetime", t0.Add(30*time.Minute).Format(time.RFC3339))
	if r := row(t, out, "jobs 0"); r != "jobs 0 0 5 10 5" {
		t.Fatalf("--to-datetime plan row: %q\n%s", r, out)
	}
	if strings.Contains(out, "jobs 1") {
		t.Fatalf("jobs:0 planned partition 1:\n%s", out)
	}
	c.ok("Reset 1 start offset(s)", "reset-offsets", "g1", "--topic", "jobs:0", "--to-offset", "3", "--execute")

	// A worker acquires offsets 3-9 of partition 0 by hand: in flight.
	var topicID [16]byte
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("jobs")
	meta.Topics = append(meta.Topics, mt)
	if resp, err := meta.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	} else {
		topicID = resp.Topics[0].TopicID
	}
	w := handWorker{cl: cl, group: "g1", member: "worker-1", topicID: topicID}
	if got := w.fetch(t, ctx); got != 7 {
		t.Fatalf("acquired %d records from offset 3, want 7", got)
	}
	out = c.ok("IN-FLIGHT", "describe", "g1", "--metrics-url", metricsURL)
	if r := row(t, out, "jobs 0"); !strings.HasPrefix(r, "jobs 0 3 7 ") || !strings.HasSuffix(r, " 7 0") {
		t.Fatalf("describe row with 3-9 in flight: %q (want start 3, lag 7, in flight 7, archived 0)\n%s", r, out)
	}
	// Accept 3-5, reject 6, release 7-9: the start moves to 7, one
	// record is archived, none is in flight.
	w.ack(t, ctx, [3]int64{3, 5, 1}, [3]int64{6, 6, 3}, [3]int64{7, 9, 2})
	out = c.ok("IN-FLIGHT", "describe", "g1", "--metrics-url", metricsURL)
	if r := row(t, out, "jobs 0"); !strings.HasPrefix(r, "jobs 0 7 3 ") || !strings.HasSuffix(r, " 0 1") {
		t.Fatalf("describe row after accept/reject/release: %q (want start 7, lag 3, in flight 0, archived 1)\n%s", r, out)
	}
	if r := row(t, out, "jobs 1"); !strings.HasSuffix(r, " - -") && !strings.HasSuffix(r, " 0 -") {
		t.Fatalf("partition 1 has no share metrics yet: %q\n%s", r, out)
	}

	// --to-latest leaves nothing to deliver.
	c.ok("Reset 2 start offset(s)", "reset-offsets", "g1", "--topic", "jobs", "--to-latest", "--execute")
	out = c.ok("TOTAL LAG 0", "describe", "g1")
	if r := row(t, out, "jobs 0"); !strings.HasPrefix(r, "jobs 0 10 0 ") {
		t.Fatalf("describe row after --to-latest: %q\n%s", r, out)
	}

	// delete-offsets forgets the state; an unknown topic is reported.
	out = c.ok("Successful", "delete-offsets", "g1", "--topic", "jobs")
	if r := row(t, out, "jobs"); r != "jobs Successful" {
		t.Fatalf("delete-offsets: %q", r)
	}
	c.fail(exitError, "UNKNOWN_TOPIC_OR_PARTITION", "delete-offsets", "g1", "--topic", "nope")
	c.fail(exitError, notFound, "describe", "g1")

	// Bad input: Kafka's error codes or a configuration exit.
	c.fail(exitError, "UNKNOWN_TOPIC_OR_PARTITION", "reset-offsets", "g1", "--topic", "nope", "--to-earliest")
	c.fail(exitError, "no partition [7]", "reset-offsets", "g1", "--topic", "jobs:7", "--to-earliest")
	c.fail(exitConfig, "exactly one of", "reset-offsets", "g1", "--topic", "jobs", "--to-earliest", "--to-latest")
	c.fail(exitConfig, "exclude each other", "describe", "g1", "--members", "--state")
	c.fail(exitConfig, "--topic is required", "delete-offsets", "g1")
	c.fail(exitError, "not a share group", "delete", "g1")
	c.fail(exitConfig, "unknown command", "frobnicate")
}

// handWorker acquires and acknowledges records of partition 0 for one
// member by hand: ShareFetch opens its share session, ShareAcknowledge
// acknowledges in it.
type handWorker struct {
	cl            *kgo.Client
	group, member string
	topicID       [16]byte
	epoch         int32
}

// fetch acquires what it can, waiting up to 10 s for records, and
// returns how many records it acquired.
func (w *handWorker) fetch(t *testing.T, ctx context.Context) int {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(w.group), kmsg.StringPtr(w.member)
	req.ShareSessionEpoch = w.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords, req.BatchSize = 10000, 1, 1<<20, 500, 500
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = w.topicID
	rt.Partitions = append(rt.Partitions, kmsg.NewShareFetchRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, w.cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ShareFetch: %v", err)
	}
	w.epoch++
	n := 0
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("ShareFetch partition %d: %v", p.Partition, err)
			}
			for _, a := range p.AcquiredRecords {
				n += int(a.LastOffset - a.FirstOffset + 1)
			}
		}
	}
	return n
}

// ack acknowledges ranges {first, last, type} in the open session.
func (w *handWorker) ack(t *testing.T, ctx context.Context, ranges ...[3]int64) {
	t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID = kmsg.StringPtr(w.group), kmsg.StringPtr(w.member)
	req.ShareSessionEpoch = w.epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = w.topicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	for _, r := range ranges {
		b := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = r[0], r[1], []int8{int8(r[2])}
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, b)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, w.cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ShareAcknowledge: %v", err)
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("ShareAcknowledge partition %d: %v", p.Partition, err)
			}
		}
	}
	w.epoch++
}

// apiServed reports whether the broker at addr serves API key.
func apiServed(t *testing.T, addr string, key int16) bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key {
			return true
		}
	}
	return false
}

// The members side of share-group with franz-go's share consumers
// (kgo.ShareGroup): list and describe --members/--state while two
// workers share the queue, reset-offsets and delete refused while they
// are members, then once they left: a reset that replays the queue to a
// new worker, delete-offsets and delete.
func TestShareGroupCLIMembers(t *testing.T) {
	requireStorage(t)
	addr, _ := startServeMetrics(t)
	if !apiServed(t, addr, 76) {
		t.Skip("the broker does not serve ShareGroupHeartbeat yet (share-group membership)")
	}
	c := shareCLI{t, addr}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "tasks", 1, 1
	create.Topics = append(create.Topics, ct)
	if resp, err := create.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %v", err, resp)
	}
	const n = 20
	produceAt(t, cl, "tasks", 0, n, time.Now())
	// The group's state starts at the first record (instead of
	// share.auto.offset.reset=latest).
	c.ok("Reset 1 start offset(s)", "reset-offsets", "workers", "--topic", "tasks", "--to-earliest", "--execute")

	// Two workers accept everything; each stays a member until told.
	var mu sync.Mutex
	seen := map[int64]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	worker := func(id string) {
		defer wg.Done()
		w, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(id), kgo.ShareGroup("workers"), kgo.ConsumeTopics("tasks"))
		if err != nil {
			t.Error(err)
			return
		}
		defer w.Close()
		for {
			select {
			case <-stop:
				pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
				_ = w.FlushAcks(pctx)
				pcancel()
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			fs := w.PollRecords(pctx, 100)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[r.Offset]++
				mu.Unlock()
				r.Ack(kgo.AckAccept)
			})
		}
	}
	wg.Add(2)
	go worker("worker-a")
	go worker("worker-b")
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testwait.For(t, 60*time.Second, cond, "timed out waiting for %s", what)
	}
	waitFor("two members", func() bool {
		code, out, _ := runShareGroup(t, addr, "describe", "workers", "--state")
		return code == exitOK && strings.Contains(strings.Join(strings.Fields(out), " "), " Stable ") && strings.HasSuffix(strings.TrimSpace(out), " 2")
	})
	waitFor("every record accepted", func() bool {
		code, out, _ := runShareGroup(t, addr, "describe", "workers")
		return code == exitOK && strings.Contains(out, "TOTAL LAG 0")
	})
	out := c.ok("CONSUMER-ID", "describe", "workers", "--members")
	for _, id := range []string{"worker-a", "worker-b"} {
		if !strings.Contains(out, id) || !strings.Contains(out, "tasks:0") {
			t.Fatalf("describe --members lacks %s assigned tasks:0:\n%s", id, out)
		}
	}
	if r := row(t, c.ok("workers", "list"), "workers"); r != "workers Stable" {
		t.Fatalf("list row: %q", r)
	}
	if r := row(t, c.ok("workers", "list", "--state", "Stable"), "workers"); r != "workers Stable" {
		t.Fatalf("list --state Stable row: %q", r)
	}
	if out := c.ok("GROUP", "list", "--state", "Empty"); strings.Contains(out, "workers") {
		t.Fatalf("list --state Empty shows a Stable group:\n%s", out)
	}
	c.fail(exitError, "active members", "reset-offsets", "workers", "--topic", "tasks", "--to-earliest", "--execute")
	c.fail(exitError, "stop its consumers first", "delete", "workers")
	c.fail(exitError, "active members", "delete-offsets", "workers", "--topic", "tasks")

	close(stop)
	wg.Wait()
	mu.Lock()
	for off := int64(0); off < n; off++ {
		if seen[off] == 0 {
			t.Errorf("offset %d never delivered", off)
		}
	}
	mu.Unlock()
	waitFor("the group to empty", func() bool {
		code, out, _ := runShareGroup(t, addr, "list", "--state", "Empty")
		return code == exitOK && strings.Contains(out, "workers")
	})

	// Replay: the plan, then the reset, then a new worker gets all again.
	out = c.ok("Dry run", "reset-offsets", "workers", "--topic", "tasks", "--to-earliest")
	if r := row(t, out, "tasks 0"); r != "tasks 0 20 0 0 20" {
		t.Fatalf("replay plan row: %q\n%s", r, out)
	}
	c.ok("Reset 1 start offset(s)", "reset-offsets", "workers", "--topic", "tasks", "--to-earliest", "--execute")
	c.ok("TOTAL LAG 20", "describe", "workers")
	w, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("workers"), kgo.ConsumeTopics("tasks"))
	if err != nil {
		t.Fatal(err)
	}
	replayed := map[int64]bool{}
	for len(replayed) < n && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := w.PollRecords(pctx, 100)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { replayed[r.Offset] = true; r.Ack(kgo.AckAccept) })
	}
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
	_ = w.FlushAcks(fctx)
	fcancel()
	w.Close()
	if len(replayed) < n {
		t.Fatalf("replay delivered %d of %d records", len(replayed), n)
	}
	waitFor("the group to empty again", func() bool {
		code, out, _ := runShareGroup(t, addr, "list", "--state", "Empty")
		return code == exitOK && strings.Contains(out, "workers")
	})
	c.ok("Successful", "delete-offsets", "workers", "--topic", "tasks")
	c.ok("Deleted share group workers.", "delete", "workers")
	if out := c.ok("GROUP", "list"); strings.Contains(out, "workers") {
		t.Fatalf("list after delete:\n%s", out)
	}
}

// parseMetricLine reads the samples client_golang writes, escaped label
// values included (a group ID may hold quotes, backslashes, commas).
func TestParseMetricLine(t *testing.T) {
	for _, c := range []struct {
		line, name, group string
		value             float64
		ok                bool
	}{
		{`strata_share_records_in_flight{group="g1",partition="0",topic="jobs"} 7`, "strata_share_records_in_flight", "g1", 7, true},
		{`strata_share_records_archived_total{cause="rejected",group="a\"b\\c,d} x",partition="3",topic="t"} 2 1700000000000`, "strata_share_records_archived_total", "a\"b\\c,d} x", 2, true},
		{`strata_share_sessions 3`, "strata_share_sessions", "", 3, true},
		{`# TYPE strata_share_sessions gauge`, "", "", 0, false},
		{`strata_share_records_in_flight{group="g1 7`, "", "", 0, false},
		{`strata_share_records_in_flight{group="g1"} seven`, "", "", 0, false},
		{``, "", "", 0, false},
	} {
		name, labels, v, ok := parseMetricLine(c.line)
		if ok != c.ok || name != c.name || labels["group"] != c.group || v != c.value {
			t.Errorf("parseMetricLine(%q) = %q %v %v %v, want %q group %q %v %v", c.line, name, labels, v, ok, c.name, c.group, c.value, c.ok)
		}
	}
}
