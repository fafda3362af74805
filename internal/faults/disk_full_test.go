package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

// Disk full on real `strata serve` processes (issue 19 item 7): the
// injected disk=enospc fails what needs new space with ENOSPC and makes
// the free-space check read 0 usable bytes, as a file system that has
// filled up does (cmd/strata/faultinject.go). Both tests use the
// loopback network (no namespaces needed).

// startDiskCluster starts n brokers with fault-injection files and waits
// until they answer.
func startDiskCluster(t *testing.T, n int) *cluster {
	t.Helper()
	nw, err := newLoopback(n)
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(strataBin, t.TempDir(), nw, n, 500*time.Millisecond, nil)
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.kill()
		}
		nw.close()
		if t.Failed() {
			for _, nd := range c.nodes {
				b, _ := os.ReadFile(nd.log)
				if len(b) > 12000 {
					b = b[len(b)-12000:]
				}
				t.Logf("broker %d log (tail):\n%s", nd.id, b)
			}
		}
	})
	for _, nd := range c.nodes {
		if err := nd.start(strataBin); err != nil {
			t.Fatal(err)
		}
	}
	for _, nd := range c.nodes {
		if err := nd.waitReady(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// noPanics fails the test on a panic or fatal error in any broker's log.
func noPanics(t *testing.T, c *cluster) {
	t.Helper()
	for _, nd := range c.nodes {
		for _, l := range nd.logLines("panic:", "fatal error:", "goroutine ") {
			t.Errorf("%s", l)
		}
	}
}

// logHas reports whether node's log holds a line containing s.
func logHas(nd *node, s string) bool {
	b, _ := os.ReadFile(nd.log)
	return strings.Contains(string(b), s)
}

// readAll consumes topic's partitions from the start until every value
// of want has been seen (or fails after the timeout).
func readAll(t *testing.T, seeds []string, topic string, parts int32, want map[string]bool) {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for p := int32(0); p < parts; p++ {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]int{}
	missing := func() int {
		n := 0
		for v := range want {
			if seen[v] == 0 {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	for missing() > 0 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	if n := missing(); n > 0 {
		t.Fatalf("%d of %d acknowledged records of %s not read back", n, len(want), topic)
	}
}

// One broker's disk fills: produce answers KAFKA_STORAGE_ERROR, the
// broker stays up, DescribeLogDirs reports the directory, consumers read
// every acknowledged record, and once space returns produce works again
// by itself with nothing acknowledged lost.
func TestDiskFullOneBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := startDiskCluster(t, 1)
	nd := c.nodes[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.DefaultProduceTopic("disk"),
		// Few retries, each after a quick metadata refresh (franz-go waits
		// MetadataMinAge, 5 s by default, before retrying a retriable
		// error), so that KAFKA_STORAGE_ERROR reaches the test; and not
		// idempotent: an idempotent producer keeps retrying a batch it is
		// unsure of (the request that met the full disk) instead of
		// failing it.
		kgo.RecordRetries(1), kgo.MetadataMinAge(100*time.Millisecond), kgo.RecordDeliveryTimeout(10*time.Second),
		kgo.ProducerLinger(0), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "disk"); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	n := 0
	produce := func() error {
		n++
		v := fmt.Sprintf("v-%d", n)
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte(v)}).FirstErr()
		if err == nil {
			acked[v] = true
		}
		return err
	}
	testwait.For(t, 30*time.Second, func() bool { return produce() == nil }, "first produce")
	for i := 0; i < 50; i++ {
		if err := produce(); err != nil {
			t.Fatal(err)
		}
	}

	if err := nd.inject("enospc", 0); err != nil {
		t.Fatal(err)
	}
	var errs []string
	testwait.For(t, 30*time.Second, func() bool {
		err := produce()
		if err != nil && (len(errs) == 0 || errs[len(errs)-1] != err.Error()) {
			errs = append(errs, err.Error())
		}
		return errors.Is(err, kerr.KafkaStorageError)
	}, "produce on a full disk never answered KAFKA_STORAGE_ERROR (answers: %q)", &errs)
	for i := 0; i < 3; i++ {
		if err := produce(); !errors.Is(err, kerr.KafkaStorageError) {
			t.Fatalf("produce %d on a full disk: %v", i, err)
		}
	}
	dirs, err := adm.DescribeBrokerLogDirs(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !errors.Is(d.Err, kerr.KafkaStorageError) {
			t.Fatalf("DescribeLogDirs of a full directory %s: %v", d.Dir, d.Err)
		}
	}
	readAll(t, c.bootstrap(), "disk", 1, acked)
	if !nd.running() {
		t.Fatal("the broker exited on a full disk")
	}
	// The controller's disk is full: CreateTopics answers as Kafka's
	// controller does when its metadata log cannot be written,
	// UNKNOWN_SERVER_ERROR with the reason (KAFKA_STORAGE_ERROR is not one
	// of CreateTopics' errors).
	ct, err := adm.CreateTopic(ctx, 1, 1, nil, "during")
	if !errors.Is(err, kerr.UnknownServerError) || !strings.Contains(ct.ErrMessage, "strata.log.dir.min.free.bytes") {
		t.Fatalf("CreateTopics on a full controller: %v (%q)", err, ct.ErrMessage)
	}

	if err := nd.inject("", 0); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 60*time.Second, func() bool { return produce() == nil }, "produce never resumed once space returned")
	for i := 0; i < 50; i++ {
		if err := produce(); err != nil {
			t.Fatalf("produce %d after space returned: %v", i, err)
		}
	}
	readAll(t, c.bootstrap(), "disk", 1, acked)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "during"); err != nil {
		t.Fatalf("CreateTopics once space returned: %v", err)
	}
	dirs, err = adm.DescribeBrokerLogDirs(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.Err != nil {
			t.Fatalf("DescribeLogDirs once space returned: %v", d.Err)
		}
	}
	if !logHas(nd, "log directory below its free-space threshold") || !logHas(nd, "produce resumes") {
		t.Error("the broker's log does not say the directory filled and recovered")
	}
	noPanics(t, c)
	t.Logf("%d records acknowledged, all read back", len(acked))
}

