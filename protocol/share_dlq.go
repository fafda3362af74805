package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/dlq"
	"github.com/strata-io/strata/internal/groupconfig"
	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/sharepart"
)

// Dead-letter topics of share groups (KIP-1191, Kafka 4.4's names) and
// Strata's exactly-once write of them.
//
// The share-partition leader's decisions record dead letters in the
// replicated share state (sharepart/deadletter.go): a record rejected, or
// archived at the delivery count limit, while its group has
// errors.deadletterqueue.topic.name set and share.version is 2. The
// writer here, one goroutine per broker, writes the letters waiting on
// the share partitions this broker leads to the dead-letter topic's
// partition (the source partition modulo its partition count, as Kafka)
// as an idempotent producer per share partition: a producer ID allocated
// once and kept in the replicated state (sharepart.Stream), the letter's
// ordinal as its sequence. Only once the write is acknowledged does the
// leader propose DeadDone. A leader that dies in between leaves the
// letters waiting; the next one first asks the dead-letter partition for
// the producer's last sequence (DescribeProducers) and records the
// letters up to it done, then writes the rest: a letter is never written
// twice, and never lost.
//
// The main queue never waits for the dead-letter topic: a decision only
// records the letter (in the delta it makes anyway); when the topic
// cannot be written (missing and not auto-created, not enabled with
// errors.deadletterqueue.group.enable, its leader down) the letters wait
// in the replicated state (at most sharepart.MaxDeadLetters per share
// partition) and are written once it can be, the writer retrying every
// dlqEvery.
//
// Each dead letter carries Kafka's headers (__dlq.errors.topic,
// .partition, .offset, .group, .delivery.count, .message) and Strata's
// (strata.dlq.reason, strata.dlq.first.delivery.ms,
// strata.dlq.last.delivery.ms, strata.dlq.member.id); with
// errors.deadletterqueue.copy.record.enable the original key and value
// too, and (beyond Kafka, which copies neither the original headers nor
// the timestamp) the original headers after the letter's own; the dead
// letter's timestamp is the time it is written.

// dlqSettings is one group's dead-letter configuration, resolved
// (share_settings.go); topic "" = no dead letters.
type dlqSettings struct {
	topic      string
	copyRecord bool
	// redriveLimit is strata.share.dlq.redrive.limit: a record redriven
	// this many times is dead-lettered with reason redrive-limit (0 =
	// never).
	redriveLimit int
	prefix       string // errors.deadletterqueue.topic.name.prefix
	autoCreate   bool   // errors.deadletterqueue.auto.create.topics.enable
	// The flood guard (strata.share.dlq.flood.*; ratio 0 = off).
	floodRatio  float64
	floodWindow time.Duration
	floodMin    int64
}

// Kafka's and Strata's dead-letter headers.
const (
	hdrDLQTopic         = "__dlq.errors.topic"
	hdrDLQPartition     = "__dlq.errors.partition"
	hdrDLQOffset        = "__dlq.errors.offset"
	hdrDLQGroup         = "__dlq.errors.group"
	hdrDLQDeliveryCount = "__dlq.errors.delivery.count"
	hdrDLQMessage       = "__dlq.errors.message"
	hdrStrataReason     = "strata.dlq.reason"
	hdrStrataFirstMs    = "strata.dlq.first.delivery.ms"
	hdrStrataLastMs     = "strata.dlq.last.delivery.ms"
	hdrStrataMember     = "strata.dlq.member.id"
)

const (
	// dlqEvery is how often the writer looks for waiting letters.
	dlqEvery = 200 * time.Millisecond
	// dlqRequestTimeout bounds one write (or producer lookup), so an
	// unreachable dead-letter partition delays the others by at most this.
	dlqRequestTimeout = 5 * time.Second
	// dlqMaxBatch bounds the letters and bytes of one write.
	dlqMaxBatch      = 500
	dlqMaxBatchBytes = 900 << 10
)

// errDLQUnwritable is a dead-letter topic that cannot take letters now.
var errDLQUnwritable = errors.New("dead-letter topic not writable")

