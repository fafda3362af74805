package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Result is what one run of a workload measured.
type Result struct {
	Kind            string   `json:"kind"`
	Records         int64    `json:"records"` // acknowledged (produce) or delivered (consume: in a group a rebalance can deliver an offset twice); e2e: produced
	Bytes           int64    `json:"bytes"`   // record keys and values
	Errors          int64    `json:"errors"`
	Seconds         float64  `json:"seconds"` // the measured phase
	RecordsPerSec   float64  `json:"records_per_sec"`
	MBPerSec        float64  `json:"mb_per_sec"` // MiB/s, as kafka-producer-perf-test
	ProduceLatency  *Latency `json:"produce_latency,omitempty"`
	E2ELatency      *Latency `json:"e2e_latency,omitempty"`
	ConsumedRecords int64    `json:"consumed_records,omitempty"`
	ConsumedBytes   int64    `json:"consumed_bytes,omitempty"`
	FirstRecordMs   float64  `json:"first_record_ms,omitempty"` // consume: client start to first record
	// MovedBytes is what the broker carried in the measured phase, the
	// denominator of CPU seconds per GB: produced plus consumed bytes.
	MovedBytes int64 `json:"moved_bytes"`
	// Loadgen names a load generator other than franz-go's (a Kafka
	// tool, loadgen.go); LoadgenCPUSeconds is its process's CPU time.
	Loadgen           string  `json:"loadgen,omitempty"`
	LoadgenCPUSeconds float64 `json:"loadgen_cpu_seconds,omitempty"`
	// MeasuredSeconds, when set, is the measured phase's wall time where
	// it differs from Seconds (a Kafka tool's figures leave out its JVM's
	// start and, consuming, the group join): broker cores divide by it.
	MeasuredSeconds float64 `json:"measured_seconds,omitempty"`
	// Share is the share workload's comparison (KindShare, share.go).
	Share *ShareFigures `json:"share,omitempty"`
}

// RunOptions are the knobs of one run that are not part of the workload.
type RunOptions struct {
	Bootstrap   []string
	TopicPrefix string // default "bench"
	// MeasureStart and MeasureEnd, if set, are called at the edges of the
	// measured phase (compare reads the broker's CPU time there); for
	// consume the fill before it is not measured.
	MeasureStart, MeasureEnd func()
	// KeepTopics leaves the topics behind (default: deleted after the run,
	// so a broker keeping records in memory does not carry them into the
	// next run).
	KeepTopics bool
	// Timeout bounds the whole run; default Duration + 2 min + a second
	// per 10 MiB of records asked for.
	Timeout time.Duration
	// Progress, if set, gets a line every ProgressEvery while producing.
	Progress      io.Writer
	ProgressEvery time.Duration
	// ReplicationFactor of the topics when the workload leaves it at 0
	// (default 1).
	ReplicationFactor int
	// BrokerCPU, if set, reads the broker's CPU seconds so far; the share
	// workload reads it at the edges of each of its two phases.
	BrokerCPU func() (float64, error)
}

// payload is random upper-case letters, as kafka-producer-perf-test sends.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'A' + byte(rand.IntN(26))
	}
	return b
}

func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("%w: compression %q: want none, gzip, snappy, lz4 or zstd", ErrWorkload, name)
}

func producerOpts(w *Workload, bootstrap []string) ([]kgo.Opt, error) {
	codec, err := compressionCodec(w.Compression)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap...),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(w.Linger),
		kgo.ProducerBatchMaxBytes(int32(w.BatchSize)),
		kgo.MaxBufferedRecords(1 << 16),
		kgo.ClientID("strata-bench"),
	}
	switch w.Acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	}
	if !w.Idempotence {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	return opts, nil
}

// topicNames are fresh per run, so no run reads another's records.
func topicNames(prefix string, n int) []string {
	if prefix == "" {
		prefix = "bench"
	}
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%s-%d", prefix, stamp, i)
	}
	return names
}

