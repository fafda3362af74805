package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Exit codes of Main, as the strata binary uses them.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// Main runs `strata bench <command> [flags]` and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usageText)
		return exitOK
	case "produce", "consume", "e2e":
		var c *cliRun
		c, err = ParseRunFlags(args[0], args[1:], stderr)
		if err == nil {
			err = runCLI(ctx, c, stdout, stderr)
		}
	case "share":
		var c *cliRun
		c, err = ParseShareFlags(args[1:], stderr)
		if err == nil {
			err = runCLI(ctx, c, stdout, stderr)
		}
	case "workload":
		var c *cliRun
		c, err = ParseWorkloadFlags(args[1:], stderr)
		if err == nil {
			err = runCLI(ctx, c, stdout, stderr)
		}
	case "compare":
		var c *CompareConfig
		c, err = ParseCompareFlags(args[1:], stderr)
		if err == nil {
			err = compareCLI(ctx, c, stdout, stderr)
		}
	case "idle":
		var c *IdleConfig
		c, err = ParseIdleFlags(args[1:], stderr)
		if err == nil {
			err = idleCLI(ctx, c, stdout, stderr)
		}
	case "null-server":
		err = nullServerMain(ctx, args[1:], stdout, stderr)
	case "kfake-server":
		err = kfakeServerMain(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "strata bench: unknown command %q\n\n%s", args[0], usageText)
		return exitUsage
	}
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, ErrUsage), errors.Is(err, ErrWorkload):
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	fmt.Fprintln(stderr, err)
	return exitError
}

const usageText = `Usage: strata bench <command> [flags]

Load tool for any Kafka-compatible broker (franz-go client, Kafka protocol only).

Commands:
  produce   like kafka-producer-perf-test: records/s, MB/s, latency percentiles
  consume   like kafka-consumer-perf-test: fills a topic, then reads it back
  e2e       fixed producer rate, consumer measures end-to-end latency
  share     share group (KIP-932) workers accepting every record vs a classic group
  workload  run a workload file (OpenMessaging-Benchmark style, see bench/doc.go)
  compare   run workload files against several brokers it starts, interleaved
  idle      a Strata cluster's idle CPU and RSS with many partitions (dev-cluster)

strata bench <command> --help lists a command's flags. MB is MiB (2^20 bytes).
`