// dlqWriter writes the waiting dead letters of the share partitions this
// broker leads.
type dlqWriter struct {
	l   *shareLeader
	log *slog.Logger

	mu     sync.Mutex
	client *kgo.Client          // protected by mu; to the dead-letter partitions' leaders
	synced map[shareKey]int32   // leader epoch at which the stream was checked against the target; protected by mu
	logged map[string]time.Time // last log line per problem, rate-limited; protected by mu
	// afterWrite, when set (tests only), runs after a write was
	// acknowledged and before DeadDone: its error ends the flush there,
	// as a leader dying between the two would. Protected by mu.
	afterWrite func() error

	// The flood guard (share_flood.go): floodPending is this broker's
	// counts per group not yet reported to the controller; floodHist, on
	// the controller, every broker's reports per group within the
	// window. Protected by mu.
	floodPending map[string]floodCounts
	floodSince   time.Time // when the oldest pending count was made
	floodHist    map[string][]floodSample
	floodJudging map[string]bool // a judgement after floodGrace is due
	// depths is the last count of the dead-letter topics whose partition
	// 0 this broker leads, by group and topic (share_dlq_depth.go);
	// protected by mu.
	depths map[[2]string]dlqDepth

	// Metrics (share_metrics.go).
	waiting     atomic.Int64    // letters waiting on the partitions led here, last pass
	written     [5]atomic.Int64 // letters written, by sharepart.Reason
	recorded    atomic.Int64    // letters recorded by this broker's decisions
	dropped     atomic.Int64    // records archived without a letter (MaxDeadLetters waiting)
	failures    atomic.Int64    // writes that failed (retried)
	duplicates  atomic.Int64    // writes the target found duplicate (a rewrite after a failover)
	floodPauses atomic.Int64    // groups this broker paused (flood guard)
	lastWritten atomic.Int64    // unix ms of the last write, 0 = none
}

func newDLQWriter(l *shareLeader) *dlqWriter {
	return &dlqWriter{l: l, log: slog.Default().With("component", "share-dlq"), synced: map[shareKey]int32{}, logged: map[string]time.Time{}, floodPending: map[string]floodCounts{}, floodHist: map[string][]floodSample{}, floodJudging: map[string]bool{}}
}

// note counts one decision's dead letters (shareLeader.count) and, for
// the flood guard, adds its deliveries and letters to the counts this
// broker reports to the controller (share_flood.go).
func (w *dlqWriter) note(k shareKey, st sharepart.Stats) {
	if st.DeadLettered != 0 || st.DeadDropped != 0 {
		w.recorded.Add(int64(st.DeadLettered))
		w.dropped.Add(int64(st.DeadDropped))
	}
	if st.Acquired == 0 && st.DeadLettered == 0 && st.DeadDropped == 0 {
		return
	}
	ds := w.l.settings(k.group).dlq
	if ds.floodRatio <= 0 || ds.topic == "" {
		return
	}
	w.mu.Lock()
	c := w.floodPending[k.group]
	c.Deliveries += int64(st.Acquired)
	c.Letters += int64(st.DeadLettered + st.DeadDropped)
	w.floodPending[k.group] = c
	w.mu.Unlock()
}

// pause sets the group's strata.share.dlq.flood.paused (replicated
// metadata: every broker stops delivering to it) unless it is set.
func (w *dlqWriter) pause(group string, deliveries, letters int64) {
	b := w.l.broker
	ctx, cancel := context.WithTimeout(context.Background(), dlqRequestTimeout)
	defer cancel()
	cfgs := b.GroupConfigs(group)
	if cfgs[groupconfig.FloodPaused] == "true" {
		return
	}
	cfgs[groupconfig.FloodPaused] = "true"
	if err := b.SetGroupConfigs(ctx, group, cfgs, false); err != nil {
		// The counts that tripped it are gone; the next window's decide.
		w.log.Warn("dead-letter flood guard could not pause the group", "group", group, "err", err)
		return
	}
	w.floodPauses.Add(1)
	w.log.Warn("dead-letter flood: share group paused; resume with strata share-group resume", "group", group,
		"deliveries", deliveries, "dead_letters", letters)
}