// In 3 brokers, the broker whose disk fills hands its partition
// leaderships (and the controller) to the others; every partition takes
// writes meanwhile; nothing panics, and after space returns the cluster
// still takes writes.
func TestDiskFullLeadershipsMove(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := startDiskCluster(t, 3)
	const topic, parts = "moves", 6
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	leaders := func() map[int32]int32 {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil || td[topic].Err != nil {
			return nil
		}
		out := map[int32]int32{}
		for p, pd := range td[topic].Partitions {
			if pd.Leader >= 0 {
				out[p] = pd.Leader
			}
		}
		return out
	}
	var victim int32
	testwait.For(t, 60*time.Second, func() bool {
		l := leaders()
		if len(l) != parts {
			return false
		}
		count := map[int32]int{}
		for _, b := range l {
			count[b]++
		}
		for b, n := range count {
			if n > 0 && (victim == 0 || n > count[victim]) {
				victim = b
			}
		}
		return victim != 0
	}, "leaders of %s", topic)
	acked := map[string]bool{}
	n := 0
	produceAll := func() error {
		for p := int32(0); p < parts; p++ {
			n++
			v := fmt.Sprintf("p%d-%d", p, n)
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			err := cl.ProduceSync(pctx, &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr()
			cancel()
			if err != nil {
				return fmt.Errorf("partition %d: %w", p, err)
			}
			acked[v] = true
		}
		return nil
	}
	if err := produceAll(); err != nil {
		t.Fatal(err)
	}

	full := c.nodes[victim-1]
	t.Logf("broker %d leads %d partitions; its disk fills", victim, func() int {
		k := 0
		for _, b := range leaders() {
			if b == victim {
				k++
			}
		}
		return k
	}())
	if err := full.inject("enospc", 0); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 60*time.Second, func() bool {
		l := leaders()
		if len(l) != parts {
			return false
		}
		for _, b := range l {
			if b == victim {
				return false
			}
		}
		return true
	}, "broker %d still leads partitions of %s with a full disk", victim, topic)
	testwait.For(t, 30*time.Second, func() bool {
		m, err := adm.BrokerMetadata(ctx)
		return err == nil && m.Controller >= 0 && m.Controller != victim
	}, "broker %d is still the controller with a full disk", victim)
	for i := 0; i < 5; i++ {
		if err := produceAll(); err != nil {
			t.Fatalf("produce with broker %d full: %v", victim, err)
		}
	}
	if !full.running() {
		t.Fatalf("broker %d exited on a full disk", victim)
	}

	if err := full.inject("", 0); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, func() bool { return logHas(full, "produce resumes") }, "broker %d never resumed", victim)
	if err := produceAll(); err != nil {
		t.Fatalf("produce after space returned: %v", err)
	}
	readAll(t, c.bootstrap(), topic, parts, acked)
	noPanics(t, c)
}

