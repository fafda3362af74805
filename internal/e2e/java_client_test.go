package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/kafkajars"
)

// Kafka's Java client (4.4.0) against Strata: the program in
// testdata/java/client runs scenarios named on its command line in one JVM
// (four at a time) and prints CHECK lines (measured values) and one RESULT
// line per scenario; the tests below assert on both, and read back what
// the Java producers wrote with franz-go. The Java side asserts too and
// exits non-zero on any failure. Skipped without Java or Kafka's jars,
// failing under CI=true (internal/kafkajars).

// javaScenarios are the scenarios the single-node test runs, in the order
// their results are checked.
var javaScenarios = []string{
	"produce-idempotent", "produce-compression", "txn", "txn-offsets",
	"consumer-classic", "consumer-848", "consumer-pattern-848", "consumer-pattern-classic", "consumer-seek",
	"admin-topics", "admin-configs", "admin-offsets", "admin-elect", "admin-cluster", "admin-reassign",
	"admin-groups", "admin-txn", "admin-group-configs", "share-consumer", "share-admin",
}

// javaBrokerSettings: no initial rebalance delay, and the share suite's
// 2 s record lock (shareSettings) so that the share-consumer scenario's
// RENEWs hold a record past the lock within seconds.
func javaBrokerSettings() []string {
	return append([]string{"--set", "group.initial.rebalance.delay.ms=0"}, shareSettings...)
}