// run writes waiting letters every dlqEvery until stop closes.
func (w *dlqWriter) run(stop <-chan struct{}) {
	t := time.NewTicker(dlqEvery)
	defer t.Stop()
	defer func() {
		w.mu.Lock()
		if w.client != nil {
			w.client.Close()
			w.client = nil
		}
		w.mu.Unlock()
	}()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		w.pass(stop)
	}
}

// pass writes what waits on every share partition this broker leads.
func (w *dlqWriter) pass(stop <-chan struct{}) {
	if sharepart.DeadLettersWaiting() == 0 {
		w.waiting.Store(0)
		return
	}
	b := w.l.broker
	if b == nil {
		return // a server without a broker (protocol tests) leads nothing
	}
	me := b.NodeID()
	var total int64
	for _, t := range b.Topics() {
		for _, p := range t.Partitions {
			if p.Leader != me {
				continue
			}
			reg, err := b.ShareRegistry(t.Name, p.Partition)
			if err != nil {
				continue
			}
			for g, n := range reg.DeadWaiting() {
				total += int64(n)
				select {
				case <-stop:
					return
				default:
				}
				if err := w.flush(t, p.Partition, g); err != nil {
					w.failures.Add(1)
					w.warn(t.Name+"/"+g, "dead letters wait", "group", g, "topic", t.Name, "partition", p.Partition, "waiting", n, "err", err)
				}
			}
		}
	}
	w.waiting.Store(total)
}

// warn logs at most once a minute per key.
func (w *dlqWriter) warn(key, msg string, args ...any) {
	w.mu.Lock()
	last := w.logged[key]
	now := time.Now()
	if now.Sub(last) < time.Minute {
		w.mu.Unlock()
		return
	}
	w.logged[key] = now
	w.mu.Unlock()
	w.log.Warn(msg, args...)
}

// target checks the group's dead-letter topic as Kafka does (configured,
// not internal, with the required prefix, existing or auto-created, with
// errors.deadletterqueue.group.enable=true) and returns it.
func (w *dlqWriter) target(ctx context.Context, ds dlqSettings) (replication.TopicInfo, error) {
	b := w.l.broker
	name := ds.topic
	switch {
	case name == "":
		return replication.TopicInfo{}, fmt.Errorf("%w: no dead-letter topic configured", errDLQUnwritable)
	case strings.HasPrefix(name, "__"):
		return replication.TopicInfo{}, fmt.Errorf("%w: %s starts with __", errDLQUnwritable, name)
	case ds.prefix != "" && !strings.HasPrefix(name, ds.prefix):
		return replication.TopicInfo{}, fmt.Errorf("%w: %s does not have the prefix %q (errors.deadletterqueue.topic.name.prefix)", errDLQUnwritable, name, ds.prefix)
	}
	t, ok := b.Topic(name)
	if !ok {
		if !ds.autoCreate {
			return t, fmt.Errorf("%w: %s does not exist and errors.deadletterqueue.auto.create.topics.enable is false", errDLQUnwritable, name)
		}
		var err error
		t, err = b.CreateTopic(ctx, replication.CreateTopicRequest{Name: name, NumPartitions: -1, ReplicationFactor: -1,
			Configs: map[string]string{"errors.deadletterqueue.group.enable": "true", "message.timestamp.type": "CreateTime"}})
		if err != nil && !errors.Is(err, replication.ErrTopicExists) {
			return t, fmt.Errorf("%w: creating %s: %w", errDLQUnwritable, name, err)
		}
		if t, ok = b.Topic(name); !ok {
			return t, fmt.Errorf("%w: %s not created yet", errDLQUnwritable, name)
		}
	}
	if v := t.Configs["errors.deadletterqueue.group.enable"]; !strings.EqualFold(strings.TrimSpace(v), "true") {
		return t, fmt.Errorf("%w: %s has errors.deadletterqueue.group.enable=false", errDLQUnwritable, name)
	}
	if len(t.Partitions) == 0 {
		return t, fmt.Errorf("%w: %s has no partitions", errDLQUnwritable, name)
	}
	return t, nil
}