// createTopics creates the topics and waits (bounded) until every
// partition has a leader.
func createTopics(ctx context.Context, bootstrap []string, topics []string, partitions, rf int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ClientID("strata-bench-admin"))
	if err != nil {
		return fmt.Errorf("%w: admin client: %v", ErrRun, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// Wait for leaders: 10 s, plus 100 ms per partition (creating 1,000
	// partitions took Strata about 30 s), at most 5 minutes; the same
	// bound is the CreateTopics timeout the broker is given.
	wait := 10*time.Second + time.Duration(partitions*len(topics))*100*time.Millisecond
	if wait > 5*time.Minute {
		wait = 5 * time.Minute
	}
	adm.SetTimeoutMillis(int32(wait.Milliseconds()))
	// Topics answered with a retriable error (NOT_CONTROLLER while the
	// controller moves, or while a loaded broker applies the command
	// late) are asked for again, as Kafka's admin client does, until the
	// wait is over.
	todo := topics
	for retryUntil := time.Now().Add(wait); len(todo) > 0; {
		resp, err := adm.CreateTopics(ctx, int32(partitions), int16(rf), nil, todo...)
		if err != nil {
			return fmt.Errorf("%w: create topics: %v", ErrRun, err)
		}
		var again []string
		for _, r := range resp.Sorted() {
			// The names are new (they carry the time), so "already exists"
			// can only be this run's own request, retried by the client
			// after a broker took longer than the request timeout to
			// create many partitions, or retried here.
			switch {
			case r.Err == nil, errors.Is(r.Err, kerr.TopicAlreadyExists):
			case kerr.IsRetriable(r.Err) && time.Now().Before(retryUntil):
				again = append(again, r.Topic)
			default:
				return fmt.Errorf("%w: create topic %s: %v", ErrRun, r.Topic, r.Err)
			}
		}
		if todo = again; len(todo) > 0 {
			time.Sleep(500 * time.Millisecond)
		}
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
		md, err := adm.Metadata(ctx, topics...)
		if err == nil {
			ready := true
			for _, t := range topics {
				td, ok := md.Topics[t]
				if !ok || td.Err != nil || len(td.Partitions) != partitions {
					ready = false
					break
				}
				for _, p := range td.Partitions {
					if p.Leader < 0 || p.Err != nil {
						ready = false
					}
				}
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for topics: %v", ErrRun, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%w: topics have no leaders after %s", ErrRun, wait)
}

func deleteTopics(bootstrap []string, topics []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ClientID("strata-bench-admin"))
	if err != nil {
		return
	}
	defer cl.Close()
	kadm.NewClient(cl).DeleteTopics(ctx, topics...) // best effort: a failure only leaves data behind
}

// Run runs one workload against the broker at opts.Bootstrap.
func Run(ctx context.Context, w Workload, opts RunOptions) (*Result, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if len(opts.Bootstrap) == 0 {
		return nil, fmt.Errorf("%w: no bootstrap address", ErrUsage)
	}
	timeout := opts.Timeout
	if timeout == 0 {
		// The run's own length, 2 minutes, and a floor of 10 MiB/s for a
		// record count (consume writes it, then reads it).
		bytes := float64(w.NumRecords) * float64(w.RecordSize+64)
		timeout = w.Duration + 2*time.Minute + time.Duration(bytes/(10<<20)*float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	topics := topicNames(opts.TopicPrefix, w.Topics)
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
	start := func() {
		if opts.MeasureStart != nil {
			opts.MeasureStart()
		}
	}
	end := func() {
		if opts.MeasureEnd != nil {
			opts.MeasureEnd()
		}
	}
	switch w.Kind {
	case KindShare:
		return runShare(ctx, &w, opts, topics[0])
	case KindProduce:
		start()
		p, err := produceAll(ctx, &w, opts.Bootstrap, topics,
			&produceStats{progress: opts.Progress, every: opts.ProgressEvery})
		end()
		if err != nil {
			return nil, err
		}
		return p.result(KindProduce), nil
	case KindConsume:
		fill := w
		fill.Rate, fill.Duration = 0, 0
		if _, err := produceAll(ctx, &fill, opts.Bootstrap, topics, nil); err != nil {
			return nil, fmt.Errorf("filling the topics: %w", err)
		}
		start()
		perTopic := w.NumRecords / int64(w.Topics) // what produceAll's even split put in each
		c, err := consumeAll(ctx, &w, opts.Bootstrap, topics, perTopic, nil)
		end()
		if err != nil {
			return nil, err
		}
		if got := c.progress.Load(); got < c.target {
			return c.result(), fmt.Errorf("%w: consume: read %d of %d records: %v", ErrRun, got, c.target, ctx.Err())
		}
		return c.result(), nil
	default: // e2e
		start()
		r, err := runE2E(ctx, &w, opts, topics)
		end()
		return r, err
	}
}

// produceStats are the counters of all producers of one run.
type produceStats struct {
	hist     Histogram
	acked    atomic.Int64
	bytes    atomic.Int64
	errs     atomic.Int64
	firstErr atomic.Pointer[error]
	seconds  float64

	// Progress lines every `every` to progress (nil: none), as
	// kafka-producer-perf-test prints them; the window's latency sum,
	// count and max are reset by each line.
	progress     io.Writer
	every        time.Duration
	winSum, winN atomic.Int64
	winMax       atomic.Int64
}

// report prints one progress line per interval until stop is closed.
func (p *produceStats) report(stop <-chan struct{}) {
	t := time.NewTicker(p.every)
	defer t.Stop()
	last, lastBytes, lastAt := p.acked.Load(), p.bytes.Load(), time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			n, b := p.acked.Load(), p.bytes.Load()
			secs := now.Sub(lastAt).Seconds()
			sum, cnt, mx := p.winSum.Swap(0), p.winN.Swap(0), p.winMax.Swap(0)
			avg := 0.0
			if cnt > 0 {
				avg = float64(sum) / float64(cnt) / 1e6
			}
			fmt.Fprintf(p.progress, "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.\n",
				n-last, float64(n-last)/secs, float64(b-lastBytes)/MiB/secs, avg, float64(mx)/1e6)
			last, lastBytes, lastAt = n, b, now
		}
	}
}

func (p *produceStats) fail(err error) {
	p.errs.Add(1)
	p.firstErr.CompareAndSwap(nil, &err)
}

func (p *produceStats) result(kind string) *Result {
	r := &Result{Kind: kind, Records: p.acked.Load(), Bytes: p.bytes.Load(), Errors: p.errs.Load(), Seconds: p.seconds}
	if p.seconds > 0 {
		r.RecordsPerSec = float64(r.Records) / p.seconds
		r.MBPerSec = float64(r.Bytes) / MiB / p.seconds
	}
	l := p.hist.Summary()
	r.ProduceLatency = &l
	r.MovedBytes = r.Bytes
	return r
}

// produceAll runs ProducersPerTopic producers per topic, each with its
// share of NumRecords and of Rate, until the count or the duration is
// reached, and waits for every acknowledgement. The counters go to st
// (a fresh one if nil): e2e's consumers watch its acknowledged count.
func produceAll(ctx context.Context, w *Workload, bootstrap, topics []string, st *produceStats) (*produceStats, error) {
	opts, err := producerOpts(w, bootstrap)
	if err != nil {
		return nil, err
	}
	n := len(topics) * w.ProducersPerTopic
	if st == nil {
		st = &produceStats{}
	}
	value := payload(w.RecordSize)
	var keys [][]byte
	for i := 0; i < w.Keys; i++ {
		keys = append(keys, []byte("key-"+strconv.Itoa(i)))
	}
	clients := make([]*kgo.Client, 0, n)
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for i := 0; i < n; i++ {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, fmt.Errorf("%w: producer: %v", ErrRun, err)
		}
		clients = append(clients, cl)
	}
	var wg sync.WaitGroup
	began := time.Now()
	warmEnd := began.Add(w.Warmup)
	var deadline time.Time
	if w.Duration > 0 {
		deadline = began.Add(w.Duration)
	}
	for i, cl := range clients {
		share := int64(0)
		if w.NumRecords > 0 {
			share = w.NumRecords / int64(n)
			if int64(i) < w.NumRecords%int64(n) {
				share++
			}
		}
		rate := w.Rate / float64(n)
		topic := topics[i%len(topics)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			produceOne(ctx, cl, w, st, produceJob{topic: topic, count: share, rate: rate, began: began,
				deadline: deadline, warmEnd: warmEnd, value: value, keys: keys})
		}()
	}
	if st.progress != nil && st.every > 0 {
		stop, finished := make(chan struct{}), make(chan struct{})
		defer func() { close(stop); <-finished }() // no line after produceAll returns
		go func() { defer close(finished); st.report(stop) }()
	}
	wg.Wait()
	st.seconds = time.Since(began).Seconds()
	if ctx.Err() != nil {
		return st, fmt.Errorf("%w: produce: %v", ErrRun, ctx.Err())
	}
	if e := st.firstErr.Load(); e != nil && st.acked.Load() == 0 {
		return st, fmt.Errorf("%w: every produce failed: %v", ErrRun, *e)
	}
	return st, nil
}

type produceJob struct {
	topic    string
	count    int64 // 0 = until deadline
	rate     float64
	began    time.Time
	deadline time.Time
	warmEnd  time.Time
	value    []byte
	keys     [][]byte
}

// produceOne is one producer's loop. Latency is from the Produce call to
// the acknowledgement, as kafka-producer-perf-test measures it; the send
// time rides in Record.Timestamp (and, for e2e, in the value's first 8
// bytes, since a record's timestamp comes back in milliseconds only).
func produceOne(ctx context.Context, cl *kgo.Client, w *Workload, st *produceStats, job produceJob) {
	e2e := w.Kind == KindE2E
	pool := sync.Pool{New: func() any { return new(kgo.Record) }}
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			st.fail(err)
		} else {
			st.acked.Add(1)
			st.bytes.Add(int64(len(r.Key) + len(r.Value)))
			lat := time.Since(r.Timestamp)
			if !r.Timestamp.Before(job.warmEnd) {
				st.hist.Record(lat)
			}
			if st.progress != nil {
				st.winSum.Add(int64(lat))
				st.winN.Add(1)
				for m := st.winMax.Load(); int64(lat) > m && !st.winMax.CompareAndSwap(m, int64(lat)); m = st.winMax.Load() {
				}
			}
		}
		if !e2e {
			*r = kgo.Record{}
			pool.Put(r)
		}
	}
	var i int64
	for ; job.count == 0 || i < job.count; i++ {
		now := time.Now()
		if !job.deadline.IsZero() && !now.Before(job.deadline) {
			break
		}
		if ctx.Err() != nil {
			break
		}
		if job.rate > 0 {
			// Pace by schedule, not by sleeping per record: record i is due
			// at began + i/rate; sleep (at least 1 ms, timers are coarse)
			// only when ahead.
			due := job.began.Add(time.Duration(float64(i) / job.rate * float64(time.Second)))
			if ahead := due.Sub(now); ahead > 0 {
				if ahead < time.Millisecond {
					ahead = time.Millisecond
				}
				select {
				case <-ctx.Done():
				case <-time.After(ahead):
				}
				now = time.Now()
			}
		}
		r := pool.Get().(*kgo.Record)
		r.Topic = job.topic
		r.Timestamp = now
		if e2e {
			v := make([]byte, len(job.value))
			copy(v, job.value)
			binary.BigEndian.PutUint64(v, uint64(now.UnixNano()))
			r.Value = v
		} else {
			r.Value = job.value
		}
		if len(job.keys) > 0 {
			r.Key = job.keys[i%int64(len(job.keys))]
		}
		cl.Produce(ctx, r, promise)
	}
	if err := cl.Flush(ctx); err != nil {
		st.fail(err)
	}
}

