package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KindShare is the share-consume workload: fill one topic (not measured),
// read it all with a classic consumer group of N members, then with a
// share group (KIP-932) of N workers that accept every record; records/s
// of both, their ratio, and the broker's CPU per record of each phase.
const KindShare = "share"

// ShareFigures are what the share workload adds to a Result: the classic
// group's phase beside the share group's (Result's Records, Seconds,
// RecordsPerSec and MBPerSec are the share phase's).
type ShareFigures struct {
	Workers int `json:"workers"` // share workers, and members of the classic group
	// Acked is the distinct records the workers accepted (each once: a
	// record delivered twice counts once, Redelivered counts the extras);
	// AckErrors are partitions whose acknowledgement the broker refused.
	Acked       int64 `json:"acked"`
	Redelivered int64 `json:"redelivered,omitempty"`
	AckErrors   int64 `json:"ack_errors,omitempty"`

	ClassicRecords       int64   `json:"classic_records"`
	ClassicSeconds       float64 `json:"classic_seconds"` // first record to last
	ClassicRecordsPerSec float64 `json:"classic_records_per_sec"`
	ClassicFirstRecordMs float64 `json:"classic_first_record_ms"` // clients' start to the first record: the join
	// Ratio is share records/s over classic records/s.
	Ratio float64 `json:"ratio"`
	// A share group settles when every worker has heartbeated and holds
	// its part of the target assignment (until then the first to join
	// fetches from every partition beside the others: members learn of
	// a new assignment at their next heartbeat, 5 s apart by Kafka's
	// default). SettledMs is when, from the share clients' start (0: not
	// within the run); SettledRecordsPerSec the distinct records accepted
	// from then to the last, over that time, when that phase holds at
	// least a quarter of the records (the classic group's records/s are
	// counted from its first record, which its join delays until its
	// assignment is complete); SettledRatio is that over classic records/s.
	SettledMs            float64 `json:"settled_ms,omitempty"`
	SettledRecordsPerSec float64 `json:"settled_records_per_sec,omitempty"`
	SettledRatio         float64 `json:"settled_ratio,omitempty"`
	// Broker CPU seconds of each phase, when the broker's process is known
	// (HaveCPU): compare's brokers, or --broker-pid.
	HaveCPU          bool    `json:"have_cpu"`
	ClassicBrokerCPU float64 `json:"classic_broker_cpu_seconds,omitempty"`
	ShareBrokerCPU   float64 `json:"share_broker_cpu_seconds,omitempty"`
}

// Figures of the share workload.
const (
	FigClassicRecs     = "classic records/s"
	FigShareRatio      = "share/classic"
	FigShareCPUPerAck  = "broker CPU µs/ack"
	FigClassicCPUPerRc = "classic broker CPU µs/record"
	FigClassicFirst    = "classic first record ms"
	FigSettledRecs     = "settled records/s"
	FigSettledRatio    = "settled share/classic"
)

// shareFigureNames are the share workload's figures, in table order.
var shareFigureNames = []string{FigRecs, FigClassicRecs, FigShareRatio, FigSettledRecs, FigSettledRatio, FigMBps, FigShareCPUPerAck, FigClassicCPUPerRc, FigFirst, FigClassicFirst, FigBrokerCore}

// shareFigures adds the share workload's figures to f.
func shareFigures(f map[string]float64, s *ShareFigures) {
	f[FigClassicRecs] = s.ClassicRecordsPerSec
	f[FigShareRatio] = s.Ratio
	f[FigClassicFirst] = s.ClassicFirstRecordMs
	if s.SettledRecordsPerSec > 0 {
		f[FigSettledRecs] = s.SettledRecordsPerSec
		f[FigSettledRatio] = s.SettledRatio
	}
	if s.HaveCPU && s.Acked > 0 {
		f[FigShareCPUPerAck] = s.ShareBrokerCPU / float64(s.Acked) * 1e6
	}
	if s.HaveCPU && s.ClassicRecords > 0 {
		f[FigClassicCPUPerRc] = s.ClassicBrokerCPU / float64(s.ClassicRecords) * 1e6
	}
}