// flush writes the letters waiting for group on the share partition
// (t, partition), at most dlqMaxBatch, and records them done.
func (w *dlqWriter) flush(t replication.TopicInfo, partition int32, group string) error {
	ctx, cancel := context.WithTimeout(context.Background(), dlqRequestTimeout)
	defer cancel()
	l := w.l
	b := l.broker
	reg, epoch, err := b.ShareLeader(ctx, t.Name, partition)
	if err != nil {
		return err
	}
	key := shareKey{t.ID, partition, group}
	sp := l.part(key)
	ds := l.settings(group).dlq
	dt, err := w.target(ctx, ds)
	if err != nil {
		return err
	}
	target := partition % int32(len(dt.Partitions))
	st, _ := reg.Group(group)
	if st == nil {
		return nil
	}
	letters := st.DeadLetters()
	if len(letters) == 0 {
		return nil
	}
	stream := st.Stream()
	w.mu.Lock()
	synced := w.synced[key]
	w.mu.Unlock()
	if stream.PID == 0 || stream.Topic != dt.Name || stream.Partition != target {
		// A new target (or the first letter): a new producer whose
		// sequence 0 is the first waiting letter.
		if stream, err = w.newStream(ctx, t.Name, partition, group, sp, epoch, dt.Name, target, letters[0].Ordinal); err != nil {
			return err
		}
		synced = epoch
	} else if synced != epoch {
		// First write at this epoch: an earlier leader may have written
		// some of the letters and died before recording them done.
		last, found, err := w.lastSequence(ctx, dt, target, stream.PID)
		if err != nil {
			return err
		}
		switch {
		case found:
			upTo := stream.Base + int64(last) + 1
			if upTo > letters[0].Ordinal {
				if err := w.done(ctx, t.Name, partition, group, sp, epoch, upTo); err != nil {
					return err
				}
				w.duplicates.Add(upTo - letters[0].Ordinal)
				for len(letters) > 0 && letters[0].Ordinal < upTo {
					letters = letters[1:]
				}
			}
		case letters[0].Ordinal != stream.Base:
			// The target lost the producer (its state expired, the
			// topic was recreated): only sequence 0 would be taken.
			if stream, err = w.newStream(ctx, t.Name, partition, group, sp, epoch, dt.Name, target, letters[0].Ordinal); err != nil {
				return err
			}
		}
		w.mu.Lock()
		w.synced[key] = epoch
		w.mu.Unlock()
		synced = epoch
	}
	if len(letters) == 0 {
		return nil
	}
	if len(letters) > dlqMaxBatch {
		letters = letters[:dlqMaxBatch]
	}
	var copies map[int64]kmsg.Record
	if ds.copyRecord || ds.redriveLimit > 0 {
		// Also without copies: a redriven record's strata.redrive.count
		// decides its reason (dead letters are rare; reading them is cheap).
		copies = w.originals(t.Name, partition, letters)
	}
	batch, n := buildDLQBatch(t.Name, partition, group, stream, letters, copies, ds, l.cfg.Now().UnixMilli())
	letters = letters[:n]
	code, err := w.produce(ctx, dt, target, batch)
	if err != nil {
		return err
	}
	switch code {
	case 0:
	case kerr.DuplicateSequenceNumber.Code:
		w.duplicates.Add(int64(n))
	case kerr.OutOfOrderSequenceNumber.Code, kerr.UnknownProducerID.Code:
		// Another write reached the target meanwhile (an earlier
		// leader's, in flight when it died): look again next time.
		w.mu.Lock()
		delete(w.synced, key)
		w.mu.Unlock()
		return fmt.Errorf("%w: %s-%d answered %s", errDLQUnwritable, dt.Name, target, kerr.ErrorForCode(code))
	default:
		return fmt.Errorf("%w: %s-%d answered %s", errDLQUnwritable, dt.Name, target, kerr.ErrorForCode(code))
	}
	w.mu.Lock()
	hook := w.afterWrite
	w.mu.Unlock()
	if hook != nil {
		if err := hook(); err != nil {
			return err
		}
	}
	if err := w.done(ctx, t.Name, partition, group, sp, epoch, letters[n-1].Ordinal+1); err != nil {
		return err
	}
	for _, lt := range letters {
		if int(lt.Reason) < len(w.written) {
			w.written[lt.Reason].Add(1)
		}
	}
	w.lastWritten.Store(l.cfg.Now().UnixMilli())
	return nil
}