// consumeStats are the counters of all consumers of one run.
type consumeStats struct {
	hist       Histogram
	records    atomic.Int64
	bytes      atomic.Int64
	firstNanos atomic.Int64 // client start to first record, first consumer to see one
	target     int64        // consume: distinct offsets all readers together must read
	seconds    float64

	// progress counts distinct offsets read, summed over subscriptions
	// and partitions (the next offset of each): what "done" is judged by.
	// records counts deliveries, which in a consumer group can repeat an
	// offset after a rebalance (no commits), so it cannot serve.
	progress atomic.Int64
	mu       sync.Mutex
	next     map[partKey]int64
}

// partKey is one partition as one subscription reads it.
type partKey struct {
	sub       int
	topic     string
	partition int32
}

// advance records that subscription k has read up to next (exclusive).
func (c *consumeStats) advance(k partKey, next int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == nil {
		c.next = map[partKey]int64{}
	}
	if old := c.next[k]; next > old {
		c.next[k] = next
		c.progress.Add(next - old)
	}
}

func (c *consumeStats) result() *Result {
	r := &Result{Kind: KindConsume, Records: c.records.Load(), Bytes: c.bytes.Load(), Seconds: c.seconds,
		ConsumedRecords: c.records.Load(), ConsumedBytes: c.bytes.Load(),
		FirstRecordMs: float64(c.firstNanos.Load()) / 1e6}
	if c.seconds > 0 {
		r.RecordsPerSec = float64(r.Records) / c.seconds
		r.MBPerSec = float64(r.Bytes) / MiB / c.seconds
	}
	r.MovedBytes = r.Bytes
	return r
}