// A disk that fails writes with EIO stops the broker cleanly: raft's
// term cannot be saved, and instead of hashicorp/raft's panic the broker
// logs a storage failure and exits with status 4.
func TestDiskEIOStopsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	c := startDiskCluster(t, 1)
	nd := c.nodes[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.DefaultProduceTopic("eio"),
		kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(5*time.Second), kgo.ProducerLinger(0), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "eio"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := nd.inject("eio", 0); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 60*time.Second, func() bool {
		if nd.running() {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			cl.ProduceSync(pctx, &kgo.Record{Value: []byte("during")})
			cancel()
		}
		return !nd.running()
	}, "the broker did not stop on a failing disk")
	nd.mu.Lock()
	code := nd.cmd.ProcessState.ExitCode()
	nd.mu.Unlock()
	if code != 4 {
		t.Errorf("exit status %d, want 4", code)
	}
	if !logHas(nd, `msg="storage failure: raft's state cannot be written`) {
		t.Error("no storage failure line in the broker's log")
	}
	noPanics(t, c)
}

// The same on a real file system that fills: a 64 MiB tmpfs as the data
// directory, strata.log.dir.min.free.bytes at 16 MiB, and a filler file
// that leaves 8 MiB free. The broker's statfs sees it; produce answers
// KAFKA_STORAGE_ERROR; once the filler is gone produce works again. Needs
// root (mount); skipped where tmpfs cannot be mounted.
func TestDiskFullTmpfs(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	nw, err := newLoopback(1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := newCluster(strataBin, dir, nw, 1, 500*time.Millisecond, []string{"--set", "strata.log.dir.min.free.bytes=16777216"})
	nd := c.nodes[0]
	if err := os.MkdirAll(nd.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", nd.dir).CombinedOutput(); err != nil {
		nw.close()
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() {
		nd.kill()
		nw.close()
		if t.Failed() {
			b, _ := os.ReadFile(nd.log)
			if len(b) > 12000 {
				b = b[len(b)-12000:]
			}
			t.Logf("broker log (tail):\n%s", b)
		}
		if out, err := exec.Command("umount", nd.dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", nd.dir, err, out)
		}
	})
	if err := nd.start(strataBin); err != nil {
		t.Fatal(err)
	}
	if err := nd.waitReady(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.DefaultProduceTopic("tmpfs"),
		kgo.RecordRetries(1), kgo.MetadataMinAge(100*time.Millisecond), kgo.RecordDeliveryTimeout(10*time.Second),
		kgo.ProducerLinger(0), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "tmpfs"); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	n := 0
	produce := func() error {
		n++
		v := fmt.Sprintf("v-%d", n)
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte(v)}).FirstErr()
		if err == nil {
			acked[v] = true
		}
		return err
	}
	testwait.For(t, 30*time.Second, func() bool { return produce() == nil }, "first produce")

	var st syscall.Statfs_t
	if err := syscall.Statfs(nd.dir, &st); err != nil {
		t.Fatal(err)
	}
	fill := int64(st.Bavail)*int64(st.Bsize) - 8<<20
	filler := nd.dir + "/filler"
	if err := os.WriteFile(filler, make([]byte, fill), 0o644); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, func() bool { return errors.Is(produce(), kerr.KafkaStorageError) },
		"produce with 8 MiB free under a 16 MiB threshold never answered KAFKA_STORAGE_ERROR")
	if !nd.running() {
		t.Fatal("the broker exited")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, func() bool { return produce() == nil }, "produce never resumed once the filler was removed")
	readAll(t, c.bootstrap(), "tmpfs", 1, acked)
	noPanics(t, c)
}