// javaWant is what the CHECK lines must say, per scenario, for a cluster
// of nodes brokers and topics of replication factor rf.
func javaWant(nodes, rf int) map[string]map[string]string {
	w := map[string]map[string]string{
		"produce-idempotent": {"acked": "300", "dense": "true", "read": "300", "distinct": "300"},
		"produce-compression": {"read.none": "100", "read.gzip": "100", "read.snappy": "100",
			"read.lz4": "100", "read.zstd": "100"},
		"txn":         {"read_committed": "20", "read_committed.aborted": "0", "read_uncommitted": "30", "end": "33"},
		"txn-offsets": {"committed": "10", "committed.consumer": "10", "output": "10"},
		"consumer-pattern-848": {"initial": "20", "initial.topics": "-a,-b", "new": "10",
			"new.from_new_topic": "10"},
		"consumer-pattern-classic": {"initial": "20", "initial.topics": "-a,-b", "new": "10",
			"new.from_new_topic": "10"},
		"consumer-seek": {"seek.offset": "42", "seek.value": "seek-42", "seek.timestamp": "42000",
			"position.beginning": "0", "position.end": "100", "beginning": "0", "end": "100",
			"times.offset": "6", "times.timestamp": "6000", "times.after_last": "null",
			"times.before_first": "0", "seek.times.value": "seek-6"},
		"admin-topics": {"validate_only": "ok", "create.again": "TopicExistsException",
			"listed": "true", "listed.validate_only": "false", "partitions": "2",
			"replicas": strconv.Itoa(rf), "isr": strconv.Itoa(rf), "internal": "false",
			"topic_id.set": "true", "partitions.after": "4",
			"partitions.decrease": "InvalidPartitionsException",
			"deleted.describe":    "UnknownTopicOrPartitionException",
			"delete.unknown":      "UnknownTopicOrPartitionException"},
		"admin-configs": {
			"topic.retention.ms":            "3600000/DYNAMIC_TOPIC_CONFIG",
			"topic.retention.ms.set":        "7200000/DYNAMIC_TOPIC_CONFIG",
			"topic.cleanup.policy.append":   "delete,compact/DYNAMIC_TOPIC_CONFIG",
			"topic.max.message.bytes":       "200000/DYNAMIC_TOPIC_CONFIG",
			"topic.retention.ms.delete":     "604800000/DEFAULT_CONFIG",
			"topic.cleanup.policy.subtract": "compact/DYNAMIC_TOPIC_CONFIG",
			"topic.invalid":                 "InvalidConfigurationException",
			"broker.num.partitions":         "1/DEFAULT_CONFIG",
			"broker.set":                    "3600001/DYNAMIC_BROKER_CONFIG",
			"default.set":                   "3600002/DYNAMIC_DEFAULT_BROKER_CONFIG",
			"broker.after_delete":           "3600002/DYNAMIC_DEFAULT_BROKER_CONFIG",
			"broker.after_default_delete":   "86400000/DEFAULT_CONFIG",
			"broker.static":                 "InvalidRequestException",
		},
		"admin-offsets": {"list.earliest": "0", "list.latest": "10", "list.timestamp": "3",
			"list.timestamp.ts": "3000", "list.max_timestamp": "7", "list.max_timestamp.ts": "100000",
			"list.timestamp.after": "-1", "delete.low_watermark": "4", "list.earliest.after_delete": "4",
			"delete.past_end": "OffsetOutOfRangeException", "consume.first_after_delete": "4"},
		"admin-elect": {"preferred.count": "2", "unknown": "UnknownTopicOrPartitionException"},
		"admin-cluster": {"nodes": strconv.Itoa(nodes), "controller.known": "true", "cluster_id.set": "true",
			"feature.transaction.version": "2"},
		"admin-reassign": {"in_progress": "0", "cancel.none": "NoReassignmentInProgressException"},
		"admin-groups": {
			"list.classic":                 "Classic/consumer/Stable",
			"list.consumer":                "Consumer/consumer/Stable",
			"list_consumer_groups.classic": "true",
			"describe.classic":             "Classic/Stable/members=1/assigned=2",
			"describe.consumer":            "Consumer/Stable/members=1/assigned=2/epoch=true",
			"offsets.classic":              "{0=10, 1=10}",
			"offsets.consumer":             "{0=10, 1=10}",
			"delete.non_empty":             "GroupNotEmptyException",
			"alter.non_empty":              "UnknownMemberIdException",
			"removed.state":                "Empty",
			"offsets.altered":              "{0=3, 1=10}",
			"offsets.altered.consumer":     "{0=10, 1=4}",
			"offsets.after_delete":         "{0=3}",
			"deleted.listed":               "false",
			"deleted.describe":             "GroupIdNotFoundException",
			"delete.unknown":               "GroupIdNotFoundException",
		},
		"admin-txn": {"list": "Ongoing", "describe.state": "Ongoing", "describe.timeout": "60000",
			"producers": "1", "producer.matches": "true", "producer.txn_start": "0",
			"lso.open": "0", "lso.aborted": "6",
			"list.latest.read_committed": "0", "list.latest.read_uncommitted": "5", "producer.txn_start.aborted": "-1",
			"read_committed.after_abort": "0"},
		"admin-group-configs": {"group.session": "50000/DYNAMIC_GROUP_CONFIG",
			"group.session.delete": "45000/DEFAULT_CONFIG"},
		"share-consumer": {"lock_ms": "2000", "accepted": "29", "accepted.once": "true", "redelivered": "0",
			"release.delivery_counts": "[1, 2]", "rejected": "1", "renew.renewals": "8",
			"renew.delivery_count": "1", "renew.held_past_lock": "true", "extra": "0"},
		"share-admin": {
			"list.share":               "Share/share/Stable",
			"list.consumer_filter":     "false",
			"describe":                 "Stable/members=1/assigned=2/epoch=true/coordinator=true",
			"offsets":                  "{0=10/0, 1=10/0}",
			"alter.non_empty":          "GroupNotEmptyException",
			"delete_offsets.non_empty": "GroupNotEmptyException",
			"delete.non_empty":         "GroupNotEmptyException",
			"closed.state":             "Empty",
			"offsets.altered":          "{0=4/6, 1=10/0}",
			"reread":                   "{0=[4, 5, 6, 7, 8, 9]}",
			"offsets.reread":           "{0=10/0, 1=10/0}",
			"offsets.after_delete":     "{}",
			"deleted.listed":           "false",
			"deleted.describe":         "GroupIdNotFoundException",
			"delete.unknown":           "GroupIdNotFoundException",
		},
	}
	w["restart-commit"] = map[string]string{"read.classic": "300", "read.consumer": "300"}
	w["restart-resume"] = map[string]string{"resumed.classic": "50", "resumed.classic.old": "0",
		"resumed.consumer": "50", "resumed.consumer.old": "0"}
	for _, proto := range []string{"classic", "848"} {
		w["consumer-"+proto] = map[string]string{"first": "300", "first.distinct": "300",
			"committed.sum": "300", "resumed": "50", "resumed.before_committed": "0",
			"resumed.old": "0", "committed.sum.after": "350"}
	}
	if rf == 1 {
		w["admin-elect"]["preferred"] = "{ElectionNotNeededException=2}"
	}
	if rf >= 3 {
		w["admin-elect"]["reorder.elect"] = "ok"
		w["admin-elect"]["reorder.leader_is_first"] = "true"
		w["admin-elect"]["reorder.records"] = "1"
	}
	if nodes >= 3 {
		w["admin-reassign"]["moved"] = "true"
		w["admin-reassign"]["records"] = "20"
	}
	return w
}