// consumeAll reads every topic with Subscriptions independent readers
// (each reads every record, as a consumer group would), each split over
// ConsumersPerSubscription clients. By default partitions are assigned
// round-robin (kgo ConsumePartitions), never subscribed, so the tool works
// against a broker without consumer groups; with ConsumerGroups each
// subscription is a real group (kgo ConsumerGroup, from the earliest
// offset, no commits) and the broker's coordinator splits the partitions.
// The readers stop once together they have read perTopic records of every
// topic per subscription (or, for e2e, once the producers are done and
// every acknowledged record has been read).
func consumeAll(ctx context.Context, w *Workload, bootstrap, topics []string, perTopic int64, e2e *e2eState) (*consumeStats, error) {
	st := &consumeStats{target: perTopic * int64(len(topics)) * int64(w.Subscriptions)}
	began := time.Now()
	var clients []*kgo.Client
	var subs []int // the subscription of each client
	var assignMu sync.Mutex
	assigned := map[*kgo.Client]bool{}
	total := 0 // clients, known once all are made
	markReady := func() {
		if e2e != nil {
			e2e.readyOnce.Do(func() { close(e2e.ready) })
		}
	}
	onAssigned := func(_ context.Context, cl *kgo.Client, _ map[string][]int32) {
		assignMu.Lock()
		defer assignMu.Unlock()
		assigned[cl] = true
		if total > 0 && len(assigned) == total {
			markReady()
		}
	}
	fail := func(err error) (*consumeStats, error) {
		for _, cl := range clients {
			cl.Close()
		}
		return nil, fmt.Errorf("%w: consumer: %v", ErrRun, err)
	}
	for _, topic := range topics {
		for s := 0; s < w.Subscriptions; s++ {
			for c := 0; c < w.ConsumersPerSubscription; c++ {
				opts := []kgo.Opt{kgo.SeedBrokers(bootstrap...), kgo.ClientID("strata-bench-consumer"),
					kgo.FetchMaxWait(500 * time.Millisecond)}
				if w.ConsumerGroups {
					opts = append(opts, kgo.ConsumerGroup(fmt.Sprintf("%s-sub%d", topic, s)), kgo.ConsumeTopics(topic),
						kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
						kgo.OnPartitionsAssigned(onAssigned))
				} else {
					parts := map[int32]kgo.Offset{}
					for p := c; p < w.Partitions; p += w.ConsumersPerSubscription {
						parts[int32(p)] = kgo.NewOffset().At(0)
					}
					if len(parts) == 0 {
						continue
					}
					opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
				}
				cl, err := kgo.NewClient(opts...)
				if err != nil {
					return fail(err)
				}
				clients = append(clients, cl)
				subs = append(subs, s)
			}
		}
	}
	assignMu.Lock()
	total = len(clients)
	if !w.ConsumerGroups || len(assigned) == total {
		markReady()
	}
	assignMu.Unlock()
	// How the partitioner spread the records over partitions is not
	// known, so all readers share one counter.
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			consumeOne(ctx, cl, st, subs[i], began, e2e)
		}()
	}
	wg.Wait()
	st.seconds = time.Since(began).Seconds()
	return st, nil
}