// newStream allocates a producer ID and proposes it as the share
// partition's dead-letter producer, sequence 0 at ordinal base.
func (w *dlqWriter) newStream(ctx context.Context, topic string, partition int32, group string, sp *sharePart, epoch int32, dlq string, target int32, base int64) (sharepart.Stream, error) {
	pid, err := w.l.broker.AllocateProducerID(ctx)
	if err != nil {
		return sharepart.Stream{}, err
	}
	st := sharepart.Stream{PID: pid, Base: base, Topic: dlq, Partition: target}
	var d sharepart.Delta
	d.SetStream(group, st)
	if err := sp.acquire(ctx); err != nil {
		return st, err
	}
	defer sp.release()
	return st, w.l.broker.ShareApplyAt(ctx, topic, partition, epoch, d.Encode())
}

// done proposes the letters below ordinal upTo written.
func (w *dlqWriter) done(ctx context.Context, topic string, partition int32, group string, sp *sharePart, epoch int32, upTo int64) error {
	var d sharepart.Delta
	d.DeadDone(group, upTo)
	if err := sp.acquire(ctx); err != nil {
		return err
	}
	defer sp.release()
	return w.l.broker.ShareApplyAt(ctx, topic, partition, epoch, d.Encode())
}

// kclient returns the writer's client to the brokers (created on first
// use), as the transaction coordinator's markers use one.
func (w *dlqWriter) kclient() (*kgo.Client, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.client != nil {
		return w.client, nil
	}
	var seeds []string
	for _, bi := range w.l.broker.Brokers() {
		seeds = append(seeds, net.JoinHostPort(bi.Host, strconv.Itoa(int(bi.Port))))
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("strata-share-dlq")}, w.l.interBroker...)...)
	if err != nil {
		return nil, err
	}
	w.client = cl
	return cl, nil
}

func leaderOf(t replication.TopicInfo, partition int32) int32 {
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return -1
	}
	return t.Partitions[partition].Leader
}

// lastSequence asks the target partition's leader for producer pid's last
// sequence (DescribeProducers); found is false when it has no state for
// pid.
func (w *dlqWriter) lastSequence(ctx context.Context, dt replication.TopicInfo, target int32, pid int64) (int32, bool, error) {
	leader := leaderOf(dt, target)
	if leader < 0 {
		return 0, false, fmt.Errorf("%w: %s-%d has no leader", errDLQUnwritable, dt.Name, target)
	}
	cl, err := w.kclient()
	if err != nil {
		return 0, false, err
	}
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = dt.Name, []int32{target}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		return 0, false, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition != target {
				continue
			}
			if p.ErrorCode != 0 {
				return 0, false, fmt.Errorf("%w: DescribeProducers %s-%d: %s", errDLQUnwritable, dt.Name, target, kerr.ErrorForCode(p.ErrorCode))
			}
			for _, ap := range p.ActiveProducers {
				if ap.ProducerID == pid {
					return ap.LastSequence, ap.LastSequence >= 0, nil
				}
			}
			return 0, false, nil
		}
	}
	return 0, false, fmt.Errorf("%w: DescribeProducers %s-%d: no answer for the partition", errDLQUnwritable, dt.Name, target)
}