// runShare is Run for KindShare, after the topic is created: fill it,
// then the classic group, then the share group, each reading every
// record. The classic group goes first so that both read a topic that is
// equally cold (just written); MeasureStart and MeasureEnd wrap both
// phases, opts.BrokerCPU (if set) is read at each phase's edges.
func runShare(ctx context.Context, w *Workload, opts RunOptions, topic string) (*Result, error) {
	fill := *w
	fill.Rate, fill.Duration = 0, 0
	if _, err := produceAll(ctx, &fill, opts.Bootstrap, []string{topic}, nil); err != nil {
		return nil, fmt.Errorf("filling the topic: %w", err)
	}
	group := topic + "-share"
	if err := shareFromEarliest(ctx, opts.Bootstrap, group); err != nil {
		return nil, err
	}
	sf := &ShareFigures{Workers: w.ConsumersPerSubscription, HaveCPU: opts.BrokerCPU != nil}
	cpu := func() float64 {
		if opts.BrokerCPU == nil {
			return 0
		}
		v, err := opts.BrokerCPU()
		if err != nil {
			sf.HaveCPU = false
		}
		return v
	}
	if opts.MeasureStart != nil {
		opts.MeasureStart()
	}
	began := time.Now()
	classic := *w
	classic.Kind, classic.ConsumerGroups = KindConsume, true
	c0 := cpu()
	c, err := consumeAll(ctx, &classic, opts.Bootstrap, []string{topic}, w.NumRecords, nil)
	c1 := cpu()
	if err == nil && c.progress.Load() < c.target {
		err = fmt.Errorf("%w: classic group: read %d of %d records: %v", ErrRun, c.progress.Load(), c.target, ctx.Err())
	}
	if err != nil {
		if opts.MeasureEnd != nil {
			opts.MeasureEnd()
		}
		return nil, err
	}
	s, serr := shareConsume(ctx, w, opts.Bootstrap, topic, group, w.NumRecords)
	c2 := cpu()
	wall := time.Since(began).Seconds()
	if opts.MeasureEnd != nil {
		opts.MeasureEnd()
	}
	if s == nil {
		return nil, serr
	}
	sf.Acked, sf.Redelivered, sf.AckErrors = s.acked.Load(), s.redelivered.Load(), s.ackErrs.Load()
	// Records/s are from each group's first record to its last: joining
	// (a classic group waits out the broker's initial rebalance delay,
	// 3 s by default) is the first-record figure, not throughput.
	sf.ClassicRecords, sf.ClassicFirstRecordMs = c.records.Load(), float64(c.firstNanos.Load())/1e6
	sf.ClassicSeconds = c.seconds - sf.ClassicFirstRecordMs/1e3
	if sf.ClassicSeconds > 0 {
		sf.ClassicRecordsPerSec = float64(sf.ClassicRecords) / sf.ClassicSeconds
	}
	shareSecs := s.seconds - float64(s.firstNanos.Load())/1e9
	sf.ClassicBrokerCPU, sf.ShareBrokerCPU = c1-c0, c2-c1
	r := &Result{Kind: KindShare, Records: sf.Acked, Bytes: s.bytes.Load(), Errors: sf.AckErrors, Seconds: shareSecs,
		ConsumedRecords: s.records.Load(), ConsumedBytes: s.bytes.Load(), FirstRecordMs: float64(s.firstNanos.Load()) / 1e6,
		MovedBytes: c.bytes.Load() + s.bytes.Load(), MeasuredSeconds: wall, Share: sf}
	if shareSecs > 0 {
		r.RecordsPerSec = float64(sf.Acked) / shareSecs
		r.MBPerSec = float64(r.Bytes) / MiB / shareSecs
	}
	if sf.ClassicRecordsPerSec > 0 {
		sf.Ratio = r.RecordsPerSec / sf.ClassicRecordsPerSec
	}
	if s.settledNanos > 0 {
		sf.SettledMs = float64(s.settledNanos) / 1e6
		left, secs := sf.Acked-s.settledAcked, s.seconds-float64(s.settledNanos)/1e9
		if left*4 >= w.NumRecords && secs > 0 {
			sf.SettledRecordsPerSec = float64(left) / secs
			if sf.ClassicRecordsPerSec > 0 {
				sf.SettledRatio = sf.SettledRecordsPerSec / sf.ClassicRecordsPerSec
			}
		}
	}
	if serr == nil && sf.Acked < w.NumRecords {
		serr = fmt.Errorf("%w: share group: acknowledged %d of %d records: %v", ErrRun, sf.Acked, w.NumRecords, ctx.Err())
	}
	return r, serr
}