// e2eState is shared by e2e's producers and consumers: the consumers stop
// when the producers are done and every acknowledged record has been read
// by every subscription (or the drain deadline passes).
type e2eState struct {
	acked   *atomic.Int64
	done    atomic.Bool
	warmEnd atomic.Int64 // unix nanos: records sent earlier are read but not timed
	// ready is closed once every consumer can read: at once for assigned
	// partitions, after each group member's first assignment otherwise, so
	// that joining a group is not counted as end-to-end latency.
	ready     chan struct{}
	readyOnce sync.Once
	readers   int64 // subscriptions: each reads every record once
}

func consumeOne(ctx context.Context, cl *kgo.Client, st *consumeStats, sub int, began time.Time, e2e *e2eState) {
	for !st.done(e2e) {
		// A short poll, so that a reader whose partitions are drained
		// notices when the others have finished (PollRecords otherwise
		// waits for records that will never come).
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fetches := cl.PollRecords(pctx, 10000)
		cancel()
		now := time.Now()
		if ctx.Err() != nil {
			return // the caller decides whether enough was read
		}
		var n, b int64
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			for _, r := range p.Records {
				n++
				b += int64(len(r.Key) + len(r.Value))
				if e2e != nil && len(r.Value) >= 8 {
					sentAt := int64(binary.BigEndian.Uint64(r.Value))
					if sentAt >= e2e.warmEnd.Load() {
						st.hist.Record(time.Duration(now.UnixNano() - sentAt))
					}
				}
			}
			st.advance(partKey{sub, p.Topic, p.Partition}, p.Records[len(p.Records)-1].Offset+1)
		})
		if n > 0 {
			st.firstNanos.CompareAndSwap(0, int64(now.Sub(began)))
			st.bytes.Add(b)
			st.records.Add(n)
		}
	}
}

