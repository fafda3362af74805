package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/kafkajars"
	"github.com/strata-io/strata/internal/testwait"
)

// kafkaTools maps the scripts of Kafka's distribution (bin/<name>.sh) to
// the main classes they run, as of Kafka 4.4.0.
var kafkaTools = map[string]string{
	"kafka-topics":                 "org.apache.kafka.tools.TopicCommand",
	"kafka-configs":                "org.apache.kafka.tools.ConfigCommand",
	"kafka-consumer-groups":        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
	"kafka-console-producer":       "org.apache.kafka.tools.ConsoleProducer",
	"kafka-console-consumer":       "org.apache.kafka.tools.consumer.ConsoleConsumer",
	"kafka-transactions":           "org.apache.kafka.tools.TransactionsCommand",
	"kafka-get-offsets":            "org.apache.kafka.tools.GetOffsetShell",
	"kafka-delete-records":         "org.apache.kafka.tools.DeleteRecordsCommand",
	"kafka-leader-election":        "org.apache.kafka.tools.LeaderElectionCommand",
	"kafka-reassign-partitions":    "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
	"kafka-log-dirs":               "org.apache.kafka.tools.LogDirsCommand",
	"kafka-broker-api-versions":    "org.apache.kafka.tools.BrokerApiVersionsCommand",
	"kafka-features":               "org.apache.kafka.tools.FeatureCommand",
	"kafka-dump-log":               "org.apache.kafka.tools.DumpLogSegments",
	"kafka-share-groups":           "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
	"kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
}

// toolRunner is one JVM running Kafka's command-line tools one call after
// another (testdata/java/toolrunner/ToolRunner.java): a JVM per call would
// cost a second or two of CPU each.
type toolRunner struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader

	mu     sync.Mutex
	stderr *bytes.Buffer // protected by mu: the JVM's own stderr
	done   chan struct{} // closed when the JVM has exited
}

// toolResult is one tool call's outcome.
type toolResult struct {
	Exit   int    `json:"exit"`
	Out    string `json:"out"`
	Err    string `json:"err"`
	Millis int64  `json:"millis"`
}

func (r toolResult) String() string {
	return fmt.Sprintf("exit %d after %d ms\n--- stdout:\n%s--- stderr:\n%s", r.Exit, r.Millis, r.Out, r.Err)
}

// startToolRunner compiles the runner against Kafka's jars and starts its
// JVM, skipping the test where Java or the jars are missing (failing under
// CI). The tools log at WARN so their outputs stay checkable.
func startToolRunner(t *testing.T) *toolRunner {
	t.Helper()
	cp := kafkajars.NeedCompiled(t, filepath.Join("testdata", "java", "toolrunner"))
	cmd := exec.Command("java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", cp, "ToolRunner")
	r := &toolRunner{t: t, cmd: cmd, stderr: new(bytes.Buffer), done: make(chan struct{})}
	var err error
	if r.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.out = bufio.NewReaderSize(stdout, 1<<20)
	cmd.Stderr = &lockedWriter{mu: &r.mu, buf: r.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		r.in.Close()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			r.mu.Lock()
			t.Logf("tool runner's stderr:\n%s", r.stderr.String())
			r.mu.Unlock()
		}
	})
	return r
}

// run calls tool (a key of kafkaTools) with args and stdin, waiting up to
// two minutes: the first call loads the JVM's classes on a loaded machine.
func (r *toolRunner) run(stdin, tool string, args ...string) toolResult {
	r.t.Helper()
	main, ok := kafkaTools[tool]
	if !ok {
		r.t.Fatalf("unknown tool %s", tool)
	}
	line, err := json.Marshal(map[string]any{"main": main, "args": args, "stdin": stdin})
	if err != nil {
		r.t.Fatal(err)
	}
	type reply struct {
		res toolResult
		err error
	}
	ch := make(chan reply, 1)
	go func() {
		if _, err := r.in.Write(append(line, '\n')); err != nil {
			ch <- reply{err: err}
			return
		}
		b, err := r.out.ReadBytes('\n')
		if err != nil {
			ch <- reply{err: err}
			return
		}
		var res toolResult
		ch <- reply{res: res, err: json.Unmarshal(b, &res)}
	}()
	select {
	case rep := <-ch:
		if rep.err != nil {
			r.t.Fatalf("%s %s: tool runner: %v", tool, strings.Join(args, " "), rep.err)
		}
		r.t.Logf("%s %s: exit %d in %d ms", tool, strings.Join(args, " "), rep.res.Exit, rep.res.Millis)
		return rep.res
	case <-time.After(2 * time.Minute):
		r.cmd.Process.Kill()
		r.t.Fatalf("%s %s: no answer within 2 minutes", tool, strings.Join(args, " "))
	}
	return toolResult{}
}

// ok runs a tool that must exit 0 and returns its stdout.
func (r *toolRunner) ok(tool string, args ...string) string {
	r.t.Helper()
	return r.okIn("", tool, args...)
}

