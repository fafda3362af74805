package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Errors of the package; callers test them with errors.Is.
var (
	ErrUsage    = errors.New("bench: usage")
	ErrWorkload = errors.New("bench: bad workload")
	ErrBroker   = errors.New("bench: broker")
	ErrRun      = errors.New("bench: run failed")
)

// Kinds of workload.
const (
	KindProduce = "produce" // producers only: throughput and produce latency
	KindConsume = "consume" // fill the topics first (not measured), then consumers only
	KindE2E     = "e2e"     // producers and consumers at once: end-to-end latency
	// KindShare (share.go): fill, then a classic group and a share group
	// of consumerPerSubscription members each read every record.
)

// Workload is one benchmark: what produce, consume and e2e run, what a
// workload file describes, and what compare repeats against each broker.
type Workload struct {
	Name                     string        `json:"name"`
	Kind                     string        `json:"kind"`
	Topics                   int           `json:"topics"`
	Partitions               int           `json:"partitions_per_topic"`
	RecordSize               int           `json:"record_size"`
	NumRecords               int64         `json:"num_records"`   // total over all producers; 0 = until Duration
	Duration                 time.Duration `json:"duration"`      // 0 = until NumRecords
	Warmup                   time.Duration `json:"warmup"`        // latencies of records sent earlier are not counted
	Rate                     float64       `json:"producer_rate"` // records/s over all producers; 0 = as fast as possible
	Acks                     string        `json:"acks"`          // all, 1 or 0
	Idempotence              bool          `json:"idempotence"`
	Compression              string        `json:"compression"` // none, gzip, snappy, lz4, zstd
	Linger                   time.Duration `json:"linger"`
	BatchSize                int           `json:"batch_size"` // bytes; kgo's ProducerBatchMaxBytes
	Keys                     int           `json:"keys"`       // distinct keys, 0 = no keys
	ProducersPerTopic        int           `json:"producers_per_topic"`
	Subscriptions            int           `json:"subscriptions_per_topic"` // consumer groups: each reads every record
	ConsumersPerSubscription int           `json:"consumers_per_subscription"`
	// ConsumerGroups makes each subscription a consumer group; the default
	// (false) assigns partitions, which works on brokers without groups.
	ConsumerGroups bool `json:"consumer_groups"`
	// ReplicationFactor of the topics the run creates; 0 leaves it to the
	// run (RunOptions.ReplicationFactor: compare gives 3 to the strata-3
	// cluster and 1 to single brokers; 1 otherwise).
	ReplicationFactor int `json:"replication_factor,omitempty"`
}

// Limits on what a workload may ask for: a typo must not try to open a
// million clients or allocate a terabyte.
const (
	maxTopics       = 1000
	maxPartitions   = 10000
	maxRecordSize   = 64 << 20
	maxClients      = 256
	maxKeys         = 1 << 20
	maxBatchSize    = 64 << 20
	maxWorkloadFile = 1 << 20
	maxReplication  = 16
)

// DefaultWorkload is the starting point of flags and workload files.
func DefaultWorkload() Workload {
	return Workload{
		Kind:                     KindProduce,
		Topics:                   1,
		Partitions:               1,
		RecordSize:               1024,
		Acks:                     "all",
		Idempotence:              true,
		Compression:              "none",
		BatchSize:                1 << 20,
		ProducersPerTopic:        1,
		Subscriptions:            1,
		ConsumersPerSubscription: 1,
	}
}