// done says whether all readers together have read what they must.
func (c *consumeStats) done(e2e *e2eState) bool {
	read := c.progress.Load()
	if e2e != nil {
		return e2e.done.Load() && read >= e2e.acked.Load()*e2e.readers
	}
	return read >= c.target
}

// runE2E produces at the workload's rate while the consumers read; the
// end-to-end latency of a record is the consumer's clock at the poll that
// returned it minus the send time in its first 8 bytes (one process, one
// clock).
func runE2E(ctx context.Context, w *Workload, opts RunOptions, topics []string) (*Result, error) {
	bootstrap := opts.Bootstrap
	e2e := &e2eState{readers: int64(w.Subscriptions), ready: make(chan struct{})}
	e2e.warmEnd.Store(math.MaxInt64)
	type cres struct {
		st  *consumeStats
		err error
	}
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	cdone := make(chan cres, 1)
	pst := &produceStats{progress: opts.Progress, every: opts.ProgressEvery}
	e2e.acked = &pst.acked
	go func() {
		st, err := consumeAll(cctx, w, bootstrap, topics, 0, e2e)
		cdone <- cres{st, err}
	}()
	// Wait (bounded) for the consumers: a group that never forms shows up
	// as records not read, below.
	select {
	case <-e2e.ready:
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	e2e.warmEnd.Store(time.Now().Add(w.Warmup).UnixNano())
	p, err := produceAll(ctx, w, bootstrap, topics, pst)
	if err != nil {
		ccancel()
		<-cdone
		return nil, err
	}
	e2e.done.Store(true)
	// Bounded drain: a record the broker acknowledged but never serves
	// must not hang the run.
	var c cres
	select {
	case c = <-cdone:
	case <-time.After(10 * time.Second):
		ccancel()
		c = <-cdone
	}
	if c.err != nil {
		return nil, c.err
	}
	r := p.result(KindE2E)
	r.ConsumedRecords = c.st.records.Load()
	r.ConsumedBytes = c.st.bytes.Load()
	r.MovedBytes = r.Bytes + r.ConsumedBytes
	l := c.st.hist.Summary()
	r.E2ELatency = &l
	if want, got := r.Records*int64(w.Subscriptions), c.st.progress.Load(); got < want {
		return r, fmt.Errorf("%w: e2e: read %d of %d records within 10s of the last send", ErrRun, got, want)
	}
	return r, nil
}