// produce writes one batch to the target partition's leader (acks=all)
// and returns its error code.
func (w *dlqWriter) produce(ctx context.Context, dt replication.TopicInfo, target int32, batch []byte) (int16, error) {
	leader := leaderOf(dt, target)
	if leader < 0 {
		return 0, fmt.Errorf("%w: %s-%d has no leader", errDLQUnwritable, dt.Name, target)
	}
	cl, err := w.kclient()
	if err != nil {
		return 0, err
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = int32(dlqRequestTimeout / time.Millisecond)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = dt.Name, dt.ID // v13 names topics by ID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = target, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition == target {
				return p.ErrorCode, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: produce to %s-%d: no answer for the partition", errDLQUnwritable, dt.Name, target)
}

// originals reads the letters' source records (key and value) from the
// share partition's log; a record removed by retention is missing.
func (w *dlqWriter) originals(topic string, partition int32, letters []sharepart.DeadLetter) map[int64]kmsg.Record {
	lp, err := w.l.broker.Partition(topic, partition)
	if err != nil {
		return nil
	}
	want := make(map[int64]bool, len(letters))
	lo, hi := letters[0].Offset, letters[0].Offset
	for _, lt := range letters {
		want[lt.Offset] = true
		lo, hi = min(lo, lt.Offset), max(hi, lt.Offset)
	}
	out := map[int64]kmsg.Record{}
	dec := kgo.DefaultDecompressor()
	for off := lo; off <= hi && len(out) < len(want); {
		res, err := lp.Read(off, 1<<20)
		if err != nil || len(res.Records) == 0 {
			break
		}
		spans, err := segment.SplitBatches(res.Records, 1<<10)
		if err != nil || len(spans) == 0 {
			break
		}
		next := off
		for _, sp := range spans {
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(res.Records[sp[0]:sp[1]]); err != nil {
				return out
			}
			next = max(next, rb.FirstOffset+int64(rb.LastOffsetDelta)+1)
			if rb.Attributes&segment.AttrControl != 0 {
				continue
			}
			raw := rb.Records
			if c := rb.Attributes & segment.AttrCompressionMask; c != 0 {
				if raw, err = dec.Decompress(raw, kgo.CompressionCodecType(c)); err != nil {
					continue
				}
			}
			for i := int32(0); i < rb.NumRecords && len(raw) > 0; i++ {
				var r kmsg.Record
				n, err := readDLQRecord(raw, &r)
				if err != nil {
					break
				}
				raw = raw[n:]
				if o := rb.FirstOffset + int64(r.OffsetDelta); want[o] {
					out[o] = r
				}
			}
		}
		if next <= off {
			break
		}
		off = next
	}
	return out
}

// readDLQRecord decodes one length-prefixed v2 record, returning its size.
func readDLQRecord(src []byte, r *kmsg.Record) (int, error) {
	var u uint64
	n := 0
	for ; n < len(src) && n < 10; n++ {
		u |= uint64(src[n]&0x7f) << (7 * n)
		if src[n] < 0x80 {
			n++
			break
		}
	}
	l := int64(u>>1) ^ -int64(u&1)
	if n == 0 || l < 0 || int64(len(src)-n) < l {
		return 0, errors.New("bad record length")
	}
	end := n + int(l)
	if err := r.ReadFrom(src[:end]); err != nil {
		return 0, err
	}
	return end, nil
}

// buildDLQBatch encodes letters (a prefix of them within
// dlqMaxBatchBytes: n) as one idempotent batch of stream's producer, its
// base sequence the first letter's.
func buildDLQBatch(topic string, partition int32, group string, stream sharepart.Stream, letters []sharepart.DeadLetter, copies map[int64]kmsg.Record, ds dlqSettings, nowMs int64) ([]byte, int) {
	var body []byte
	n := 0
	for i, lt := range letters {
		r := kmsg.Record{OffsetDelta: int32(i)}
		orig, haveOrig := copies[lt.Offset]
		if haveOrig && ds.copyRecord {
			r.Key, r.Value = orig.Key, orig.Value
		}
		reason, msg := lt.Reason.String(), lt.Reason.Message()
		if haveOrig && ds.redriveLimit > 0 {
			if rc := redriveCount(orig.Headers); rc >= ds.redriveLimit {
				reason = "redrive-limit"
				msg = fmt.Sprintf("redriven %d times (strata.share.dlq.redrive.limit %d) and dead-lettered again: %s", rc, ds.redriveLimit, msg)
			}
		}
		h := func(k, v string) { r.Headers = append(r.Headers, kmsg.Header{Key: k, Value: []byte(v)}) }
		h(hdrDLQTopic, topic)
		h(hdrDLQPartition, strconv.Itoa(int(partition)))
		h(hdrDLQOffset, strconv.FormatInt(lt.Offset, 10))
		h(hdrDLQGroup, group)
		h(hdrDLQDeliveryCount, strconv.Itoa(int(lt.Count)))
		h(hdrDLQMessage, msg)
		h(hdrStrataReason, reason)
		if lt.FirstMs > 0 {
			h(hdrStrataFirstMs, strconv.FormatInt(lt.FirstMs, 10))
		}
		if lt.LastMs > 0 {
			h(hdrStrataLastMs, strconv.FormatInt(lt.LastMs, 10))
		}
		if lt.Member != "" {
			h(hdrStrataMember, lt.Member)
		}
		// Beyond Kafka: the original headers too (after the letter's own,
		// which they never repeat), so a redrive re-publishes the record
		// whole and its strata.redrive.count survives the round trip.
		if haveOrig && ds.copyRecord {
			for _, oh := range orig.Headers {
				if !strings.HasPrefix(oh.Key, "__dlq.errors.") && !strings.HasPrefix(oh.Key, "strata.dlq.") {
					r.Headers = append(r.Headers, oh)
				}
			}
		}
		rec := appendDLQRecord(nil, r)
		if n > 0 && len(body)+len(rec) > dlqMaxBatchBytes {
			break
		}
		body = append(body, rec...)
		n++
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                segment.Magic,
		LastOffsetDelta:      int32(n - 1),
		FirstTimestamp:       nowMs,
		MaxTimestamp:         nowMs,
		ProducerID:           stream.PID,
		ProducerEpoch:        stream.Epoch,
		FirstSequence:        stream.Sequence(letters[0].Ordinal),
		NumRecords:           int32(n),
		Records:              body,
	}
	raw := rb.AppendTo(nil)
	put32 := func(b []byte, v int32) { b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v) }
	put32(raw[8:], int32(len(raw)-12)) // the length counts what follows it
	put32(raw[17:], int32(segment.ComputeCRC(raw)))
	return raw, n
}