// Validate checks the limits and combinations.
func (w *Workload) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrWorkload, fmt.Sprintf(format, a...))
	}
	switch w.Kind {
	case KindProduce, KindConsume, KindE2E, KindShare:
	default:
		return bad("kind %q: want produce, consume, e2e or share", w.Kind)
	}
	switch {
	case w.Topics < 1 || w.Topics > maxTopics:
		return bad("topics %d: want 1..%d", w.Topics, maxTopics)
	case w.Partitions < 1 || w.Partitions > maxPartitions:
		return bad("partitions %d: want 1..%d", w.Partitions, maxPartitions)
	case w.RecordSize < 0 || w.RecordSize > maxRecordSize:
		return bad("record size %d: want 0..%d", w.RecordSize, maxRecordSize)
	case w.Kind == KindE2E && w.RecordSize < 8:
		return bad("record size %d: e2e needs at least 8 bytes for the send time", w.RecordSize)
	case w.NumRecords < 0:
		return bad("num records %d is negative", w.NumRecords)
	case w.Duration < 0 || w.Warmup < 0 || w.Linger < 0:
		return bad("negative duration")
	case w.NumRecords == 0 && w.Duration == 0:
		return bad("give a record count or a duration")
	case (w.Kind == KindConsume || w.Kind == KindShare) && w.NumRecords == 0:
		return bad("%s needs a record count (the records to fill the topics with)", w.Kind)
	case w.Kind == KindShare && (w.Topics != 1 || w.Subscriptions != 1):
		return bad("share reads one topic with one share group beside one classic group: want topics 1, subscriptionsPerTopic 1")
	case w.Rate < 0:
		return bad("producer rate %v is negative", w.Rate)
	case w.BatchSize < 1 || w.BatchSize > maxBatchSize:
		return bad("batch size %d: want 1..%d", w.BatchSize, maxBatchSize)
	case w.Keys < 0 || w.Keys > maxKeys:
		return bad("keys %d: want 0..%d", w.Keys, maxKeys)
	case w.ProducersPerTopic < 1 || w.Topics*w.ProducersPerTopic > maxClients:
		return bad("producers per topic %d: want 1 and at most %d producers in all", w.ProducersPerTopic, maxClients)
	case w.Subscriptions < 0 || w.ConsumersPerSubscription < 1 ||
		w.Topics*w.Subscriptions*w.ConsumersPerSubscription > maxClients:
		return bad("subscriptions %d x consumers %d: at most %d consumers in all", w.Subscriptions, w.ConsumersPerSubscription, maxClients)
	case w.ReplicationFactor < 0 || w.ReplicationFactor > maxReplication:
		return bad("replication factor %d: want 1..%d (0 = the run's default)", w.ReplicationFactor, maxReplication)
	case w.Kind != KindProduce && w.Subscriptions < 1:
		return bad("%s needs at least one subscription", w.Kind)
	}
	switch w.Acks {
	case "all", "1", "0":
	default:
		return bad("acks %q: want all, 1 or 0", w.Acks)
	}
	if w.Idempotence && w.Acks != "all" {
		return bad("idempotence needs acks=all")
	}
	if _, err := compressionCodec(w.Compression); err != nil {
		return err
	}
	return nil
}