// shareStats are the counters of one share group's workers.
type shareStats struct {
	records     atomic.Int64 // deliveries
	bytes       atomic.Int64 // of distinct records
	acked       atomic.Int64 // distinct records accepted
	redelivered atomic.Int64
	ackErrs     atomic.Int64
	firstNanos  atomic.Int64
	seconds     float64
	// settledNanos (from the clients' start) and settledAcked: when the
	// group settled (watchSettled) and how many records were accepted by
	// then; 0 if it did not within the run.
	settledNanos int64
	settledAcked int64

	mu   sync.Mutex
	seen map[int32][]uint64 // partition -> bitmap of offsets accepted
}

// mark notes that offset of partition p was accepted; false if it had
// been before (a redelivery).
func (s *shareStats) mark(p int32, offset int64) bool {
	if offset < 0 {
		return false
	}
	if s.seen == nil {
		s.seen = map[int32][]uint64{}
	}
	bits := s.seen[p]
	word := int(offset / 64)
	if word >= len(bits) {
		bits = append(bits, make([]uint64, word+1-len(bits))...)
		s.seen[p] = bits
	}
	m := uint64(1) << (offset % 64)
	if bits[word]&m != 0 {
		return false
	}
	bits[word] |= m
	return true
}

// shareConsume reads topic with w.ConsumersPerSubscription share-group
// workers (kgo ShareGroup), each accepting every record it gets (Record.Ack
// AckAccept), until together they have accepted target distinct records;
// then each flushes its acknowledgements (FlushAcks: the broker has
// answered every one) and the clock stops. The group's
// share.auto.offset.reset must already be earliest.
func shareConsume(ctx context.Context, w *Workload, bootstrap []string, topic, group string, target int64) (*shareStats, error) {
	st := &shareStats{}
	began := time.Now()
	var clients []*kgo.Client
	for i := 0; i < w.ConsumersPerSubscription; i++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ClientID("strata-bench-share"),
			kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(500*time.Millisecond),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				for _, r := range rs {
					if r.Err != nil {
						st.ackErrs.Add(1)
					}
				}
			}))
		if err != nil {
			for _, c := range clients {
				c.Close()
			}
			return nil, fmt.Errorf("%w: share worker: %v", ErrRun, err)
		}
		clients = append(clients, cl)
	}
	settled := make(chan struct{})
	wctx, stopWatch := context.WithCancel(ctx)
	go func() {
		defer close(settled)
		watchSettled(wctx, clients[0], group, topic, w.Partitions, len(clients), st, began)
	}()
	var wg sync.WaitGroup
	var flushErr atomic.Pointer[error]
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shareWorker(ctx, cl, st, target, began)
			fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := cl.FlushAcks(fctx); err != nil {
				flushErr.CompareAndSwap(nil, &err)
			}
		}()
	}
	wg.Wait()
	st.seconds = time.Since(began).Seconds()
	stopWatch()
	<-settled
	// Leaving the group is not measured.
	var closing sync.WaitGroup
	for _, cl := range clients {
		closing.Add(1)
		go func() { defer closing.Done(); cl.Close() }()
	}
	closing.Wait()
	if e := flushErr.Load(); e != nil {
		return st, fmt.Errorf("%w: share worker: flushing acknowledgements: %v", ErrRun, *e)
	}
	return st, nil
}

// watchSettled describes group every 100 ms until it has settled: n
// members, each at the group's epoch with a non-empty assignment, the
// assignment at the group's epoch, and every partition of topic assigned.
// It notes when in st (settledNanos, settledAcked), or nothing if ctx ends
// first.
func watchSettled(ctx context.Context, cl *kgo.Client, group, topic string, partitions, n int, st *shareStats, began time.Time) {
	adm := kadm.NewClient(cl)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		described, err := adm.DescribeShareGroups(dctx, group)
		cancel()
		if err != nil {
			continue
		}
		g, ok := described[group]
		if !ok || g.Err != nil || len(g.Members) != n || g.AssignmentEpoch != g.GroupEpoch {
			continue
		}
		ok = true
		for _, m := range g.Members {
			if m.MemberEpoch != g.GroupEpoch || len(m.Assignment[topic]) == 0 {
				ok = false
			}
		}
		if ok && len(g.AssignedPartitions()[topic]) == partitions {
			st.settledAcked = st.acked.Load()
			st.settledNanos = int64(time.Since(began))
			return
		}
	}
}

