package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/kafkajars"
)

// Apache Kafka as a broker of compare: `kafka` is one KRaft node in
// combined mode (process.roles=broker,controller), `kafka-3` three such
// nodes, all voters of the metadata quorum (as strata-3's brokers are),
// with min.insync.replicas=2. They run from Kafka 4.4.0's jars
// (internal/kafkajars), each in its own JVM with the heap of
// kafka-server-start.sh (-Xms1g -Xmx1g unless --kafka-heap says
// otherwise) and the JVM flags of kafka-run-class.sh; every other setting
// is Kafka's default, except what a single node needs (the replication
// factor of its internal topics is 1 on `kafka`).
const (
	BrokerKafka  = "kafka"
	BrokerKafka3 = "kafka-3"
)

// DefaultKafkaHeap is the heap of each Kafka JVM: kafka-server-start.sh's
// -Xmx1G -Xms1G.
const DefaultKafkaHeap = "1g"

// kafkaJVMFlags are kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS.
var kafkaJVMFlags = []string{"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"}

const (
	kafkaStorageTool = "kafka.tools.StorageTool" // kafka-storage.sh
	kafkaMain        = "kafka.Kafka"             // kafka-server-start.sh
	// kafkaStartedLine is what KafkaRaftServer logs (slf4j-simple, stderr)
	// once the node serves.
	kafkaStartedLine = "Kafka Server started"
)

// kafkaClusterID is a random cluster id as kafka-storage.sh random-uuid
// prints it: 16 bytes, URL-safe base64 without padding, never starting
// with '-' (as Kafka's Uuid.randomUuid: kafka-storage's argument parser
// takes "-t -xyz" for a missing value, one run in 64).
func kafkaClusterID() string {
	for {
		var b [16]byte
		rand.Read(b[:])
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

// kafkaProperties is node id's server.properties in a cluster of n
// nodes; node i (1-based) listens for clients on base+2(i-1) and for the
// controller quorum on base+2(i-1)+1.
func kafkaProperties(id, n, base int, logDir string) string {
	port := func(i int) int { return base + 2*(i-1) }
	var voters []string
	for i := 1; i <= n; i++ {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i, port(i)+1))
	}
	lines := []string{
		"process.roles=broker,controller",
		"node.id=" + strconv.Itoa(id),
		"controller.quorum.voters=" + strings.Join(voters, ","),
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", port(id), port(id)+1),
		fmt.Sprintf("advertised.listeners=PLAINTEXT://127.0.0.1:%d", port(id)),
		"controller.listener.names=CONTROLLER",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"log.dirs=" + logDir,
	}
	if n == 1 {
		// Kafka's defaults (3, min ISR 2) need three brokers.
		lines = append(lines,
			"offsets.topic.replication.factor=1",
			"transaction.state.log.replication.factor=1",
			"transaction.state.log.min.isr=1",
			"share.coordinator.state.topic.replication.factor=1",
			"share.coordinator.state.topic.min.isr=1")
	} else {
		lines = append(lines, "min.insync.replicas=2")
	}
	return strings.Join(lines, "\n") + "\n"
}

// startKafka starts n Kafka nodes with their data under dir/data, formats
// their storage first (not counted in the start time), and waits until a
// Metadata answer lists all n brokers.
func (c *CompareConfig) startKafka(ctx context.Context, name, dir, logPath string, n int) (*child, error) {
	cp, err := kafkajars.Classpath()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotAvailable, name, err)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("%w: %s: java: %v", ErrNotAvailable, name, err)
	}
	heap := c.KafkaHeap
	if heap == "" {
		heap = DefaultKafkaHeap
	}
	offsets := make([]int, 2*n)
	for i := range offsets {
		offsets[i] = i
	}
	base, err := freePortRun(offsets...)
	if err != nil {
		return nil, err
	}
	clusterID := kafkaClusterID()
	props := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		nodeDir := filepath.Join(dir, "data", fmt.Sprintf("node-%d", i))
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBroker, err)
		}
		props[i-1] = filepath.Join(nodeDir, "server.properties")
		text := kafkaProperties(i, n, base, filepath.Join(nodeDir, "logs"))
		if err := os.WriteFile(props[i-1], []byte(text), 0o644); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBroker, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(fctx, java, "-Xmx256m", "-cp", cp, kafkaStorageTool,
				"format", "-t", clusterID, "-c", props[i-1])
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i-1] = fmt.Errorf("%w: %s: kafka-storage format node %d: %v\n%s", ErrBroker, name, i, err, tailLines(string(out), 10))
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	var nodes []*child
	stopAll := func() {
		for _, ch := range nodes {
			ch.stop()
		}
	}
	var addrs []string
	for i := 1; i <= n; i++ {
		addr := fmt.Sprintf("127.0.0.1:%d", base+2*(i-1))
		addrs = append(addrs, addr)
		lp := logPath
		if n > 1 {
			lp = strings.TrimSuffix(logPath, ".log") + fmt.Sprintf("-node-%d.log", i)
		}
		argv := append([]string{java, "-Xms" + heap, "-Xmx" + heap}, kafkaJVMFlags...)
		argv = append(argv, "-cp", cp, kafkaMain, props[i-1])
		// The nodes start side by side: a node waits for a quorum of
		// controllers before it is ready.
		ready := func(line string) (string, bool) { return addr, strings.Contains(line, kafkaStartedLine) }
		ch, err := startKafkaNode(ctx, fmt.Sprintf("%s node %d", name, i), dir, lp, argv, ready)
		if err != nil {
			stopAll()
			return nil, err
		}
		nodes = append(nodes, ch)
	}
	for _, ch := range nodes {
		if err := ch.awaitReady(ctx, 2*time.Minute); err != nil {
			stopAll()
			return nil, err
		}
	}
	first := nodes[0]
	first.name, first.peers, first.nodes = name, nodes[1:], n
	first.addr = strings.Join(addrs, ",")
	if err := probeBrokers(ctx, first.addr, n, clusterReadyTimeout); err != nil {
		first.stop()
		return nil, fmt.Errorf("%w (logs: %s)", err, logPath)
	}
	return first, nil
}

// startKafkaNode starts one JVM without waiting for it to be ready (a
// node of a cluster is ready only once a quorum of its peers runs).
func startKafkaNode(ctx context.Context, name, dir, logPath string, argv []string, ready func(string) (string, bool)) (*child, error) {
	return startChildAsync(ctx, name, dir, logPath, argv, []string{"LOG_DIR=" + dir}, ready)
}

// probeBrokers waits (bounded) until a Metadata request to addr (a
// comma-separated list) answers with n brokers and a controller.
func probeBrokers(ctx context.Context, addr string, n int, timeout time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(splitList(addr)...), kgo.ClientID("strata-bench-admin"))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBroker, err)
	}
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(mctx, cl)
		cancel()
		if err == nil && len(resp.Brokers) == n && resp.ControllerID >= 0 {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d brokers, controller %d", len(resp.Brokers), resp.ControllerID)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s: not %d brokers within %v (%s)", ErrBroker, addr, n, timeout, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ErrBroker, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// tailLines is the last n lines of s, for an error message.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// childEnv is this process's environment without STRATA_ variables:
// `strata serve` reads every one as a setting (STRATA_LOG_DIRS is
// log.dirs) and refuses an unknown one, such as STRATA_KAFKA_CLASSPATH or
// a test's STRATA_BENCH_KAFKA_LONG; the brokers compare starts get their
// settings from its command lines only.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATA_") {
			env = append(env, kv)
		}
	}
	return env
}