// okIn is ok with stdin.
func (r *toolRunner) okIn(stdin, tool string, args ...string) string {
	r.t.Helper()
	res := r.run(stdin, tool, args...)
	if res.Exit != 0 {
		r.t.Fatalf("%s %s: %s", tool, strings.Join(args, " "), res)
	}
	return res.Out
}

// fails runs a tool that must exit non-zero with want in its output.
func (r *toolRunner) fails(want, tool string, args ...string) {
	r.t.Helper()
	res := r.run("", tool, args...)
	if res.Exit == 0 || !strings.Contains(res.Out+res.Err, want) {
		r.t.Fatalf("%s %s: want a failure saying %q, got %s", tool, strings.Join(args, " "), want, res)
	}
}

// wantLines fails unless every want is a substring of some line of out.
func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("%s: output lacks %q:\n%s", what, w, out)
		}
	}
}

// with returns base followed by more, in a new slice.
func with(base []string, more ...string) []string {
	return append(append([]string(nil), base...), more...)
}

// waitTool polls a tool until its stdout contains want, for up to 30 s.
func (r *toolRunner) waitTool(want, tool string, args ...string) string {
	r.t.Helper()
	var last toolResult
	if !testwait.Until(30*time.Second, func() bool {
		last = r.run("", tool, args...)
		return last.Exit == 0 && strings.Contains(last.Out, want)
	}) {
		r.t.Fatalf("%s %s: never printed %q; last: %s", tool, strings.Join(args, " "), want, last)
	}
	return last.Out
}