// appendDLQRecord encodes one v2 record with its true varint length.
func appendDLQRecord(dst []byte, r kmsg.Record) []byte {
	r.Length = 0
	inner := r.AppendTo(nil)[1:] // a zero Length encodes as one varint byte
	u := uint64(int64(len(inner)) << 1)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	dst = append(dst, byte(u))
	return append(dst, inner...)
}

// Dead-letter metrics, broker-wide (share_metrics.go's collector).
var (
	descDLQWritten  = prometheus.NewDesc("strata_share_dlq_letters_written_total", "Dead letters written to share groups' dead-letter topics by this broker, by reason (max-deliveries, rejected, ttl-expired, topic-deleted).", []string{"reason"}, nil)
	descDLQWaiting  = prometheus.NewDesc("strata_share_dlq_letters_waiting", "Dead letters recorded in the replicated share state of the partitions this broker leads and not yet written (the dead-letter topic unwritable, or the next write pending).", nil, nil)
	descDLQRecorded = prometheus.NewDesc("strata_share_dlq_letters_recorded_total", "Records this broker's share-partition decisions turned into dead letters (rejected, or archived at the delivery count limit, in a group with a dead-letter topic).", nil, nil)
	descDLQDropped  = prometheus.NewDesc("strata_share_dlq_letters_dropped_total", "Records archived without a dead letter because 10,000 already waited on their share partition.", nil, nil)
	descDLQFailures = prometheus.NewDesc("strata_share_dlq_write_failures_total", "Attempts to write dead letters that failed and will be retried.", nil, nil)
	descDLQPaused   = prometheus.NewDesc("strata_share_group_paused", "1 for each share group paused by the dead-letter flood guard (strata.share.dlq.flood.paused; resume with strata share-group resume).", []string{"group"}, nil)
	descDLQPauses   = prometheus.NewDesc("strata_share_dlq_flood_pauses_total", "Share groups this broker paused because their dead letters exceeded strata.share.dlq.flood.ratio of their deliveries.", nil, nil)
	descFloodDeliv  = prometheus.NewDesc("strata_share_dlq_flood_window_deliveries", "On the controller: a share group's deliveries, cluster-wide, in the flood guard's window (strata.share.dlq.flood.window.ms).", []string{"group"}, nil)
	descFloodLetter = prometheus.NewDesc("strata_share_dlq_flood_window_letters", "On the controller: a share group's dead letters, cluster-wide, in the flood guard's window; the group is paused when they reach strata.share.dlq.flood.ratio of the deliveries.", []string{"group"}, nil)
	descFloodJudge  = prometheus.NewDesc("strata_share_dlq_flood_judging", "On the controller: 1 for each share group past the flood ratio whose pause waits for the other brokers' reports of the same moments.", []string{"group"}, nil)
	descDLQDups     = prometheus.NewDesc("strata_share_dlq_rewrites_deduplicated_total", "Dead letters found already written when a new leader resumed (a leader died between the write and recording it): not written again.", nil, nil)
)