// javaSelected is javaScenarios, or the ones STRATA_JAVA_SCENARIOS names
// (comma-separated), to run a few while working on them.
func javaSelected() []string {
	v := os.Getenv("STRATA_JAVA_SCENARIOS")
	if v == "" {
		return javaScenarios
	}
	return strings.Split(v, ",")
}

var javaClient struct {
	once sync.Once
	cp   string
	err  error
}

// javaClientClasspath compiles testdata/java/client once per test binary
// (into the folder TestMain removes) and returns the classpath to run it.
func javaClientClasspath(t *testing.T) string {
	t.Helper()
	kafkajars.Need(t)
	javaClient.once.Do(func() {
		out := filepath.Join(filepath.Dir(strataBin), "java-client")
		if javaClient.err = os.MkdirAll(out, 0o755); javaClient.err != nil {
			return
		}
		javaClient.cp, javaClient.err = kafkajars.Compile("testdata/java/client", out)
	})
	if javaClient.err != nil {
		t.Fatal(javaClient.err)
	}
	return javaClient.cp
}

// javaResult is one scenario's output.
type javaResult struct {
	ok     bool
	fail   string
	millis string
	checks map[string]string
}

// runJavaClient runs the scenarios in one JVM and returns their results
// (the run's stderr is logged when the test fails).
func runJavaClient(t *testing.T, bootstrap, prefix string, rf int, scenarios []string) map[string]*javaResult {
	t.Helper()
	cp := javaClientClasspath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp,
		"StrataClient", bootstrap, prefix, strconv.Itoa(rf), "4"}
	cmd := exec.CommandContext(ctx, "java", append(args, scenarios...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("java: %d scenarios in %v (exit: %v)", len(scenarios), time.Since(start).Round(time.Millisecond), err)
	out := stdout.String() // the scanner below drains stdout
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("java stdout:\n%s\njava stderr (tail):\n%s", out, tail(stderr.String(), 20000))
		}
	})
	res := map[string]*javaResult{}
	get := func(name string) *javaResult {
		r := res[name]
		if r == nil {
			r = &javaResult{checks: map[string]string{}}
			res[name] = r
		}
		return r
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 4)
		switch {
		case len(f) >= 3 && f[0] == "CHECK":
			kv := strings.SplitN(strings.Join(f[2:], " "), "=", 2)
			if len(kv) == 2 {
				get(f[1]).checks[kv[0]] = kv[1]
			}
		case len(f) >= 3 && f[0] == "RESULT":
			r := get(f[1])
			r.ok = f[2] == "ok"
			if len(f) == 4 {
				if r.ok {
					r.millis = f[3]
				} else {
					r.fail = f[3]
				}
			}
		}
	}
	if err != nil && ctx.Err() != nil {
		t.Errorf("java did not finish within 5 minutes")
	}
	return res
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// checkJava asserts each scenario's RESULT and CHECK lines, one subtest
// per scenario.
func checkJava(t *testing.T, res map[string]*javaResult, scenarios []string, want map[string]map[string]string) {
	t.Helper()
	for _, name := range scenarios {
		t.Run(name, func(t *testing.T) {
			r := res[name]
			if r == nil {
				t.Fatalf("no output from scenario %s", name)
			}
			keys := make([]string, 0, len(want[name]))
			for k := range want[name] {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if got, ok := r.checks[k]; !ok {
					t.Errorf("%s: no %s", name, k)
				} else if got != want[name][k] {
					t.Errorf("%s: %s = %s, want %s", name, k, got, want[name][k])
				}
			}
			if !r.ok {
				t.Errorf("%s failed: %s", name, r.fail)
			} else {
				t.Logf("%s passed in %s ms", name, r.millis)
			}
		})
	}
}

// consumeN reads n records from the start of topic with franz-go.
func consumeN(t *testing.T, seeds []string, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: %d of %d records within 30 s", topic, len(recs), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		recs = append(recs, fs.Records()...)
	}
	return recs
}