// The workload file: one "key: value" per line, '#' starts a comment,
// blank lines are skipped. The keys are those of the OpenMessaging
// Benchmark's workload YAML where one exists (a flat OMB file parses),
// plus Strata's for what OMB sets in its driver file. See doc.go.
var workloadKeys = map[string]func(w *Workload, v string) error{
	"name": func(w *Workload, v string) error { w.Name = v; return nil },
	"kind": func(w *Workload, v string) error { w.Kind = v; return nil },
	"topics": func(w *Workload, v string) error {
		return parseInt(v, &w.Topics)
	},
	"partitionsPerTopic": func(w *Workload, v string) error { return parseInt(v, &w.Partitions) },
	"messageSize":        func(w *Workload, v string) error { return parseInt(v, &w.RecordSize) },
	"numRecords":         func(w *Workload, v string) error { return parseInt64(v, &w.NumRecords) },
	"producerRate":       func(w *Workload, v string) error { return parseRate(v, &w.Rate) },
	"producersPerTopic":  func(w *Workload, v string) error { return parseInt(v, &w.ProducersPerTopic) },
	"subscriptionsPerTopic": func(w *Workload, v string) error {
		return parseInt(v, &w.Subscriptions)
	},
	"consumerPerSubscription": func(w *Workload, v string) error { return parseInt(v, &w.ConsumersPerSubscription) },
	"testDurationMinutes": func(w *Workload, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 24*60 {
			return fmt.Errorf("want minutes 0..1440")
		}
		w.Duration = time.Duration(f * float64(time.Minute))
		return nil
	},
	"duration":       func(w *Workload, v string) error { return parseDuration(v, &w.Duration) },
	"warmup":         func(w *Workload, v string) error { return parseDuration(v, &w.Warmup) },
	"acks":           func(w *Workload, v string) error { w.Acks = normalAcks(v); return nil },
	"idempotence":    func(w *Workload, v string) error { return parseBool(v, &w.Idempotence) },
	"compression":    func(w *Workload, v string) error { w.Compression = v; return nil },
	"linger":         func(w *Workload, v string) error { return parseDuration(v, &w.Linger) },
	"batchSize":      func(w *Workload, v string) error { return parseInt(v, &w.BatchSize) },
	"keys":           func(w *Workload, v string) error { return parseInt(v, &w.Keys) },
	"consumerGroups": func(w *Workload, v string) error { return parseBool(v, &w.ConsumerGroups) },
	// OMB sets it in the driver file (replicationFactor there too).
	"replicationFactor": func(w *Workload, v string) error { return parseInt(v, &w.ReplicationFactor) },
	// OMB keys that do not change what this tool does; accepted so an OMB
	// file parses. keyDistributor NO_KEY is keys: 0, anything else needs
	// keys: N; payloadFile is replaced by random letters of messageSize.
	"keyDistributor":        func(w *Workload, v string) error { return nil },
	"payloadFile":           func(w *Workload, v string) error { return nil },
	"consumerBacklogSizeGB": func(w *Workload, v string) error { return nil },
}

// ParseWorkload reads a workload file (at most 1 MiB).
func ParseWorkload(r io.Reader) (Workload, error) {
	w := DefaultWorkload()
	w.Kind = KindE2E // OMB's workloads produce and consume at once
	sc := bufio.NewScanner(io.LimitReader(r, maxWorkloadFile))
	line := 0
	seen := map[string]bool{}
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		text = strings.TrimSpace(text)
		if text == "" || text == "---" {
			continue
		}
		k, v, ok := strings.Cut(text, ":")
		if !ok {
			return w, fmt.Errorf("%w: line %d: want key: value", ErrWorkload, line)
		}
		k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"'`)
		set := workloadKeys[k]
		if set == nil {
			return w, fmt.Errorf("%w: line %d: unknown key %q", ErrWorkload, line, k)
		}
		if seen[k] {
			return w, fmt.Errorf("%w: line %d: %q given twice", ErrWorkload, line, k)
		}
		seen[k] = true
		if err := set(&w, v); err != nil {
			return w, fmt.Errorf("%w: line %d: %s: %v", ErrWorkload, line, k, err)
		}
	}
	if err := sc.Err(); err != nil {
		return w, fmt.Errorf("%w: %v", ErrWorkload, err)
	}
	if !seen["idempotence"] && w.Acks != "all" {
		w.Idempotence = false
	}
	if err := w.Validate(); err != nil {
		return w, err
	}
	return w, nil
}

func parseInt(v string, dst *int) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("not an integer: %q", v)
	}
	*dst = n
	return nil
}

func parseInt64(v string, dst *int64) error {
	n, err := strconv.ParseInt(strings.ReplaceAll(v, "_", ""), 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: %q", v)
	}
	*dst = n
	return nil
}

func parseRate(v string, dst *float64) error {
	f, err := strconv.ParseFloat(strings.ReplaceAll(v, "_", ""), 64)
	if err != nil || f < 0 {
		return fmt.Errorf("not a rate: %q", v)
	}
	*dst = f
	return nil
}

func parseDuration(v string, dst *time.Duration) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("not a duration (like 10s, 500ms): %q", v)
	}
	*dst = d
	return nil
}

func parseBool(v string, dst *bool) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("not true or false: %q", v)
	}
	*dst = b
	return nil
}

// normalAcks maps Kafka's spellings to ours: -1 and all are all.
func normalAcks(v string) string {
	if v == "-1" {
		return "all"
	}
	return v
}
