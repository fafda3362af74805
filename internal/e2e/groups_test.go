package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// groupArgs are broker settings that keep group tests fast: few offsets
// partitions, no initial rebalance delay, quick KIP-848 heartbeats.
var groupArgs = []string{
	"--set", "offsets.topic.num.partitions=3",
	"--set", "group.initial.rebalance.delay.ms=0",
	"--set", "group.consumer.heartbeat.interval.ms=200",
	"--set", "group.consumer.min.heartbeat.interval.ms=200", // Kafka's bound, lowered as on Kafka
}

// strataGroup runs `strata group ...` against b and returns stdout,
// stderr and the error of a non-zero exit.
func strataGroup(t *testing.T, b *broker, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args = append(append([]string{"group"}, args...), "--bootstrap-server", b.addr)
	cmd := exec.CommandContext(ctx, strataBin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

func mustGroup(t *testing.T, b *broker, args ...string) string {
	t.Helper()
	out, errOut, err := strataGroup(t, b, args...)
	if err != nil {
		t.Fatalf("strata group %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func createTopic(t *testing.T, b *broker, name string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := kadm.NewClient(b.client()).CreateTopic(ctx, partitions, 1, nil, name)
	if err != nil || r.Err != nil {
		t.Fatalf("create %s: %v %v", name, err, r.Err)
	}
}

// produceAt produces n records "<prefix>-i" with the given timestamp.
func produceAt(t *testing.T, b *broker, topic, prefix string, n int, ts time.Time) {
	t.Helper()
	cl := b.client(kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rs []*kgo.Record
	for i := 0; i < n; i++ {
		rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", prefix, i)), Timestamp: ts})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// consumeGroup joins group, reads until it has want records or nothing
// more arrives for a second, commits and leaves.
func consumeGroup(t *testing.T, b *broker, group, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.HeartbeatInterval(200*time.Millisecond), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	deadline := time.Now().Add(30 * time.Second)
	idleSince := time.Now()
	for len(got) < want && time.Now().Before(deadline) && time.Since(idleSince) < 3*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		if n := fs.NumRecords(); n > 0 {
			idleSince = time.Now()
			got = append(got, fs.Records()...)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return got
}

func committedSum(t *testing.T, b *broker, group string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	off, err := kadm.NewClient(b.client()).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	off.Each(func(o kadm.OffsetResponse) { sum += o.At })
	return sum
}

// Committed offsets survive a restart; `strata group` describes the group,
// refuses to reset it while a member is active, prints a dry-run plan that
// changes nothing, and replays by timestamp and from the earliest offset.
func TestGroupOffsetsRestartAndReplay(t *testing.T) {
	b := startBroker(t, "", groupArgs...)
	createTopic(t, b, "events", 3)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	t1 := t0.Add(30 * time.Minute)
	produceAt(t, b, "events", "old", 300, t0)
	produceAt(t, b, "events", "new", 200, t1)

	if got := consumeGroup(t, b, "replay", "events", 500); len(got) != 500 {
		t.Fatalf("first pass consumed %d of 500", len(got))
	}
	if s := committedSum(t, b, "replay"); s != 500 {
		t.Fatalf("committed %d, want 500", s)
	}
	b.restart()
	if s := committedSum(t, b, "replay"); s != 500 {
		t.Fatalf("after restart committed %d, want 500", s)
	}
	desc := mustGroup(t, b, "describe", "replay")
	if !strings.Contains(desc, "STATE Empty") || !strings.Contains(desc, "TOTAL LAG 0") || strings.Count(desc, "events ") != 3 {
		t.Fatalf("describe:\n%s", desc)
	}
	if l := mustGroup(t, b, "list"); !strings.Contains(l, "replay") {
		t.Fatalf("list:\n%s", l)
	}

	// A live member blocks the reset.
	live, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup("replay"), kgo.ConsumeTopics("events"),
		kgo.HeartbeatInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	live.PollFetches(ctx) // joins; nothing new to read
	cancel()
	testwait.For(t, 10*time.Second, func() bool {
		return strings.Contains(mustGroup(t, b, "describe", "replay"), "STATE Stable")
	}, "the live member never joined")
	_, stderr, err := strataGroup(t, b, "reset-offsets", "replay", "--topic", "events", "--to-earliest", "--execute")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(stderr, "active members") {
		t.Fatalf("reset with a live member: %v %s", err, stderr)
	}
	live.Close()
	testwait.For(t, 10*time.Second, func() bool {
		return strings.Contains(mustGroup(t, b, "describe", "replay"), "STATE Empty")
	}, "the live member never left")

	// Dry run: a plan, nothing committed.
	at := t1.Format(time.RFC3339Nano)
	plan := mustGroup(t, b, "reset-offsets", "replay", "--topic", "events", "--to-datetime", at)
	if !strings.Contains(plan, "Dry run") || strings.Count(plan, "events ") != 3 {
		t.Fatalf("plan:\n%s", plan)
	}
	if s := committedSum(t, b, "replay"); s != 500 {
		t.Fatalf("dry run changed the offsets: %d", s)
	}
	mustGroup(t, b, "reset-offsets", "replay", "--topic", "events", "--to-datetime", at, "--execute")
	if s := committedSum(t, b, "replay"); s != 300 {
		t.Fatalf("after reset to %s committed sum %d, want 300", at, s)
	}
	got := consumeGroup(t, b, "replay", "events", 200)
	if len(got) != 200 {
		t.Fatalf("replay from %s consumed %d, want 200", at, len(got))
	}
	for _, r := range got {
		if !strings.HasPrefix(string(r.Value), "new-") || r.Timestamp.Before(t1) {
			t.Fatalf("replay by time returned %q at %v", r.Value, r.Timestamp)
		}
	}
	mustGroup(t, b, "reset-offsets", "replay", "--topic", "events", "--to-earliest", "--execute")
	if got := consumeGroup(t, b, "replay", "events", 500); len(got) != 500 {
		t.Fatalf("replay from earliest consumed %d, want 500", len(got))
	}
	// --shift-by and --to-offset clamp to the log.
	mustGroup(t, b, "reset-offsets", "replay", "--topic", "events", "--shift-by", "-10", "--execute")
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	ends, err := kadm.NewClient(b.client()).ListEndOffsets(ctx, "events")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += max(0, o.Offset-10) })
	if s := committedSum(t, b, "replay"); s != want {
		t.Fatalf("after shift-by -10: %d, want %d", s, want)
	}
	mustGroup(t, b, "reset-offsets", "replay", "--topic", "events", "--to-offset", "1000000", "--execute")
	if s := committedSum(t, b, "replay"); s != 500 {
		t.Fatalf("after to-offset past the end: %d, want 500", s)
	}
}

// kcat -G (librdkafka's balanced consumer) and python3-confluent-kafka
// consumers use the group protocol: they share the work, commit, and a
// second run of the same group reads nothing already committed.
func TestGroupLibrdkafkaClients(t *testing.T) {
	kcat := needTool(t, "kcat")
	py := pythonWith(t, "confluent_kafka")
	b := startBroker(t, "", groupArgs...)
	createTopic(t, b, "lib", 4)
	// 100 records in each partition.
	prod := b.client(kgo.DefaultProduceTopic("lib"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := 0; i < 400; i++ {
		pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := prod.ProduceSync(pctx, &kgo.Record{Value: []byte(fmt.Sprintf("r-%d", i))}).FirstErr()
		pcancel()
		if err != nil {
			t.Fatal(err)
		}
	}

	// Two python consumers of one group at once: between them, all 400;
	// with eager range and with cooperative-sticky assignment.
	for _, strategy := range []string{"range", "cooperative-sticky"} {
		group := "py-" + strategy
		type res struct {
			out string
			err error
		}
		ch := make(chan res, 2)
		for i := 0; i < 2; i++ {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				out, err := exec.CommandContext(ctx, py, "testdata/confluent_group.py", b.addr, "lib", group, "400", "4", strategy).CombinedOutput()
				ch <- res{string(out), err}
			}()
		}
		total := 0
		for i := 0; i < 2; i++ {
			r := <-ch
			var n int
			if r.err != nil || func() bool { _, err := fmt.Sscanf(lastLine(r.out), "consumed %d", &n); return err != nil }() {
				t.Fatalf("python consumer (%s): %v\n%s", strategy, r.err, r.out)
			}
			total += n
		}
		if total < 400 {
			t.Fatalf("python consumers (%s) read %d of 400", strategy, total)
		}
		if s := committedSum(t, b, group); s != 400 {
			t.Fatalf("%s committed %d", group, s)
		}
		out := run(t, time.Minute, "", py, "testdata/confluent_group.py", b.addr, "lib", group, "1", "2", strategy)
		if lastLine(out) != "consumed 0" {
			t.Fatalf("second python run (%s): %s", strategy, out)
		}
	}
	var out string

	// kcat -G: the balanced consumer reads everything and commits on exit.
	out = run(t, time.Minute, "", kcat, "-b", b.addr, "-G", "kcatgroup", "-q", "-e", "-o", "beginning",
		"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", "-f", "%s\n", "lib")
	if n := len(strings.Fields(out)); n != 400 {
		t.Fatalf("kcat -G read %d of 400", n)
	}
	if s := committedSum(t, b, "kcatgroup"); s != 400 {
		t.Fatalf("kcatgroup committed %d", s)
	}
	if d := mustGroup(t, b, "describe", "kcatgroup"); !strings.Contains(d, "TOTAL LAG 0") {
		t.Fatalf("describe kcatgroup:\n%s", d)
	}

	// A reset committed through librdkafka (no subscription) is what the
	// next group consumer starts from.
	out = run(t, time.Minute, "", py, "testdata/confluent_commit.py", b.addr, "pyreset", "lib", "4", "50")
	if lastLine(out) != "committed 4" {
		t.Fatalf("python commit: %s", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(b.client()).ListEndOffsets(ctx, "lib")
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset - 50 })
	if want != 200 {
		t.Fatalf("log ends %v", ends)
	}
	if got := consumeGroup(t, b, "pyreset", "lib", int(want)); int64(len(got)) != want {
		t.Fatalf("after the librdkafka reset consumed %d, want %d", len(got), want)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// A KIP-848 group (kgo's server-side balancer over ConsumerGroupHeartbeat):
// `strata group` describes it through ConsumerGroupDescribe and refuses to
// reset it while it has a member; its commits survive a restart.
func TestGroupKIP848CLI(t *testing.T) {
	b := startBroker(t, "", groupArgs...)
	createTopic(t, b, "next", 2)
	produceAt(t, b, "next", "n", 100, time.Now())
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumerGroup("g848"), kgo.ConsumeTopics("next"),
		kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("next-client"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for deadline := time.Now().Add(20 * time.Second); n < 100 && time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		n += cl.PollFetches(ctx).NumRecords()
		cancel()
	}
	if n != 100 {
		t.Fatalf("KIP-848 consumer read %d of 100", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	d := mustGroup(t, b, "describe", "g848")
	if !strings.Contains(d, "KIP-848") || !strings.Contains(d, "next-client") || !strings.Contains(d, "TOTAL LAG 0") {
		t.Fatalf("describe:\n%s", d)
	}
	if l := mustGroup(t, b, "list"); !strings.Contains(l, "g848") {
		t.Fatalf("list:\n%s", l)
	}
	if _, stderr, err := strataGroup(t, b, "reset-offsets", "g848", "--topic", "next", "--to-earliest", "--execute"); err == nil || !strings.Contains(stderr, "active members") {
		t.Fatalf("reset of a live KIP-848 group: %v %s", err, stderr)
	}
	cl.Close()
	b.restart()
	if s := committedSum(t, b, "g848"); s != 100 {
		t.Fatalf("after restart committed %d, want 100", s)
	}
	// The member left on Close: the group is empty, and can be reset.
	mustGroup(t, b, "reset-offsets", "g848", "--topic", "next", "--to-earliest", "--execute")
	if s := committedSum(t, b, "g848"); s != 0 {
		t.Fatalf("after reset committed %d, want 0", s)
	}
}

// Offsets acknowledged to a committing consumer survive SIGKILL (the
// commit was appended to __consumer_offsets before it was answered).
func TestGroupOffsetsSurviveKill(t *testing.T) {
	b := startBroker(t, "", groupArgs...)
	createTopic(t, b, "k", 2)
	produceAt(t, b, "k", "k", 300, time.Now())
	if got := consumeGroup(t, b, "killed", "k", 300); len(got) != 300 {
		t.Fatalf("consumed %d of 300", len(got))
	}
	b.kill()
	b.start()
	if s := committedSum(t, b, "killed"); s != 300 {
		t.Fatalf("after SIGKILL committed %d, want 300", s)
	}
	if got := consumeGroup(t, b, "killed", "k", 1); len(got) != 0 {
		t.Fatalf("a restarted group consumer re-read %d records", len(got))
	}
}
