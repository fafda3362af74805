package bench

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/kafkajars"
)

// Load generators (--loadgen): franz-go in this process, or Kafka's own
// perf-test tools run from Kafka 4.4.0's jars by their main classes.
const (
	LoadgenFranz      = "franz"       // this package's franz-go producers and consumers
	LoadgenKafka      = "kafka"       // kafka-producer-perf-test, kafka-consumer-perf-test
	LoadgenKafkaShare = "kafka-share" // as kafka, but consume with kafka-share-consumer-perf-test (a share group)
)

// The tools' main classes (what bin/kafka-*-perf-test.sh run).
const (
	producerPerfMain      = "org.apache.kafka.tools.ProducerPerformance"
	consumerPerfMain      = "org.apache.kafka.tools.ConsumerPerformance"
	shareConsumerPerfMain = "org.apache.kafka.tools.ShareConsumerPerformance"
	// toolHeap is the heap the perf-test scripts give their JVM.
	toolHeap = "-Xmx512M"
)

func checkLoadgen(s string) error {
	switch s {
	case LoadgenFranz, LoadgenKafka, LoadgenKafkaShare:
		return nil
	}
	return fmt.Errorf("%w: --loadgen %q: want %s, %s or %s", ErrUsage, s, LoadgenFranz, LoadgenKafka, LoadgenKafkaShare)
}

// loadgenLabel names the tools a load generator runs.
func loadgenLabel(s string) string {
	switch s {
	case LoadgenKafka:
		return "Kafka 4.4.0's kafka-producer-perf-test / kafka-consumer-perf-test"
	case LoadgenKafkaShare:
		return "Kafka 4.4.0's kafka-producer-perf-test / kafka-share-consumer-perf-test"
	}
	return "franz-go (strata bench)"
}

