package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/kafkajars"
)

// Output of kafka-producer-perf-test 4.4.0 (progress lines, then the
// summary), as it printed it against Kafka.
const producerPerfOut = `21870 records sent, 4374.0 records/sec (4.27 MB/sec), 8809.6 ms avg latency, 10224.0 ms max latency.
52245 records sent, 10449.0 records/sec (10.20 MB/sec), 3321.0 ms avg latency, 5183.0 ms max latency.
200000 records sent, 6267.431293 records/sec (6.12 MB/sec), 4353.00 ms avg latency, 10224.00 ms max latency, 3446 ms 50th, 9000 ms 95th, 9873 ms 99th, 10200 ms 99.9th.
`

func TestParseProducerPerf(t *testing.T) {
	r, err := parseProducerPerf(producerPerfOut)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != KindProduce || r.Records != 200000 || r.RecordsPerSec != 6267.431293 || r.MBPerSec != 6.12 {
		t.Fatalf("got %+v", r)
	}
	if want := 200000 / 6267.431293; r.Seconds < want*0.999 || r.Seconds > want*1.001 {
		t.Errorf("seconds %v, want %v", r.Seconds, want)
	}
	l := r.ProduceLatency
	if l == nil || l.AvgMs != 4353 || l.MaxMs != 10224 || l.P50Ms != 3446 || l.P95Ms != 9000 || l.P99Ms != 9873 || l.P999 != 10200 {
		t.Errorf("latency %+v", l)
	}
	if r.MovedBytes != r.Bytes || float64(r.Bytes) < 6.11*MiB*r.Seconds {
		t.Errorf("bytes %d moved %d", r.Bytes, r.MovedBytes)
	}
	if _, err := parseProducerPerf("21870 records sent, 4374.0 records/sec (4.27 MB/sec), 8809.6 ms avg latency, 10224.0 ms max latency.\n"); err == nil {
		t.Error("a progress line alone parsed as a summary")
	}
	if _, err := parseProducerPerf(""); err == nil {
		t.Error("empty output parsed")
	}
}

// Output of kafka-consumer-perf-test 4.4.0 (its banner about KIP-848,
// the header, the figures).
const consumerPerfOut = `****************************************************************
* The consumer rebalance protocol (KIP-848) is production-ready!
****************************************************************
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-12-01 23:31:15:671, 2026-12-01 23:31:26:371, 195.3125, 18.2535, 200000, 18691.5888, 5870, 4830, 40.4374, 41407.8675
`

// kafka-share-consumer-perf-test 4.4.0 orders its columns differently and
// has no rebalance time.
const shareConsumerPerfOut = `Warning: something on stderr would not be here
start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg, fetch.time.ms
2026-12-01 23:40:01:000, 2026-12-01 23:40:05:000, 97.6562, 24.4141, 25000.0000, 100000, 4000
`