func dlqDescribe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDLQWritten, descDLQWaiting, descDLQRecorded, descDLQDropped, descDLQFailures, descDLQDups, descDLQPaused, descDLQPauses, descFloodDeliv, descFloodLetter, descFloodJudge, descDLQDepth, descDLQOldest} {
		ch <- d
	}
}

func (w *dlqWriter) collect(ch chan<- prometheus.Metric) {
	for _, r := range []sharepart.Reason{sharepart.ReasonMaxDeliveries, sharepart.ReasonRejected, sharepart.ReasonTTLExpired, sharepart.ReasonTopicDeleted} {
		ch <- prometheus.MustNewConstMetric(descDLQWritten, prometheus.CounterValue, float64(w.written[r].Load()), r.String())
	}
	ch <- prometheus.MustNewConstMetric(descDLQWaiting, prometheus.GaugeValue, float64(w.waiting.Load()))
	ch <- prometheus.MustNewConstMetric(descDLQRecorded, prometheus.CounterValue, float64(w.recorded.Load()))
	ch <- prometheus.MustNewConstMetric(descDLQDropped, prometheus.CounterValue, float64(w.dropped.Load()))
	ch <- prometheus.MustNewConstMetric(descDLQFailures, prometheus.CounterValue, float64(w.failures.Load()))
	ch <- prometheus.MustNewConstMetric(descDLQDups, prometheus.CounterValue, float64(w.duplicates.Load()))
	ch <- prometheus.MustNewConstMetric(descDLQPauses, prometheus.CounterValue, float64(w.floodPauses.Load()))
	w.collectDepths(ch)
	w.collectFlood(ch)
	b := w.l.broker
	if b == nil {
		return
	}
	for _, g := range b.GroupsWithConfigs() {
		if b.GroupConfigsView(g)[groupconfig.FloodPaused] == "true" {
			ch <- prometheus.MustNewConstMetric(descDLQPaused, prometheus.GaugeValue, 1, g)
		}
	}
}

// redriveCount is a record's strata.redrive.count header (0 when absent
// or not a number).
func redriveCount(headers []kmsg.Header) int {
	for _, h := range headers {
		if h.Key == dlq.HeaderRedriveCount {
			if n, err := strconv.Atoi(string(h.Value)); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}