// shareWorker is one worker's loop: poll, accept every record, until the
// workers together have accepted target records (or ctx ends).
func shareWorker(ctx context.Context, cl *kgo.Client, st *shareStats, target int64, began time.Time) {
	for st.acked.Load() < target && ctx.Err() == nil {
		// A short poll, so that a worker with nothing to do notices when
		// the others have finished.
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fetches := cl.PollRecords(pctx, 0)
		cancel()
		var n, fresh, dup, b int64
		st.mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) {
			r.Ack(kgo.AckAccept)
			n++
			if st.mark(r.Partition, r.Offset) {
				fresh++
				b += int64(len(r.Key) + len(r.Value))
			} else {
				dup++
			}
		})
		st.mu.Unlock()
		if n > 0 {
			st.firstNanos.CompareAndSwap(0, int64(time.Since(began)))
			st.records.Add(n)
			st.bytes.Add(b)
			st.redelivered.Add(dup)
			st.acked.Add(fresh)
		}
	}
}

// ParseShareFlags parses `share [flags]`: the share workload from flags.
func ParseShareFlags(args []string, stderr io.Writer) (*cliRun, error) {
	w := DefaultWorkload()
	w.Kind, w.Name = KindShare, KindShare
	c := &cliRun{}
	fs := flag.NewFlagSet("bench share", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bootstrap := fs.String("bootstrap-server", "127.0.0.1:9092", "broker `host:port` list, comma-separated")
	fs.StringVar(&c.TopicPrefix, "topic-prefix", "bench", "prefix of the fresh topic the run creates (and deletes)")
	fs.BoolVar(&c.JSON, "json", false, "print the result as JSON")
	fs.IntVar(&w.Partitions, "partitions", 8, "partitions of the topic")
	fs.IntVar(&w.ReplicationFactor, "replication-factor", 1, "replication factor of the topic")
	fs.IntVar(&w.RecordSize, "record-size", 1024, "value bytes per record")
	fs.Int64Var(&w.NumRecords, "num-records", 200000, "records to fill the topic with; both groups read them all")
	fs.IntVar(&w.ConsumersPerSubscription, "consumers", 4, "share workers, and members of the classic consumer group")
	fs.IntVar(&w.ProducersPerTopic, "producers", 1, "producer clients filling the topic")
	fs.IntVar(&c.BrokerPID, "broker-pid", 0, "the broker's process `id`, for its CPU time per record (Linux /proc; 0 = none)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if c.BrokerPID < 0 {
		return nil, fmt.Errorf("%w: --broker-pid %d", ErrUsage, c.BrokerPID)
	}
	c.Bootstrap = splitList(*bootstrap)
	if len(c.Bootstrap) == 0 {
		return nil, fmt.Errorf("%w: --bootstrap-server is empty", ErrUsage)
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	c.Workload = w
	return c, nil
}

// formatShare prints a share result: the share phase in
// kafka-share-consumer-perf-test's columns, then the comparison.
func formatShare(r *Result) string {
	s := r.Share
	if s == nil {
		s = &ShareFigures{}
	}
	out := fmt.Sprintf("share group, %d workers: %d records acknowledged, %.1f records/sec (%.2f MB/sec), %.1f ms to first record",
		s.Workers, s.Acked, r.RecordsPerSec, r.MBPerSec, r.FirstRecordMs)
	if s.Redelivered > 0 || s.AckErrors > 0 {
		out += fmt.Sprintf(", %d redelivered, %d ack errors", s.Redelivered, s.AckErrors)
	}
	out += fmt.Sprintf(".\nclassic group, %d members: %d records, %.1f records/sec, %.1f ms to first record.\nshare/classic: %.2f",
		s.Workers, s.ClassicRecords, s.ClassicRecordsPerSec, s.ClassicFirstRecordMs, s.Ratio)
	f := map[string]float64{}
	shareFigures(f, s)
	if v, ok := f[FigShareCPUPerAck]; ok {
		out += fmt.Sprintf("; broker CPU %.1f µs per acknowledged record, %.1f µs per classic record", v, f[FigClassicCPUPerRc])
	}
	switch {
	case s.SettledRecordsPerSec > 0:
		out += fmt.Sprintf(".\nsettled share group (from %.0f ms): %.1f records/sec, share/classic %.2f", s.SettledMs, s.SettledRecordsPerSec, s.SettledRatio)
	case s.SettledMs > 0:
		out += fmt.Sprintf(".\nthe share group settled at %.0f ms, too late for a settled figure (a longer run gives one)", s.SettledMs)
	default:
		out += ".\nthe share group did not settle within the run (a longer run gives a settled figure)"
	}
	return out + "."
}