func TestParseConsumerPerf(t *testing.T) {
	r, err := parseConsumerPerf(consumerPerfOut)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != KindConsume || r.Records != 200000 || r.ConsumedRecords != 200000 || r.Seconds != 4.83 || r.FirstRecordMs != 5870 {
		t.Fatalf("got %+v", r)
	}
	// Throughput over the fetch time, as the tool's fetch.* columns.
	if r.MBPerSec < 40.43 || r.MBPerSec > 40.44 || r.RecordsPerSec < 41407 || r.RecordsPerSec > 41408 {
		t.Errorf("%v MB/s, %v records/s", r.MBPerSec, r.RecordsPerSec)
	}
	if r.Bytes != int64(195.3125*MiB) || r.MovedBytes != r.Bytes {
		t.Errorf("bytes %d moved %d", r.Bytes, r.MovedBytes)
	}

	r, err = parseConsumerPerf(shareConsumerPerfOut)
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != 100000 || r.Seconds != 4 || r.MBPerSec < 24.414 || r.MBPerSec > 24.415 || r.RecordsPerSec != 25000 || r.FirstRecordMs != 0 {
		t.Fatalf("share: got %+v", r)
	}

	for name, out := range map[string]string{
		"no figures":  "start.time, end.time, data.consumed.in.MB\n",
		"no header":   "2026-12-01 23:31:15:671, 2026-12-01 23:31:26:371, 195.3125\n",
		"bad number":  "start.time, end.time, data.consumed.in.MB, data.consumed.in.nMsg, fetch.time.ms\na, b, x, 1, 2\n",
		"no fetch ms": "start.time, end.time, data.consumed.in.MB, data.consumed.in.nMsg\na, b, 1, 2\n",
	} {
		if _, err := parseConsumerPerf(out); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestProducerPerfArgs(t *testing.T) {
	w := DefaultWorkload()
	w.RecordSize, w.Rate, w.Compression, w.Linger, w.BatchSize = 100, 5000, "zstd", 5*time.Millisecond, 65536
	got := strings.Join(producerPerfArgs(&w, "a:1,b:2", "t", 42), " ")
	want := "--topic t --num-records 42 --record-size 100 --throughput 5000 --producer-props bootstrap.servers=a:1,b:2 acks=all enable.idempotence=true compression.type=zstd linger.ms=5 batch.size=65536"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	w.Rate = 0
	if a := producerPerfArgs(&w, "a:1", "t", 1); a[7] != "-1" {
		t.Errorf("no rate: --throughput %s, want -1", a[7])
	}
}

func TestKafkaProperties(t *testing.T) {
	one := kafkaProperties(1, 1, 20000, "/d")
	for _, want := range []string{"process.roles=broker,controller\n", "node.id=1\n", "controller.quorum.voters=1@127.0.0.1:20001\n",
		"listeners=PLAINTEXT://127.0.0.1:20000,CONTROLLER://127.0.0.1:20001\n", "log.dirs=/d\n", "offsets.topic.replication.factor=1\n"} {
		if !strings.Contains(one, want) {
			t.Errorf("single node: no %q in\n%s", want, one)
		}
	}
	three := kafkaProperties(2, 3, 20000, "/d")
	for _, want := range []string{"node.id=2\n", "controller.quorum.voters=1@127.0.0.1:20001,2@127.0.0.1:20003,3@127.0.0.1:20005\n",
		"listeners=PLAINTEXT://127.0.0.1:20002,CONTROLLER://127.0.0.1:20003\n", "min.insync.replicas=2\n"} {
		if !strings.Contains(three, want) {
			t.Errorf("node 2 of 3: no %q in\n%s", want, three)
		}
	}
	if strings.Contains(three, "replication.factor") {
		t.Errorf("three nodes keep Kafka's default internal replication factors:\n%s", three)
	}
	if id := kafkaClusterID(); len(id) != 22 {
		t.Errorf("cluster id %q: want 22 characters", id)
	}
}

func TestLoadgenFlag(t *testing.T) {
	for _, lg := range []string{LoadgenFranz, LoadgenKafka, LoadgenKafkaShare} {
		if _, err := ParseCompareFlags([]string{"--loadgen", lg, "workloads/produce-8p-1k.yaml"}, &bytes.Buffer{}); err != nil {
			t.Errorf("%s: %v", lg, err)
		}
	}
	if _, err := ParseCompareFlags([]string{"--loadgen", "jmeter", "workloads/produce-8p-1k.yaml"}, &bytes.Buffer{}); !errors.Is(err, ErrUsage) {
		t.Errorf("unknown load generator: %v", err)
	}
	c, err := ParseCompareFlags([]string{"--brokers", "kafka,kafka-3", "workloads/produce-8p-1k.yaml"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.replicationFactor(BrokerKafka3) != 3 || c.replicationFactor(BrokerKafka) != 1 || c.KafkaHeap != DefaultKafkaHeap {
		t.Errorf("kafka-3 RF %d, kafka RF %d, heap %q", c.replicationFactor(BrokerKafka3), c.replicationFactor(BrokerKafka), c.KafkaHeap)
	}
	// Workloads Kafka's tools cannot drive are refused before any broker
	// is touched.
	w := DefaultWorkload()
	w.Kind = KindE2E
	w.Duration, w.Rate = time.Second, 10
	if _, err := RunKafkaTool(context.Background(), w, RunOptions{Bootstrap: []string{"127.0.0.1:1"}}, LoadgenKafka); !errors.Is(err, ErrUsage) {
		t.Errorf("e2e: %v", err)
	}
	w = DefaultWorkload()
	w.Topics, w.NumRecords = 2, 10
	if _, err := RunKafkaTool(context.Background(), w, RunOptions{Bootstrap: []string{"127.0.0.1:1"}}, LoadgenKafka); !errors.Is(err, ErrUsage) {
		t.Errorf("2 topics: %v", err)
	}
}

// A short compare run of Strata against Apache Kafka (one KRaft node),
// driven by kafka-producer-perf-test, so CI keeps the Kafka broker and the
// Kafka load generator working: Kafka formatted, started and stopped, the
// tool's output parsed into figures. About 20-30 s (a Kafka start, two
// tool runs); skipped under -short, skipped without Java or the jars,
// failing without them under CI. The long form, STRATA_BENCH_KAFKA_LONG=1,
// also consumes with kafka-consumer-perf-test and, on Kafka only (Strata
// has no share groups yet), with kafka-share-consumer-perf-test.
func TestCompareKafkaSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Apache Kafka (about 30 s)")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	kafkajars.Need(t)
	mk := func(kind string) Workload {
		w := DefaultWorkload()
		w.Name, w.Kind, w.Partitions, w.RecordSize, w.NumRecords = "kafka-smoke-"+kind, kind, 2, 256, 5000
		return w
	}
	long := os.Getenv("STRATA_BENCH_KAFKA_LONG") != ""
	run := func(loadgen string, ws []Workload, brokers ...string) *Report {
		c := &CompareConfig{
			Workloads: ws,
			Brokers:   brokers,
			Rounds:    1,
			StrataSrc: "..",
			Loadgen:   loadgen,
			KafkaHeap: "512m",
			Command:   "test",
		}
		// Generous for a loaded machine (Kafka's start took 50 s at load
		// average 27 on 2 cores; 8 s on an idle one).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var progress bytes.Buffer
		rep, err := Compare(ctx, c, &progress)
		if err != nil {
			t.Fatalf("%v\n%s", err, progress.String())
		}
		t.Logf("%s", rep.Markdown())
		for _, wr := range rep.Workloads {
			for _, br := range wr.Brokers {
				if br.Skipped != "" {
					t.Errorf("%s %s skipped: %s", wr.Workload.Name, br.Name, br.Skipped)
					continue
				}
				if br.PeakRSSMiB <= 0 || br.ReadySeconds <= 0 {
					t.Errorf("%s %s: peak RSS %v MiB, ready after %v s", wr.Workload.Name, br.Name, br.PeakRSSMiB, br.ReadySeconds)
				}
				for _, s := range br.Samples {
					if s.Err != "" {
						t.Errorf("%s %s: %s", wr.Workload.Name, br.Name, s.Err)
						continue
					}
					r := s.Result
					if r.Records != 5000 || r.Loadgen == "" || r.LoadgenCPUSeconds <= 0 || s.Figures[FigMBps] <= 0 || s.Figures[FigBrokerCPU] <= 0 {
						t.Errorf("%s %s: %+v, figures %v", wr.Workload.Name, br.Name, r, s.Figures)
					}
					if r.Kind == KindProduce && (r.ProduceLatency == nil || r.ProduceLatency.MaxMs <= 0) {
						t.Errorf("%s %s: no latency: %+v", wr.Workload.Name, br.Name, r.ProduceLatency)
					}
				}
			}
		}
		return rep
	}
	if !long {
		run(LoadgenKafka, []Workload{mk(KindProduce)}, BrokerStrata, BrokerKafka)
		return
	}
	run(LoadgenKafka, []Workload{mk(KindProduce), mk(KindConsume)}, BrokerStrata, BrokerKafka)
	run(LoadgenKafkaShare, []Workload{mk(KindConsume)}, BrokerKafka)
}