// cliRun is a parsed produce/consume/e2e/workload command line.
type cliRun struct {
	Workload    Workload
	Bootstrap   []string
	TopicPrefix string
	JSON        bool
	Every       time.Duration // progress lines while producing, 0 = none
	Loadgen     string        // workload only: LoadgenFranz (default), LoadgenKafka, LoadgenKafkaShare
	BrokerPID   int           // share only: the broker's process, for its CPU time (0 = unknown)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ParseRunFlags parses the flags of produce, consume or e2e. The names
// follow kafka-producer-perf-test where it has one (--num-records,
// --record-size, --throughput with -1 for no limit).
func ParseRunFlags(kind string, args []string, stderr io.Writer) (*cliRun, error) {
	w := DefaultWorkload()
	w.Kind = kind
	c := &cliRun{}
	fs := flag.NewFlagSet("bench "+kind, flag.ContinueOnError)
	fs.SetOutput(stderr)
	bootstrap := fs.String("bootstrap-server", "127.0.0.1:9092", "broker `host:port` list, comma-separated")
	fs.StringVar(&c.TopicPrefix, "topic-prefix", "bench", "prefix of the fresh topics each run creates (and deletes)")
	fs.BoolVar(&c.JSON, "json", false, "print the result as JSON")
	fs.DurationVar(&c.Every, "reporting-interval", 5*time.Second, "print a progress line this often while producing (to stderr), 0 = never")
	fs.IntVar(&w.Partitions, "partitions", 1, "partitions of the topic")
	fs.IntVar(&w.Topics, "topics", 1, "topics")
	fs.IntVar(&w.ReplicationFactor, "replication-factor", 1, "replication factor of the topics the run creates")
	fs.IntVar(&w.RecordSize, "record-size", 1024, "value bytes per record")
	fs.Int64Var(&w.NumRecords, "num-records", 0, "records to produce (consume: to fill and read back)")
	fs.DurationVar(&w.Duration, "duration", 0, "run for this long (with or instead of --num-records)")
	acks := fs.String("acks", "all", "acks: all (-1), 1 or 0")
	idem := fs.Bool("idempotence", true, "idempotent producer (needs acks=all; off by default with other acks)")
	fs.StringVar(&w.Compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	fs.DurationVar(&w.Linger, "linger", 0, "producer linger (kgo ProducerLinger)")
	fs.IntVar(&w.BatchSize, "batch-size", 1<<20, "largest record batch in bytes (kgo ProducerBatchMaxBytes)")
	fs.IntVar(&w.Keys, "keys", 0, "distinct record keys, 0 = no keys (sticky partitioning)")
	fs.IntVar(&w.ProducersPerTopic, "producers", 1, "producer clients per topic")
	switch kind {
	case KindProduce:
		fs.Float64Var(&w.Rate, "throughput", -1, "records/s over all producers, -1 = no limit")
	case KindConsume:
		fs.IntVar(&w.ConsumersPerSubscription, "consumers", 1, "consumer clients, partitions assigned round-robin")
		fs.BoolVar(&w.ConsumerGroups, "groups", false, "consume in a consumer group instead of assigning partitions")
	case KindE2E:
		fs.Float64Var(&w.Rate, "throughput", 5000, "records/s over all producers")
		fs.DurationVar(&w.Warmup, "warmup", time.Second, "latencies of records sent in the first part of the run are not counted")
		fs.IntVar(&w.ConsumersPerSubscription, "consumers", 1, "consumer clients, partitions assigned round-robin")
		fs.BoolVar(&w.ConsumerGroups, "groups", false, "consume in a consumer group instead of assigning partitions")
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if w.Rate < 0 {
		w.Rate = 0
	}
	if kind == KindE2E && w.Duration == 0 && w.NumRecords == 0 {
		w.Duration = 10 * time.Second
	}
	w.Acks = normalAcks(*acks)
	w.Idempotence = *idem
	explicit := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "idempotence" {
			explicit = true
		}
	})
	if !explicit && w.Acks != "all" {
		w.Idempotence = false
	}
	c.Bootstrap = splitList(*bootstrap)
	if len(c.Bootstrap) == 0 {
		return nil, fmt.Errorf("%w: --bootstrap-server is empty", ErrUsage)
	}
	w.Name = kind
	if err := w.Validate(); err != nil {
		return nil, err
	}
	c.Workload = w
	return c, nil
}

// ParseWorkloadFlags parses `workload [flags] FILE`.
func ParseWorkloadFlags(args []string, stderr io.Writer) (*cliRun, error) {
	c := &cliRun{}
	fs := flag.NewFlagSet("bench workload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bootstrap := fs.String("bootstrap-server", "127.0.0.1:9092", "broker `host:port` list, comma-separated")
	fs.StringVar(&c.TopicPrefix, "topic-prefix", "bench", "prefix of the fresh topics the run creates (and deletes)")
	fs.BoolVar(&c.JSON, "json", false, "print the result as JSON")
	fs.DurationVar(&c.Every, "reporting-interval", 5*time.Second, "print a progress line this often while producing (to stderr), 0 = never")
	fs.StringVar(&c.Loadgen, "loadgen", LoadgenFranz, "load generator: franz (franz-go, this process), kafka (kafka-producer-perf-test, kafka-consumer-perf-test) or kafka-share (consume with kafka-share-consumer-perf-test)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := checkLoadgen(c.Loadgen); err != nil {
		return nil, err
	}
	if fs.NArg() != 1 {
		return nil, fmt.Errorf("%w: want one workload file", ErrUsage)
	}
	w, err := readWorkloadFile(fs.Arg(0))
	if err != nil {
		return nil, err
	}
	c.Workload = w
	c.Bootstrap = splitList(*bootstrap)
	if len(c.Bootstrap) == 0 {
		return nil, fmt.Errorf("%w: --bootstrap-server is empty", ErrUsage)
	}
	return c, nil
}

func readWorkloadFile(path string) (Workload, error) {
	f, err := os.Open(path)
	if err != nil {
		return Workload{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	defer f.Close()
	w, err := ParseWorkload(f)
	if err != nil {
		return w, fmt.Errorf("%s: %w", path, err)
	}
	if w.Name == "" {
		w.Name = strings.TrimSuffix(strings.TrimSuffix(baseName(path), ".yaml"), ".yml")
	}
	return w, nil
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func runCLI(ctx context.Context, c *cliRun, stdout, stderr io.Writer) error {
	opts := RunOptions{Bootstrap: c.Bootstrap, TopicPrefix: c.TopicPrefix, Progress: stderr, ProgressEvery: c.Every}
	if pid := c.BrokerPID; pid > 0 {
		opts.BrokerCPU = func() (float64, error) { return ProcCPU(pid) }
	}
	var res *Result
	var err error
	if c.Loadgen == "" || c.Loadgen == LoadgenFranz {
		res, err = Run(ctx, c.Workload, opts)
	} else {
		res, err = RunKafkaTool(ctx, c.Workload, opts, c.Loadgen)
	}
	if res != nil {
		if c.JSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.Encode(res)
		} else {
			fmt.Fprintln(stdout, FormatResult(res))
		}
	}
	return err
}

// FormatResult prints a result the way Kafka's perf tools do.
func FormatResult(r *Result) string {
	var b strings.Builder
	switch r.Kind {
	case KindShare:
		b.WriteString(formatShare(r))
	case KindConsume:
		fmt.Fprintf(&b, "data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, time.to.first.record.ms\n")
		fmt.Fprintf(&b, "%.4f, %.4f, %d, %.4f, %.1f", float64(r.Bytes)/MiB, r.MBPerSec, r.Records, r.RecordsPerSec, r.FirstRecordMs)
	default:
		l := r.ProduceLatency
		if l == nil {
			l = &Latency{}
		}
		fmt.Fprintf(&b, "%d records sent, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, "+
			"%.2f ms 50th, %.2f ms 95th, %.2f ms 99th, %.2f ms 99.9th.", r.Records, r.RecordsPerSec, r.MBPerSec,
			l.AvgMs, l.MaxMs, l.P50Ms, l.P95Ms, l.P99Ms, l.P999)
		if r.Errors > 0 {
			fmt.Fprintf(&b, " %d errors.", r.Errors)
		}
		if e := r.E2ELatency; e != nil {
			fmt.Fprintf(&b, "\nend-to-end: %d records read, %.2f ms avg, %.2f ms 50th, %.2f ms 95th, %.2f ms 99th, "+
				"%.2f ms 99.9th, %.2f ms max.", r.ConsumedRecords, e.AvgMs, e.P50Ms, e.P95Ms, e.P99Ms, e.P999, e.MaxMs)
		}
	}
	return b.String()
}