// TestKafkaTools runs Kafka 4.4.0's command-line tools, from its jars and
// by their main classes, against one Strata broker: each call is checked
// for its output and exit code.
func TestKafkaTools(t *testing.T) {
	r := startToolRunner(t)
	b := startBroker(t, "", txnBrokerArgs...)
	bs := []string{"--bootstrap-server", b.addr}
	cl := b.client()

	t.Run("kafka-topics", func(t *testing.T) {
		r.t = t
		wantLines(t, "create", r.ok("kafka-topics", append(bs, "--create", "--topic", "tools-topics", "--partitions", "3",
			"--replication-factor", "1", "--config", "retention.ms=86400000")...), "Created topic tools-topics.")
		r.fails("Topic 'tools-topics' already exists", "kafka-topics", append(bs, "--create", "--topic", "tools-topics", "--partitions", "1")...)
		out := r.ok("kafka-topics", append(bs, "--describe", "--topic", "tools-topics")...)
		wantLines(t, "describe", out, "Topic: tools-topics\tTopicId: ", "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=86400000")
		for p := 0; p < 3; p++ {
			wantLines(t, "describe", out, fmt.Sprintf("\tTopic: tools-topics\tPartition: %d\tLeader: 1\tReplicas: 1\tIsr: 1", p))
		}
		r.ok("kafka-topics", append(bs, "--alter", "--topic", "tools-topics", "--partitions", "5")...)
		out = r.ok("kafka-topics", append(bs, "--describe", "--topic", "tools-topics")...)
		wantLines(t, "describe after alter", out, "\tPartitionCount: 5\t", "\tTopic: tools-topics\tPartition: 4\tLeader: 1\tReplicas: 1\tIsr: 1")
		r.fails("InvalidPartitionsException", "kafka-topics",
			append(bs, "--alter", "--topic", "tools-topics", "--partitions", "2")...)
		r.ok("kafka-topics", append(bs, "--create", "--topic", "tools-doomed", "--partitions", "1")...)
		wantLines(t, "list", r.ok("kafka-topics", append(bs, "--list")...), "tools-topics\n", "tools-doomed\n")
		r.ok("kafka-topics", append(bs, "--delete", "--topic", "tools-doomed")...)
		if !testwait.Until(30*time.Second, func() bool {
			out = r.ok("kafka-topics", append(bs, "--list")...)
			return !strings.Contains(out, "tools-doomed")
		}) {
			t.Fatalf("tools-doomed still listed 30 s after --delete:\n%s", out)
		}
		r.fails("Topic 'tools-doomed' does not exist as expected", "kafka-topics", append(bs, "--describe", "--topic", "tools-doomed")...)
	})

	t.Run("kafka-configs", func(t *testing.T) {
		r.t = t
		cfg := with(bs, "--entity-type", "topics", "--entity-name", "tools-topics")
		wantLines(t, "alter topic", r.ok("kafka-configs", append(cfg, "--alter", "--add-config", "retention.ms=3600000,cleanup.policy=compact")...),
			"Completed updating config for topic tools-topics.")
		wantLines(t, "describe topic", r.ok("kafka-configs", append(cfg, "--describe")...),
			"Dynamic configs for topic tools-topics are:",
			"  cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, DEFAULT_CONFIG:log.cleanup.policy=delete}",
			"  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000, DEFAULT_CONFIG:log.retention.hours=168}")
		r.ok("kafka-configs", append(cfg, "--alter", "--delete-config", "cleanup.policy")...)
		if out := r.ok("kafka-configs", append(cfg, "--describe")...); strings.Contains(out, "cleanup.policy") {
			t.Fatalf("cleanup.policy still set after --delete-config:\n%s", out)
		}
		r.fails("InvalidConfigurationException", "kafka-configs", append(cfg, "--alter", "--add-config", "retention.ms=abc")...)

		broker := with(bs, "--entity-type", "brokers", "--entity-name", "1")
		wantLines(t, "alter broker", r.ok("kafka-configs", append(broker, "--alter", "--add-config", "log.retention.ms=300000")...),
			"Completed updating config for broker 1.")
		wantLines(t, "describe broker", r.ok("kafka-configs", append(broker, "--describe")...),
			"Dynamic configs for broker 1 are:",
			"  log.retention.ms=300000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=300000, DEFAULT_CONFIG:log.retention.hours=168}")
		deflt := with(bs, "--entity-type", "brokers", "--entity-default")
		wantLines(t, "alter cluster default", r.ok("kafka-configs", append(deflt, "--alter", "--add-config", "log.segment.bytes=1048576")...),
			"Completed updating default config for brokers in the cluster.")
		wantLines(t, "describe cluster default", r.ok("kafka-configs", append(deflt, "--describe")...),
			"Default configs for brokers in the cluster are:",
			"  log.segment.bytes=1048576 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=1048576, DEFAULT_CONFIG:log.segment.bytes=1073741824}")
		wantLines(t, "describe broker --all", r.ok("kafka-configs", append(broker, "--describe", "--all")...),
			"All configs for broker 1 are:",
			"  log.segment.bytes=1048576 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=1048576, DEFAULT_CONFIG:log.segment.bytes=1073741824}",
			"  num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}")
		r.ok("kafka-configs", append(broker, "--alter", "--delete-config", "log.retention.ms")...)
		r.ok("kafka-configs", append(deflt, "--alter", "--delete-config", "log.segment.bytes")...)
		if out := r.ok("kafka-configs", append(broker, "--describe")...); strings.Contains(out, "log.retention.ms") {
			t.Fatalf("log.retention.ms still set after --delete-config:\n%s", out)
		}
	})

	t.Run("console-producer-consumer", func(t *testing.T) {
		r.t = t
		r.ok("kafka-topics", append(bs, "--create", "--topic", "tools-console", "--partitions", "1")...)
		var in, want strings.Builder
		for i := 0; i < 100; i++ {
			fmt.Fprintf(&in, "k%d:value %d\n", i, i)
			fmt.Fprintf(&want, "Offset:%d\tk%d\tvalue %d\n", i, i, i)
		}
		r.okIn(in.String(), "kafka-console-producer", append(bs, "--topic", "tools-console", "--compression-codec", "zstd",
			"--reader-property", "parse.key=true", "--reader-property", "key.separator=:")...)
		res := r.run("", "kafka-console-consumer", append(bs, "--topic", "tools-console", "--from-beginning", "--max-messages", "100",
			"--formatter-property", "print.key=true", "--formatter-property", "print.offset=true")...)
		if res.Exit != 0 || res.Out != want.String() || !strings.Contains(res.Err, "Processed a total of 100 messages") {
			t.Fatalf("console consumer: want the 100 records in order; got %s", res)
		}
	})

	t.Run("kafka-consumer-groups", func(t *testing.T) {
		r.t = t
		// The mission's replay: a group reads a topic, then Kafka's own tool
		// resets its offsets (to the earliest, to a time, by a shift) and a
		// consumer of the group reads again from exactly there.
		r.ok("kafka-topics", append(bs, "--create", "--topic", "tools-replay", "--partitions", "1")...)
		base := time.Now().Add(-time.Hour).Truncate(time.Second)
		produce := func(from, to int) {
			for i := from; i < to; i++ {
				rec := &kgo.Record{Topic: "tools-replay", Value: []byte(fmt.Sprintf("r%02d", i)), Timestamp: base.Add(time.Duration(i) * time.Minute)}
				if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
		consume := func(n int, extra ...string) []string {
			t.Helper()
			res := r.run("", "kafka-console-consumer", append(append(bs, "--topic", "tools-replay", "--group", "replay",
				"--max-messages", strconv.Itoa(n), "--formatter-property", "print.offset=true"), extra...)...)
			if res.Exit != 0 {
				t.Fatalf("console consumer: %s", res)
			}
			return strings.Split(strings.TrimSuffix(res.Out, "\n"), "\n")
		}
		wantRead := func(got []string, from, n int) {
			t.Helper()
			var want []string
			for i := from; i < from+n; i++ {
				want = append(want, fmt.Sprintf("Offset:%d\tr%02d", i, i))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("consumer read\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
		group := with(bs, "--group", "replay")
		// describeRow returns the group's row for partition 0: CURRENT-OFFSET,
		// LOG-END-OFFSET, LAG.
		describeRow := func() []string {
			t.Helper()
			out := r.ok("kafka-consumer-groups", append(group, "--describe")...)
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) >= 6 && f[0] == "replay" && f[1] == "tools-replay" && f[2] == "0" {
					return f[3:6]
				}
			}
			t.Fatalf("no row for tools-replay 0:\n%s", out)
			return nil
		}
		reset := func(newOffset int, how ...string) {
			t.Helper()
			out := r.ok("kafka-consumer-groups", append(append(group, "--reset-offsets", "--topic", "tools-replay"), append(how, "--execute")...)...)
			wantLines(t, "reset "+strings.Join(how, " "), out, "GROUP", "NEW-OFFSET")
			if !regexp.MustCompile(`(?m)^replay\s+tools-replay\s+0\s+` + strconv.Itoa(newOffset) + `\s*$`).MatchString(out) {
				t.Fatalf("reset %s: want new offset %d:\n%s", strings.Join(how, " "), newOffset, out)
			}
		}

		produce(0, 20)
		wantRead(consume(20, "--from-beginning"), 0, 20)
		wantLines(t, "list", r.ok("kafka-consumer-groups", append(bs, "--list")...), "replay\n")
		produce(20, 25)
		if got := strings.Join(describeRow(), " "); got != "20 25 5" {
			t.Fatalf("describe: CURRENT-OFFSET LOG-END-OFFSET LAG = %s, want 20 25 5", got)
		}
		wantLines(t, "describe --state", r.ok("kafka-consumer-groups", append(group, "--describe", "--state")...), "Empty")

		reset(0, "--to-earliest")
		wantRead(consume(25), 0, 25)
		if got := strings.Join(describeRow(), " "); got != "25 25 0" {
			t.Fatalf("describe after re-reading: %s, want 25 25 0", got)
		}
		at := base.Add(10 * time.Minute).UTC().Format("2006-01-02T15:04:05.000Z")
		reset(10, "--to-datetime", at)
		wantRead(consume(3), 10, 3)
		reset(8, "--shift-by", "-5")
		// The KIP-848 consumer protocol resumes from the reset offset too.
		wantRead(consume(4, "--command-property", "group.protocol=consumer"), 8, 4)
		if got := strings.Join(describeRow(), " "); got != "12 25 13" {
			t.Fatalf("describe after the KIP-848 consumer: %s, want 12 25 13", got)
		}
		// A dry run shows the plan and changes nothing.
		out := r.ok("kafka-consumer-groups", append(group, "--reset-offsets", "--topic", "tools-replay", "--to-latest", "--dry-run")...)
		if !strings.Contains(out, "25") || strings.Join(describeRow(), " ") != "12 25 13" {
			t.Fatalf("dry run: %s", out)
		}
		// Kafka's tool reports a missing group and still exits 0.
		wantLines(t, "describe a missing group", r.ok("kafka-consumer-groups", append(bs, "--describe", "--group", "no-such-group")...),
			"Error: Executing consumer group command failed due to org.apache.kafka.common.errors.GroupIdNotFoundException: Group no-such-group not found.")
	})

	t.Run("kafka-get-offsets-and-delete-records", func(t *testing.T) {
		r.t = t
		off := func(time string) string {
			return strings.TrimSpace(r.ok("kafka-get-offsets", append(bs, "--topic", "tools-replay", "--time", time)...))
		}
		for tm, want := range map[string]string{"-1": "tools-replay:0:25", "latest": "tools-replay:0:25", "-2": "tools-replay:0:0", "-3": "tools-replay:0:24"} {
			if got := off(tm); got != want {
				t.Fatalf("--time %s: %q, want %q", tm, got, want)
			}
		}
		// By timestamp: the first record at or after it.
		ts := time.Now().Add(-time.Hour).Truncate(time.Second).Add(-time.Hour)
		if got := off(strconv.FormatInt(ts.UnixMilli(), 10)); got != "tools-replay:0:0" {
			t.Fatalf("--time an hour before the first record: %q", got)
		}
		if got := off(strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)); got != "tools-replay:0" && got != "tools-replay:0:" && got != "" {
			// Kafka prints nothing for a partition with no such offset.
			t.Fatalf("--time in the future: %q, want nothing", got)
		}
		file := filepath.Join(t.TempDir(), "delete.json")
		os.WriteFile(file, []byte(`{"version":1,"partitions":[{"topic":"tools-replay","partition":0,"offset":5}]}`), 0o644)
		wantLines(t, "delete-records", r.ok("kafka-delete-records", append(bs, "--offset-json-file", file)...),
			"Records delete operation completed:", "partition: tools-replay-0\tlow_watermark: 5")
		if got := off("-2"); got != "tools-replay:0:5" {
			t.Fatalf("earliest after delete-records: %q", got)
		}
		os.WriteFile(file, []byte(`{"version":1,"partitions":[{"topic":"tools-replay","partition":0,"offset":99}]}`), 0o644)
		res := r.run("", "kafka-delete-records", append(bs, "--offset-json-file", file)...)
		if !strings.Contains(res.Out, "partition: tools-replay-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException") {
			t.Fatalf("delete-records beyond the end: %s", res)
		}
	})

	t.Run("kafka-transactions", func(t *testing.T) {
		r.t = t
		r.ok("kafka-topics", append(bs, "--create", "--topic", "tools-txn", "--partitions", "1")...)
		txn := b.client(kgo.TransactionalID("tools-txn"), kgo.TransactionTimeout(time.Minute))
		ctx := context.Background()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "tools-txn", Value: []byte("open")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		out := r.ok("kafka-transactions", append(bs, "list")...)
		row := regexp.MustCompile(`(?m)^tools-txn\s+1\s+(\d+)\s+Ongoing\s*$`).FindStringSubmatch(out)
		if row == nil {
			t.Fatalf("list: no Ongoing tools-txn:\n%s", out)
		}
		pid := row[1]
		out = r.ok("kafka-transactions", append(bs, "describe", "--transactional-id", "tools-txn")...)
		wantLines(t, "describe", out, "CoordinatorId", "TransactionState", "Ongoing", "tools-txn-0", pid)
		out = r.ok("kafka-transactions", append(bs, "describe-producers", "--topic", "tools-txn", "--partition", "0")...)
		// ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence
		// LastTimestamp CurrentTransactionStartOffset: the open transaction
		// starts at offset 0 and no marker has been written yet.
		wantLines(t, "describe-producers", out, "ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\tCurrentTransactionStartOffset")
		if !regexp.MustCompile(`(?m)^` + pid + `\s+0\s+-1\s+0\s+\d+\s+0\s*$`).MatchString(out) {
			t.Fatalf("describe-producers: want producer %s, epoch 0, sequence 0, transaction from offset 0:\n%s", pid, out)
		}
		wantLines(t, "find-hanging", r.ok("kafka-transactions", append(bs, "find-hanging", "--broker-id", "1")...), "Topic")
		if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		r.waitTool("CompleteCommit", "kafka-transactions", append(bs, "describe", "--transactional-id", "tools-txn")...)
		r.fails("`no-such-txn` failed because the ID could not be found", "kafka-transactions", append(bs, "describe", "--transactional-id", "no-such-txn")...)
	})

	t.Run("kafka-leader-election", func(t *testing.T) {
		r.t = t
		// One replica each: nothing to elect, which is not an error.
		if out := r.ok("kafka-leader-election", append(bs, "--election-type", "preferred", "--all-topic-partitions")...); strings.TrimSpace(out) != "" {
			t.Fatalf("all partitions: want no output, got:\n%s", out)
		}
		wantLines(t, "one partition", r.ok("kafka-leader-election", append(bs, "--election-type", "preferred", "--topic", "tools-console", "--partition", "0")...),
			"Valid replica already elected for partitions tools-console-0")
		r.fails("UnknownTopicOrPartitionException", "kafka-leader-election", append(bs, "--election-type", "unclean", "--topic", "no-such-topic", "--partition", "0")...)
	})

	t.Run("kafka-log-dirs", func(t *testing.T) {
		r.t = t
		out := r.ok("kafka-log-dirs", append(bs, "--describe", "--topic-list", "tools-console,tools-replay")...)
		wantLines(t, "log-dirs", out, "Querying brokers for log directories information", "Received log directory information from brokers 1")
		var doc struct {
			Brokers []struct {
				Broker  int
				LogDirs []struct {
					LogDir     string
					Error      *string
					Partitions []struct {
						Partition string
						Size      int64
						OffsetLag int64
						IsFuture  bool
					}
				}
			}
		}
		js := out[strings.Index(out, "{"):]
		if err := json.Unmarshal([]byte(js), &doc); err != nil {
			t.Fatalf("log-dirs JSON: %v\n%s", err, out)
		}
		if len(doc.Brokers) != 1 || doc.Brokers[0].Broker != 1 || len(doc.Brokers[0].LogDirs) != 1 {
			t.Fatalf("log-dirs: want broker 1 with one log dir:\n%s", out)
		}
		ld := doc.Brokers[0].LogDirs[0]
		if ld.LogDir != b.dataDir || ld.Error != nil {
			t.Fatalf("log dir %q (error %v), want %q", ld.LogDir, ld.Error, b.dataDir)
		}
		var parts []string
		for _, p := range ld.Partitions {
			if p.Size <= 0 || p.OffsetLag != 0 || p.IsFuture {
				t.Fatalf("partition %+v", p)
			}
			parts = append(parts, p.Partition)
		}
		sort.Strings(parts)
		if strings.Join(parts, ",") != "tools-console-0,tools-replay-0" {
			t.Fatalf("log-dirs partitions %v", parts)
		}
	})

	t.Run("kafka-broker-api-versions", func(t *testing.T) {
		r.t = t
		out := r.ok("kafka-broker-api-versions", bs...)
		wantLines(t, "api versions", out, b.addr+" (id: 1 rack: null isFenced: false) -> (")
		// Every API the broker advertises is listed with its range and
		// usable; every other one is UNSUPPORTED.
		resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		served := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			served[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		line := regexp.MustCompile(`^\t\w+\((\d+)\): (.*?),?$`)
		seen := 0
		for _, l := range strings.Split(out, "\n") {
			m := line.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			key := int16(atoi(t, m[1]))
			rng, ok := served[key]
			switch {
			case !ok && m[2] != "UNSUPPORTED":
				t.Fatalf("key %d is not served but listed as %q", key, m[2])
			case ok && rng[0] == rng[1] && !strings.HasPrefix(m[2], fmt.Sprintf("%d [usable: ", rng[0])):
				t.Fatalf("key %d: %q, want %d", key, m[2], rng[0])
			case ok && rng[0] != rng[1] && !strings.HasPrefix(m[2], fmt.Sprintf("%d to %d [usable: ", rng[0], rng[1])):
				t.Fatalf("key %d: %q, want %d to %d", key, m[2], rng[0], rng[1])
			}
			if ok {
				seen++
			}
		}
		if seen != len(served) {
			t.Fatalf("%d of the %d served keys listed:\n%s", seen, len(served), out)
		}
	})

	t.Run("kafka-features", func(t *testing.T) {
		r.t = t
		out := r.ok("kafka-features", append(bs, "describe")...)
		if !regexp.MustCompile(`Feature: transaction.version\s+SupportedMinVersion: 0\s+SupportedMaxVersion: 2\s+FinalizedVersionLevel: 2\s+Epoch: \d+`).MatchString(out) {
			t.Fatalf("features:\n%s", out)
		}
		// A downgrade and an upgrade (UpdateFeatures), each seen by describe.
		for _, step := range []struct{ verb, level string }{{"downgrade", "1"}, {"upgrade", "2"}} {
			out := r.ok("kafka-features", append(bs, step.verb, "--feature", "transaction.version="+step.level)...)
			wantLines(t, "kafka-features "+step.verb, out, "transaction.version was "+step.verb+"d to "+step.level+".")
			level := regexp.MustCompile(`Feature: transaction.version\s.*FinalizedVersionLevel: ` + step.level + `\s`)
			deadline := time.Now().Add(30 * time.Second)
			for out := ""; !level.MatchString(out); out = r.ok("kafka-features", append(bs, "describe")...) {
				if time.Now().After(deadline) {
					t.Fatalf("describe never showed transaction.version at %s:\n%s", step.level, out)
				}
			}
		}
	})

	t.Run("kafka-share-groups", func(t *testing.T) {
		r.t = t
		// A queue read with Kafka's console share consumer, then replayed:
		// kafka-share-groups resets the group to the earliest offset and
		// the records come again (rejected this time, so archived).
		r.ok("kafka-topics", append(bs, "--create", "--topic", "tools-share", "--partitions", "1")...)
		r.okIn("j0\nj1\nj2\nj3\nj4\n", "kafka-console-producer", append(bs, "--topic", "tools-share")...)
		wantLines(t, "group config", r.ok("kafka-configs", append(bs, "--entity-type", "groups", "--entity-name", "tools-sg",
			"--alter", "--add-config", "share.auto.offset.reset=earliest")...), "Completed updating config for group tools-sg.")
		share := func(extra ...string) {
			t.Helper()
			res := r.run("", "kafka-console-share-consumer", append(append(bs, "--topic", "tools-share", "--group", "tools-sg",
				"--max-messages", "5", "--timeout-ms", "30000"), extra...)...)
			if res.Exit != 0 || res.Out != "j0\nj1\nj2\nj3\nj4\n" || !strings.Contains(res.Err, "Processed a total of 5 messages") {
				t.Fatalf("console share consumer %v: want j0..j4; got %s", extra, res)
			}
		}
		// describeShare waits until the group's row reads START-OFFSET LAG.
		describeShare := func(want string) {
			t.Helper()
			row := regexp.MustCompile(`(?m)^tools-sg\s+tools-share\s+0\s+` + want + `\s*$`)
			var out string
			if !testwait.Until(30*time.Second, func() bool {
				out = r.ok("kafka-share-groups", append(bs, "--describe", "--group", "tools-sg")...)
				return row.MatchString(out)
			}) {
				t.Fatalf("kafka-share-groups --describe never showed START-OFFSET LAG %q:\n%s", want, out)
			}
		}
		share()
		wantLines(t, "list", r.ok("kafka-share-groups", append(bs, "--list")...), "tools-sg\n")
		describeShare(`5\s+0`)
		wantLines(t, "state", r.ok("kafka-share-groups", append(bs, "--describe", "--group", "tools-sg", "--state")...), "Empty")
		out := r.ok("kafka-share-groups", append(bs, "--reset-offsets", "--group", "tools-sg", "--topic", "tools-share", "--to-earliest", "--execute")...)
		if !regexp.MustCompile(`(?m)^tools-sg\s+tools-share\s+0\s+0\s*$`).MatchString(out) {
			t.Fatalf("reset to earliest: %s", out)
		}
		describeShare(`0\s+5`)
		share("--reject")
		describeShare(`5\s+0`)
	})

	t.Run("kafka-dump-log", func(t *testing.T) {
		r.t = t
		testDumpLog(t, r, b, cl, bs)
	})
}

// testDumpLog checks Strata's segment files with Kafka's own reader
// (kafka-dump-log): the on-disk format is Kafka's. Small segments and a
// small index interval give several sealed segments with index entries;
// the batches cycle through every compression codec.
func testDumpLog(t *testing.T, r *toolRunner, b *broker, cl *kgo.Client, bs []string) {
	// kafka-topics refuses segments under 1 MiB itself (Kafka's minimum);
	// Strata's is 14 bytes, so the topic is made with franz-go.
	seg, ix := "4096", "256"
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1,
		map[string]*string{"segment.bytes": &seg, "index.interval.bytes": &ix}, "tools-dump"); err != nil {
		t.Fatal(err)
	}
	codecNames := []string{"none", "gzip", "snappy", "lz4", "zstd"}
	var producers []*kgo.Client
	for _, c := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		producers = append(producers, b.client(kgo.ProducerBatchCompression(c)))
	}
	const n = 60
	for i := 0; i < n; i++ {
		p := producers[i%len(producers)]
		rec := &kgo.Record{Topic: "tools-dump", Key: []byte(fmt.Sprintf("key-%03d", i)), Value: []byte(fmt.Sprintf("payload-%03d-%s", i, strings.Repeat("x", 400)))}
		if err := p.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(b.dataDir, "tools-dump-0")
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) < 3 {
		t.Fatalf("want several segments in %s, got %v (%v)", dir, logs, err)
	}
	sort.Strings(logs)
	record := regexp.MustCompile(`(?m)^\| offset: (\d+) CreateTime: \d+ keySize: 7 valueSize: 412 sequence: \d+ headerKeys: \[\] key: (key-\d{3}) payload: (payload-\d{3})-x{400}$`)
	next := 0
	codecs := map[string]bool{}
	var first string // the first segment's dump, for a failure message
	for i, lg := range logs {
		out := r.ok("kafka-dump-log", "--files", lg, "--deep-iteration", "--print-data-log")
		if i == 0 {
			first = out
		}
		if strings.Contains(out, "isvalid: false") {
			t.Fatalf("%s: invalid batch:\n%s", lg, out)
		}
		for _, c := range regexp.MustCompile(`compresscodec: (\w+)`).FindAllStringSubmatch(out, -1) {
			codecs[c[1]] = true
		}
		for _, m := range record.FindAllStringSubmatch(out, -1) {
			if want := fmt.Sprintf("%d key-%03d payload-%03d", next, next, next); m[1]+" "+m[2]+" "+m[3] != want {
				t.Fatalf("%s: record %q, want %q", lg, m[0], want)
			}
			next++
		}
		if i == len(logs)-1 {
			break // the active segment's indexes are preallocated, as Kafka's are
		}
		// A sealed segment's indexes are trimmed and every entry points at
		// a batch ending at that offset (Kafka checks it and says
		// "Mismatches" otherwise).
		stem := strings.TrimSuffix(lg, ".log")
		res := r.run("", "kafka-dump-log", "--files", stem+".index,"+stem+".timeindex")
		if res.Exit != 0 || strings.Contains(res.Out+res.Err, "Mismatches") || strings.Contains(res.Out+res.Err, "not found") ||
			!strings.Contains(res.Out, "offset: ") || !strings.Contains(res.Out, "timestamp: ") {
			t.Fatalf("%s indexes: %s", stem, res)
		}
		res = r.run("", "kafka-dump-log", "--files", stem+".index", "--verify-index-only")
		if res.Exit != 0 || strings.Contains(res.Out+res.Err, "Mismatches") {
			t.Fatalf("%s --verify-index-only: %s", stem, res)
		}
	}
	if next != n {
		t.Fatalf("kafka-dump-log read %d records across %d segments, want %d; the first segment:\n%s", next, len(logs), n, first)
	}
	for _, c := range codecNames {
		if !codecs[c] {
			t.Fatalf("codecs seen %v, want %v", codecs, codecNames)
		}
	}
}

// TestKafkaToolsCluster runs the tools that move replicas and leaders on
// three brokers: kafka-reassign-partitions (generate, execute, verify),
// then kafka-leader-election (preferred), kafka-log-dirs and
// kafka-broker-api-versions across the cluster. Not in -short.
func TestKafkaToolsCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three brokers: not in -short")
	}
	r := startToolRunner(t)
	c := startChaosCluster(t, 3, 500*time.Millisecond)
	bs := []string{"--bootstrap-server", strings.Join(c.bootstrap(), ",")}
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// partitionLine returns kafka-topics --describe's line for a partition.
	partitionLine := func(p int) string {
		out := r.ok("kafka-topics", with(bs, "--describe", "--topic", "tools-move")...)
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, fmt.Sprintf("\tPartition: %d\t", p)) {
				return l
			}
		}
		t.Fatalf("no partition %d in:\n%s", p, out)
		return ""
	}
	waitLine := func(p int, want ...string) {
		t.Helper()
		var l string
		if !testwait.Until(60*time.Second, func() bool {
			l = partitionLine(p)
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(l, w)
			}
			return ok
		}) {
			t.Fatalf("partition %d never showed %q: %s", p, want, l)
		}
	}

	// Two partitions with one replica each, on broker 1.
	r.ok("kafka-topics", with(bs, "--create", "--topic", "tools-move", "--replica-assignment", "1,1")...)
	waitLine(0, "Leader: 1\t")
	waitLine(1, "Leader: 1\t")
	var in strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&in, "%d:m%02d\n", i%2, i)
	}
	r.okIn(in.String(), "kafka-console-producer", with(bs, "--topic", "tools-move", "--reader-property", "parse.key=true",
		"--reader-property", "key.separator=:", "--producer-property", "acks=all")...)

	out := r.ok("kafka-reassign-partitions", with(bs, "--generate", "--broker-list", "1,2,3",
		"--topics-to-move-json-file", file("move.json", `{"version":1,"topics":[{"topic":"tools-move"}]}`))...)
	wantLines(t, "generate", out, "Current partition replica assignment", `{"topic":"tools-move","partition":0,"replicas":[1]`,
		"Proposed partition reassignment configuration")

	plan := file("plan.json", `{"version":1,"partitions":[`+
		`{"topic":"tools-move","partition":0,"replicas":[2,3],"log_dirs":["any","any"]},`+
		`{"topic":"tools-move","partition":1,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}`)
	wantLines(t, "execute", r.ok("kafka-reassign-partitions", with(bs, "--execute", "--reassignment-json-file", plan)...),
		"Successfully started partition reassignments for tools-move-0,tools-move-1")
	verify := func(plan string, parts ...int) {
		t.Helper()
		var res toolResult
		if !testwait.Until(90*time.Second, func() bool {
			res = r.run("", "kafka-reassign-partitions", with(bs, "--verify", "--reassignment-json-file", plan)...)
			done := res.Exit == 0
			for _, p := range parts {
				done = done && strings.Contains(res.Out, fmt.Sprintf("Reassignment of partition tools-move-%d is completed.", p))
			}
			return done
		}) {
			t.Fatalf("reassignment never completed: %s", res)
		}
	}
	verify(plan, 0, 1)
	waitLine(0, "\tReplicas: 2,3\t")
	waitLine(1, "\tReplicas: 1,2,3\t")

	// Every record is still there, read through the new replicas.
	res := r.run("", "kafka-console-consumer", with(bs, "--topic", "tools-move", "--from-beginning", "--max-messages", "40",
		"--formatter-property", "print.partition=true")...)
	if res.Exit != 0 || strings.Count(res.Out, "Partition:0\t") != 20 || strings.Count(res.Out, "Partition:1\t") != 20 {
		t.Fatalf("console consumer after the reassignment: %s", res)
	}

	// Preferred election puts a partition's leader on its first replica:
	// reorder partition 0's replicas so that the preferred one is the
	// replica not leading it now, then elect.
	var leader int
	if _, err := fmt.Sscanf(partitionLine(0)[strings.Index(partitionLine(0), "Leader: "):], "Leader: %d", &leader); err != nil {
		t.Fatal(err)
	}
	preferred := 5 - leader // the other one of 2 and 3
	reorder := file("reorder.json", fmt.Sprintf(`{"version":1,"partitions":[{"topic":"tools-move","partition":0,"replicas":[%d,%d]}]}`, preferred, leader))
	r.ok("kafka-reassign-partitions", with(bs, "--execute", "--reassignment-json-file", reorder)...)
	verify(reorder, 0)
	waitLine(0, fmt.Sprintf("\tReplicas: %d,%d\t", preferred, leader))
	out = r.ok("kafka-leader-election", with(bs, "--election-type", "preferred", "--topic", "tools-move", "--partition", "0")...)
	if !strings.Contains(out, "Successfully completed leader election (PREFERRED) for partitions tools-move-0") &&
		!strings.Contains(out, "Valid replica already elected for partitions tools-move-0") {
		t.Fatalf("leader election: %s", out)
	}
	waitLine(0, fmt.Sprintf("\tLeader: %d\t", preferred))
	// Then every partition (__consumer_offsets' too, whose leaders are
	// where their elections fell): once all leaders are preferred, there
	// is nothing to elect and nothing is printed.
	all := with(bs, "--election-type", "preferred", "--all-topic-partitions")
	if out := r.ok("kafka-leader-election", all...); out != "" && !strings.HasPrefix(out, "Successfully completed leader election (PREFERRED) for partitions ") {
		t.Fatalf("all partitions: %s", out)
	}
	if !testwait.Until(30*time.Second, func() bool {
		out = r.ok("kafka-leader-election", all...)
		return strings.TrimSpace(out) == ""
	}) {
		t.Fatalf("all partitions, 30 s after electing the preferred leaders: want no output, got:\n%s", out)
	}

	wantLines(t, "log-dirs", r.ok("kafka-log-dirs", with(bs, "--describe", "--topic-list", "tools-move")...),
		"Received log directory information from brokers 1,2,3", `"partition":"tools-move-0"`, `"partition":"tools-move-1"`)
	out = r.ok("kafka-broker-api-versions", bs...)
	for _, n := range c.nodes {
		wantLines(t, "api versions", out, fmt.Sprintf("%s (id: %d rack: null isFenced: false) -> (", n.kafka, n.id))
	}
}