// checkJavaWithFranz reads back, with franz-go, what the Java producers
// wrote: the idempotent producer's 300 records, each compression type's
// batches (by their codec) and the committed transactions only.
func checkJavaWithFranz(t *testing.T, seeds []string, prefix string, scenarios []string) {
	ran := map[string]bool{}
	for _, s := range scenarios {
		ran[s] = true
	}
	if !ran["produce-idempotent"] || !ran["produce-compression"] || !ran["txn"] {
		return
	}
	t.Run("franz-go/idempotent", func(t *testing.T) {
		recs := consumeN(t, seeds, prefix+"-idem", 300)
		seen := map[string]bool{}
		for _, r := range recs {
			if r.ProducerID < 0 {
				t.Fatalf("record %s/%d@%d has no producer ID: the Java producer was not idempotent", r.Topic, r.Partition, r.Offset)
			}
			seen[string(r.Value)] = true
		}
		for i := 0; i < 300; i++ {
			if !seen[fmt.Sprintf("idem-%d", i)] {
				t.Fatalf("idem-%d missing (%d records)", i, len(recs))
			}
		}
	})
	t.Run("franz-go/compression", func(t *testing.T) {
		recs := consumeN(t, seeds, prefix+"-comp", 500)
		codecs := []string{"none", "gzip", "snappy", "lz4", "zstd"}
		for i, r := range recs[:500] {
			if r.Offset != int64(i) || !strings.HasPrefix(string(r.Value), fmt.Sprintf("%s-%d ", codecs[i/100], i%100)) {
				t.Fatalf("record %d: offset %d value %.30q", i, r.Offset, r.Value)
			}
			if got := int(r.Attrs.CompressionType()); got != i/100 {
				t.Fatalf("record %d (%s): batch codec %d, want %d", i, codecs[i/100], got, i/100)
			}
		}
	})
	t.Run("franz-go/read_committed", func(t *testing.T) {
		recs := consumeN(t, seeds, prefix+"-txn", 20, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		for _, r := range recs {
			if strings.HasPrefix(string(r.Value), "abort-") {
				t.Fatalf("read_committed returned aborted record %q at %d", r.Value, r.Offset)
			}
		}
		if len(recs) != 20 {
			t.Fatalf("read_committed: %d records, want 20", len(recs))
		}
	})
}

// TestJavaClient runs every Java client scenario against one broker.
func TestJavaClient(t *testing.T) {
	javaClientClasspath(t)
	b := startBroker(t, "", javaBrokerSettings()...)
	scenarios := javaSelected()
	res := runJavaClient(t, b.addr, "j1", 1, scenarios)
	checkJava(t, res, scenarios, javaWant(1, 1))
	checkJavaWithFranz(t, []string{b.addr}, "j1", scenarios)
}

// TestJavaClientRestart: a classic and a consumer (KIP-848) group commit
// with the Java client, the broker restarts, and each group resumes from
// its committed offsets (two JVMs). The broker has few partitions: a
// restart of one holding the whole suite's 142 partitions took 30-48 s to
// be ready at load average 16-20, past the harness's 20 s.
func TestJavaClientRestart(t *testing.T) {
	javaClientClasspath(t)
	b := startBroker(t, "", "--set", "group.initial.rebalance.delay.ms=0",
		"--set", "offsets.topic.num.partitions=3")
	want := javaWant(1, 1)
	res := runJavaClient(t, b.addr, "jr", 1, []string{"restart-commit"})
	checkJava(t, res, []string{"restart-commit"}, want)
	if t.Failed() {
		return
	}
	b.restart()
	res = runJavaClient(t, b.addr, "jr", 1, []string{"restart-resume"})
	checkJava(t, res, []string{"restart-resume"}, want)
}

// TestJavaClientCluster runs the producer, consumer and admin scenarios
// against three brokers with replication factor 3 (and moves a replica).
func TestJavaClientCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: skipped under -short")
	}
	javaClientClasspath(t)
	c := startChaosCluster(t, 3, 2*time.Second, javaBrokerSettings()...)
	scenarios := javaSelected()
	res := runJavaClient(t, strings.Join(c.bootstrap(), ","), "j3", 3, scenarios)
	checkJava(t, res, scenarios, javaWant(3, 3))
	checkJavaWithFranz(t, c.bootstrap(), "j3", scenarios)
}