// RunKafkaTool runs one workload with Kafka's perf-test tools as the load
// generator: produce with kafka-producer-perf-test; consume fills the
// topic with franz-go (not measured, as Run does) and reads it with
// kafka-consumer-perf-test (loadgen kafka, a classic consumer group) or
// kafka-share-consumer-perf-test (loadgen kafka-share, a share group whose
// share.auto.offset.reset is set to earliest first). The tools take one
// topic and one producer; e2e has no Kafka tool (kafka-e2e-latency sends
// one record at a time, not a rate). The measured phase is the tool's
// process, JVM start included (the broker idles through it); the figures
// are the tool's own.
func RunKafkaTool(ctx context.Context, w Workload, opts RunOptions, loadgen string) (*Result, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if err := checkLoadgen(loadgen); err != nil {
		return nil, err
	}
	switch {
	case w.Kind == KindShare:
		return nil, fmt.Errorf("%w: --loadgen %s: the share workload runs franz-go's classic and share consumers side by side; use --loadgen franz (kafka-share reads a consume workload with kafka-share-consumer-perf-test)", ErrUsage, loadgen)
	case w.Kind == KindE2E:
		return nil, fmt.Errorf("%w: --loadgen %s: Kafka's tools have no fixed-rate end-to-end latency test (kafka-e2e-latency sends one record at a time); use --loadgen franz", ErrUsage, loadgen)
	case w.Topics != 1 || w.ProducersPerTopic != 1 || w.Subscriptions != 1:
		return nil, fmt.Errorf("%w: --loadgen %s runs one tool: want 1 topic, 1 producer and 1 subscription", ErrUsage, loadgen)
	case w.Kind == KindConsume && loadgen == LoadgenKafka && w.ConsumersPerSubscription != 1:
		return nil, fmt.Errorf("%w: kafka-consumer-perf-test has one consumer: want consumerPerSubscription 1", ErrUsage)
	}
	if len(opts.Bootstrap) == 0 {
		return nil, fmt.Errorf("%w: no bootstrap address", ErrUsage)
	}
	records := w.NumRecords
	if records == 0 && w.Rate > 0 {
		records = int64(w.Rate * w.Duration.Seconds())
	}
	if records <= 0 {
		return nil, fmt.Errorf("%w: --loadgen %s needs numRecords (or a producerRate and a duration)", ErrUsage, loadgen)
	}
	cp, err := kafkajars.Classpath()
	if err != nil {
		return nil, fmt.Errorf("%w: --loadgen %s: %v", ErrNotAvailable, loadgen, err)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("%w: --loadgen %s: %v", ErrNotAvailable, loadgen, err)
	}
	timeout := opts.Timeout
	if timeout == 0 {
		bytes := float64(records) * float64(w.RecordSize+64)
		timeout = w.Duration + 2*time.Minute + time.Duration(bytes/(10<<20)*float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	topics := topicNames(opts.TopicPrefix, 1)
	rf := w.ReplicationFactor
	if rf == 0 {
		rf = opts.ReplicationFactor
	}
	if rf <= 0 {
		rf = 1
	}
	if err := createTopics(ctx, opts.Bootstrap, topics, w.Partitions, rf); err != nil {
		return nil, err
	}
	if !opts.KeepTopics {
		defer deleteTopics(opts.Bootstrap, topics)
	}
	bootstrap := strings.Join(opts.Bootstrap, ",")
	var main string
	var args []string
	switch w.Kind {
	case KindProduce:
		main, args = producerPerfMain, producerPerfArgs(&w, bootstrap, topics[0], records)
	default: // consume
		fill := w
		fill.Rate, fill.Duration, fill.NumRecords = 0, 0, records
		if _, err := produceAll(ctx, &fill, opts.Bootstrap, topics, nil); err != nil {
			return nil, fmt.Errorf("filling the topics: %w", err)
		}
		group := topics[0] + "-group"
		if loadgen == LoadgenKafkaShare {
			if err := shareFromEarliest(ctx, opts.Bootstrap, group); err != nil {
				return nil, err
			}
			main = shareConsumerPerfMain
			args = []string{"--bootstrap-server", bootstrap, "--topic", topics[0], "--num-records", strconv.FormatInt(records, 10),
				"--group", group, "--threads", strconv.Itoa(w.ConsumersPerSubscription), "--timeout", "30000"}
		} else {
			main = consumerPerfMain
			args = []string{"--bootstrap-server", bootstrap, "--topic", topics[0], "--num-records", strconv.FormatInt(records, 10),
				"--group", group, "--timeout", "30000"}
		}
	}
	argv := append([]string{toolHeap, "-cp", cp, main}, args...)
	cmd := exec.CommandContext(ctx, java, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if opts.MeasureStart != nil {
		opts.MeasureStart()
	}
	began := time.Now()
	runErr := cmd.Run()
	wall := time.Since(began).Seconds()
	if opts.MeasureEnd != nil {
		opts.MeasureEnd()
	}
	var cpu float64
	if cmd.ProcessState != nil {
		cpu = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	if runErr != nil {
		return nil, fmt.Errorf("%w: %s: %v\n%s", ErrRun, main, runErr, tailLines(stdout.String()+stderr.String(), 15))
	}
	var res *Result
	if w.Kind == KindProduce {
		res, err = parseProducerPerf(stdout.String())
	} else {
		res, err = parseConsumerPerf(stdout.String())
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v\n%s", ErrRun, main, err, tailLines(stdout.String()+stderr.String(), 15))
	}
	res.Loadgen, res.LoadgenCPUSeconds, res.MeasuredSeconds = main, cpu, wall
	if res.Records < records {
		return res, fmt.Errorf("%w: %s: %d of %d records", ErrRun, main, res.Records, records)
	}
	return res, nil
}

// producerPerfArgs are kafka-producer-perf-test's arguments for the
// workload: its acks, idempotence, compression, linger and batch size as
// producer properties, everything else the Java producer's default.
func producerPerfArgs(w *Workload, bootstrap, topic string, records int64) []string {
	throughput := "-1"
	if w.Rate > 0 {
		throughput = strconv.FormatFloat(w.Rate, 'f', -1, 64)
	}
	acks := w.Acks
	if acks == "" {
		acks = "all"
	}
	compression := w.Compression
	if compression == "" {
		compression = "none"
	}
	return []string{"--topic", topic, "--num-records", strconv.FormatInt(records, 10),
		"--record-size", strconv.Itoa(w.RecordSize), "--throughput", throughput,
		"--producer-props", "bootstrap.servers=" + bootstrap, "acks=" + acks,
		"enable.idempotence=" + strconv.FormatBool(w.Idempotence), "compression.type=" + compression,
		"linger.ms=" + strconv.FormatInt(w.Linger.Milliseconds(), 10), "batch.size=" + strconv.Itoa(w.BatchSize)}
}

// shareFromEarliest sets the share group's share.auto.offset.reset to
// earliest (the default, latest, would read nothing of a filled topic).
func shareFromEarliest(ctx context.Context, bootstrap []string, group string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ClientID("strata-bench-admin"))
	if err != nil {
		return fmt.Errorf("%w: admin client: %v", ErrRun, err)
	}
	defer cl.Close()
	// IncrementalAlterConfigs on the GROUP resource (type 32, KIP-848's
	// group configs; kmsg names no constant for it).
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceType(32), group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Op, cfg.Value = "share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		for _, r := range resp.Resources {
			if e := kerr.ErrorForCode(r.ErrorCode); e != nil {
				err = e
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%w: share group %s: share.auto.offset.reset=earliest: %v", ErrRun, group, err)
	}
	return nil
}

// producerSummary is kafka-producer-perf-test's last line, e.g.
// "500000 records sent, 61050.061050 records/sec (59.62 MB/sec), 438.77 ms
// avg latency, 1190.00 ms max latency, 380 ms 50th, 1012 ms 95th, 1123 ms
// 99th, 1177 ms 99.9th."
var producerSummary = regexp.MustCompile(`(\d+) records sent, ([0-9.]+) records/sec \(([0-9.]+) MB/sec\), ([0-9.]+) ms avg latency, ([0-9.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th`)

// parseProducerPerf reads kafka-producer-perf-test's output: its summary
// line (the last, should there be a steady-state one after warm-up
// records). Latency is send to acknowledgement, in whole milliseconds for
// the percentiles.
func parseProducerPerf(out string) (*Result, error) {
	var m []string
	for _, line := range strings.Split(out, "\n") {
		if mm := producerSummary.FindStringSubmatch(line); mm != nil {
			m = mm
		}
	}
	if m == nil {
		return nil, fmt.Errorf("no summary line (\"N records sent, ... 99.9th.\") in its output")
	}
	var f [9]float64
	for i := range f {
		v, err := strconv.ParseFloat(m[i+1], 64)
		if err != nil {
			return nil, fmt.Errorf("summary field %d %q: %v", i+1, m[i+1], err)
		}
		f[i] = v
	}
	r := &Result{Kind: KindProduce, Records: int64(f[0]), RecordsPerSec: f[1], MBPerSec: f[2]}
	if r.RecordsPerSec > 0 {
		r.Seconds = f[0] / r.RecordsPerSec
	}
	r.Bytes = int64(r.MBPerSec*MiB*r.Seconds + 0.5)
	r.MovedBytes = r.Bytes
	r.ProduceLatency = &Latency{Count: uint64(r.Records), AvgMs: f[3], MaxMs: f[4], P50Ms: f[5], P95Ms: f[6], P99Ms: f[7], P999: f[8]}
	return r, nil
}

// parseConsumerPerf reads kafka-consumer-perf-test's or
// kafka-share-consumer-perf-test's output: a header line of column names
// ("start.time, end.time, data.consumed.in.MB, ...": the two tools order
// them differently) and the line of figures under it. Seconds is
// fetch.time.ms (the consumer tool leaves the group join out of it;
// its rebalance.time.ms becomes FirstRecordMs).
func parseConsumerPerf(out string) (*Result, error) {
	lines := strings.Split(out, "\n")
	var header []string
	var values []string
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "start.time,") {
			header = splitCSV(line)
			continue
		}
		if header != nil {
			if v := splitCSV(line); len(v) == len(header) {
				values = v
			}
		}
	}
	if header == nil || values == nil {
		return nil, fmt.Errorf("no header (start.time, ...) and figures line in its output")
	}
	col := map[string]float64{}
	for i, name := range header {
		if name == "start.time" || name == "end.time" {
			continue
		}
		v, err := strconv.ParseFloat(values[i], 64)
		if err != nil {
			return nil, fmt.Errorf("column %s: %q: %v", name, values[i], err)
		}
		col[name] = v
	}
	need := func(name string) (float64, error) {
		v, ok := col[name]
		if !ok {
			return 0, fmt.Errorf("no column %s", name)
		}
		return v, nil
	}
	mb, err := need("data.consumed.in.MB")
	if err != nil {
		return nil, err
	}
	n, err := need("data.consumed.in.nMsg")
	if err != nil {
		return nil, err
	}
	ms, err := need("fetch.time.ms")
	if err != nil {
		return nil, err
	}
	r := &Result{Kind: KindConsume, Records: int64(n), Bytes: int64(mb*MiB + 0.5), Seconds: ms / 1000}
	r.ConsumedRecords, r.ConsumedBytes, r.MovedBytes = r.Records, r.Bytes, r.Bytes
	if r.Seconds > 0 {
		r.RecordsPerSec = n / r.Seconds
		r.MBPerSec = mb / r.Seconds
	}
	r.FirstRecordMs = col["rebalance.time.ms"]
	return r, nil
}

func splitCSV(line string) []string {
	parts := strings.Split(line, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}
