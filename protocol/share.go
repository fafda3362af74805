package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/groupconfig"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/sharepart"
)

// The share-partition leader (KIP-932): this broker's side of ShareFetch
// and ShareAcknowledge for the partitions it leads. The state itself is
// package sharepart's, replicated through each partition's Raft group
// (replication/partition_share_state.go); here are the decisions' inputs (the log's
// batches, the time, the group's settings), one lock per share partition
// held from a decision until its delta is applied, and the wake-ups of
// long polls when records become available again.

// ShareConfig is the share-partition leader's own configuration; the
// share groups' settings (lock duration, delivery count limit, record
// locks, auto offset reset, isolation level) are group configs over the
// broker's group.share.* defaults (Config.GroupConfig, share_settings.go).
type ShareConfig struct {
	// MaxShareSessions is group.share.max.share.sessions (2000): share
	// sessions this broker keeps. Zero: Config.GroupConfig's.
	MaxShareSessions int
	// Now is the clock (unix time); nil = time.Now.
	Now func() time.Time
	// DLQDepthEvery is strata.share.dlq.depth.interval.ms: how often the
	// depths of dead-letter topics are counted (share_dlq_depth.go).
	// Zero: 30 s.
	DLQDepthEvery time.Duration
}

func (c *ShareConfig) withDefaults() {
	if c.MaxShareSessions <= 0 {
		c.MaxShareSessions = 2000
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.DLQDepthEvery <= 0 {
		c.DLQDepthEvery = groupconfig.DefaultDLQDepthInterval
	}
}

// groupShare is one share group's effective settings: its group configs
// (share.*) over the broker's defaults.
type groupShare struct {
	part sharepart.Config
	// earliest / byTimeMs: where a new share partition starts
	// (share.auto.offset.reset: latest by default, earliest, or the
	// first offset at or after a time for by_duration).
	earliest bool
	byTimeMs int64 // > 0: by_duration's timestamp
	// readCommitted is share.isolation.level=read_committed.
	readCommitted bool
	// renew is share.renew.acknowledge.enable: RENEW acknowledgements
	// are accepted.
	renew bool
	// dlq is the group's dead-letter topic (share_dlq.go).
	dlq dlqSettings
	// recordTimes is strata.share.record.headers.enable: records' own
	// strata.ttl.ms and strata.deliver.after.ms are honoured
	// (share_headers.go).
	recordTimes bool
}

// shareKey names one share partition: a group on a topic partition.
type shareKey struct {
	topicID   [16]byte
	partition int32
	group     string
}

// sharePart is the leader's runtime for one share partition.
type sharePart struct {
	lock chan struct{} // a one-slot semaphore: held from a decision until its delta is applied
	// wake is closed (and replaced) whenever records may have become
	// available: acknowledgements that release, lapsed locks.
	mu   sync.Mutex
	wake chan struct{}
}

func (p *sharePart) acquire(ctx context.Context) error {
	select {
	case p.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *sharePart) release() { <-p.lock }

func (p *sharePart) waitCh() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wake
}

// frees reports whether acknowledgements made records available or moved
// the record-lock window: members waiting on the partition look again.
func frees(st sharepart.Stats) bool {
	return st.Accepted+st.Released+st.Rejected+st.Gaps+st.ArchivedLimit > 0
}

func (p *sharePart) notify() {
	p.mu.Lock()
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
}

// shareStats are the broker's share counters (metrics.go exports them).
type shareStats struct {
	acquired, redelivered                       atomic.Int64
	accepted, released, rejected, renewed, gaps atomic.Int64
	expired, archivedLimit, archivedSkip        atomic.Int64
}

// count adds one decision's counts to the broker's and the share
// partition's counters.
func (l *shareLeader) count(k shareKey, st sharepart.Stats) {
	l.stats.add(st)
	l.metrics.add(k, st)
	l.dlq.note(k, st)
}

func (s *shareStats) add(st sharepart.Stats) {
	s.acquired.Add(int64(st.Acquired))
	s.redelivered.Add(int64(st.Redelivered))
	s.accepted.Add(int64(st.Accepted))
	s.released.Add(int64(st.Released))
	s.rejected.Add(int64(st.Rejected))
	s.renewed.Add(int64(st.Renewed))
	s.gaps.Add(int64(st.Gaps))
	s.expired.Add(int64(st.Expired))
	s.archivedLimit.Add(int64(st.ArchivedLimit))
	s.archivedSkip.Add(int64(st.ArchivedSkip))
}

// shareLeader is the share-partition leader side of the server.
type shareLeader struct {
	cfg      ShareConfig
	broker   *replication.Broker
	sessions *shareSessions
	stats    shareStats
	metrics  shareMetrics
	dlq      *dlqWriter // share_dlq.go
	// settings resolves a group's effective settings (group configs over
	// the broker's: Server.groupShare).
	settings func(group string) groupShare
	// interBroker gives the dead-letter writer's client the broker's
	// identity (Config.InterBrokerClient).
	interBroker []kgo.Opt

	mu    sync.Mutex
	parts map[shareKey]*sharePart // protected by mu
	// drains: topics being deleted, acquisition stopped until the time
	// (share_drain.go); protected by mu.
	drains map[[16]byte]time.Time
}

func newShareLeader(cfg ShareConfig, b *replication.Broker, settings func(group string) groupShare, interBroker []kgo.Opt) *shareLeader {
	cfg.withDefaults()
	l := &shareLeader{cfg: cfg, broker: b, sessions: newShareSessions(cfg.MaxShareSessions, cfg.Now), parts: map[shareKey]*sharePart{}, settings: settings,
		interBroker: interBroker}
	l.dlq = newDLQWriter(l)
	return l
}

func (l *shareLeader) part(k shareKey) *sharePart {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.parts[k]
	if p == nil {
		p = &sharePart{lock: make(chan struct{}, 1), wake: make(chan struct{})}
		l.parts[k] = p
	}
	return p
}

// shareTarget is one partition a share request names, resolved.
type shareTarget struct {
	topicID   [16]byte
	topic     string
	partition int32
}

// errShareCode maps a share operation's error to its Kafka code.
func errShareCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, sharepart.ErrInvalidRecordState):
		return kerr.InvalidRecordState.Code
	case errors.Is(err, sharepart.ErrInvalidAck):
		return kerr.InvalidRequest.Code
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	}
	return errCode(err)
}

// ack applies one member's acknowledgements to one share partition, all
// or none, and returns once they are replicated.
func (l *shareLeader) ack(ctx context.Context, t shareTarget, group, member string, batches []sharepart.AckBatch, renew bool) error {
	reg, epoch, err := l.broker.ShareLeader(ctx, t.topic, t.partition)
	if err != nil {
		return err
	}
	key := shareKey{t.topicID, t.partition, group}
	sp := l.part(key)
	if err := sp.acquire(ctx); err != nil {
		return err
	}
	defer sp.release()
	st, _ := reg.Group(group)
	if st == nil {
		return sharepart.ErrInvalidRecordState
	}
	gs := l.settings(group)
	if renew && !gs.renew {
		return sharepart.ErrInvalidAck // share.renew.acknowledge.enable=false
	}
	d, stats, err := sharepart.Ack(st, group, member, gs.part, batches, renew, l.cfg.Now().UnixMilli())
	if err != nil {
		return err
	}
	if err := l.broker.ShareApplyAt(ctx, t.topic, t.partition, epoch, d.Encode()); err != nil {
		return err
	}
	l.count(key, stats)
	if frees(stats) {
		sp.notify()
	}
	return nil
}

// releaseMember makes every record member holds on t available again (its
// share session closed).
func (l *shareLeader) releaseMember(ctx context.Context, t shareTarget, group, member string) error {
	reg, epoch, err := l.broker.ShareLeader(ctx, t.topic, t.partition)
	if err != nil {
		return err
	}
	key := shareKey{t.topicID, t.partition, group}
	sp := l.part(key)
	if err := sp.acquire(ctx); err != nil {
		return err
	}
	defer sp.release()
	st, _ := reg.Group(group)
	if st == nil {
		return nil
	}
	d, stats := sharepart.Release(st, group, member, l.settings(group).part)
	if d.Empty() {
		return nil
	}
	if err := l.broker.ShareApplyAt(ctx, t.topic, t.partition, epoch, d.Encode()); err != nil {
		return err
	}
	l.count(key, stats)
	sp.notify()
	return nil
}

// acquired is what one acquisition round got from one partition.
type acquired struct {
	records []byte
	// region holds the records instead (sendfile; the caller releases it).
	region *log.Region
	ranges []sharepart.AcquiredRange
	// wake closes when records of the share partition are freed; lp and
	// hw: the partition and offset to wait past. For a long poll that got
	// nothing.
	wake <-chan struct{}
	lp   *log.Partition
	hw   int64
	// held: nothing was acquired because the record-lock window is full
	// and the member holds some of its locks (sharepart.WindowHeldBy).
	held bool
}

// acquire runs one acquisition round for member on t: records available
// again first, then new ones, up to max records and maxBytes of batches.
// acks, the member's acknowledgements for t piggybacked on the fetch, are
// applied first, in the same replicated entry (one Raft round for both);
// their error, if any, is ackErr, and the acquisition goes on without
// them.
func (l *shareLeader) acquire(ctx context.Context, t shareTarget, group, member string, maxRecords int, strict bool, maxBytes int32, acks []sharepart.AckBatch, regions bool) (out acquired, ackErr, err error) {
	fail := func(err error) (acquired, error, error) {
		if len(acks) > 0 {
			return out, err, err
		}
		return out, nil, err
	}
	reg, epoch, err := l.broker.ShareLeader(ctx, t.topic, t.partition)
	if err != nil {
		return fail(err)
	}
	lp, err := l.broker.Partition(t.topic, t.partition)
	if err != nil {
		return fail(err)
	}
	out.lp = lp
	key := shareKey{t.topicID, t.partition, group}
	sp := l.part(key)
	out.wake = sp.waitCh()
	if err := sp.acquire(ctx); err != nil {
		return fail(err)
	}
	defer sp.release()
	gs := l.settings(group)
	if l.draining(t.topicID) {
		gs.part.Paused = true // the topic is being deleted (share_drain.go)
	}
	offs := lp.Offsets()
	end := offs.HighWatermark
	if gs.readCommitted {
		end = offs.LastStable
	}
	out.hw = end
	st, _ := reg.Group(group)
	if st == nil {
		// A new share partition starts at share.auto.offset.reset.
		start := offs.HighWatermark
		switch {
		case gs.earliest:
			start = offs.LogStart
		case gs.byTimeMs > 0:
			if off, _, found := lp.OffsetForTimestamp(gs.byTimeMs); found {
				start = max(off, offs.LogStart)
			}
		}
		var d sharepart.Delta
		d.Init(group, start)
		if err := l.broker.ShareApplyAt(ctx, t.topic, t.partition, epoch, d.Encode()); err != nil {
			return fail(err)
		}
		if st, _ = reg.Group(group); st == nil {
			return fail(fmt.Errorf("%w: share state of %s-%d for %s not created", log.ErrStorage, t.topic, t.partition, group))
		}
	}
	now := l.cfg.Now().UnixMilli()
	var combined sharepart.Delta
	var ackStats sharepart.Stats
	released := false
	if len(acks) > 0 {
		ad, as, err := sharepart.Ack(st, group, member, gs.part, acks, false, now)
		if err != nil {
			ackErr = err
		} else {
			combined, ackStats, released = ad, as, frees(as)
			st = st.After(&ad, group)
		}
	}
	from := max(sharepart.NeedFrom(st), offs.LogStart)
	var batches []sharepart.Batch
	if from < end {
		batches, err = l.readBatches(lp, from, end, maxRecords, maxBytes, gs.readCommitted)
		if err != nil {
			return fail(err)
		}
		if gs.recordTimes {
			addRecordTimes(lp, batches, sharepart.WindowEnd(st, gs.part, offs.LogStart, now))
		}
	}
	d, ranges, stats := sharepart.Acquire(st, group, gs.part, sharepart.AcquireParams{Member: member, Max: maxRecords, Strict: strict, LogStart: offs.LogStart, NowMs: now}, batches)
	if len(ranges) == 0 {
		out.held = sharepart.WindowHeldBy(st, member, gs.part, offs.LogStart, end, now)
	}
	combined.Append(d)
	if combined.Empty() {
		return out, ackErr, nil
	}
	if err := l.broker.ShareApplyAt(ctx, t.topic, t.partition, epoch, combined.Encode()); err != nil {
		return fail(err)
	}
	stats.Add(ackStats)
	l.count(key, stats)
	if released {
		sp.notify()
	}
	if len(ranges) == 0 {
		return out, ackErr, nil
	}
	out.ranges = ranges
	out.region, out.records, err = l.readSpan(lp, ranges[0].First, ranges[len(ranges)-1].Last, regions)
	return out, ackErr, err
}

// readBatches finds the batches of [from, end) (end: the high watermark,
// or the last stable offset) from their headers alone (no record data is
// read), until they hold maxRecords deliverable records or maxBytes,
// marking control batches and, read_committed, aborted transactions'
// batches as skipped.
func (l *shareLeader) readBatches(lp *log.Partition, from, end int64, maxRecords int, maxBytes int32, readCommitted bool) ([]sharepart.Batch, error) {
	var aborted []log.AbortedTxn
	if readCommitted {
		aborted = lp.AbortedTransactions(from, end)
	}
	var out []sharepart.Batch
	records, bytes := 0, int64(0)
	err := lp.ScanHeadersFrom(from, func(h *segment.Header) bool {
		if h.BaseOffset >= end {
			return false
		}
		if h.LastOffset() < from {
			return true
		}
		skip := h.IsControl()
		if !skip && h.IsTransactional() {
			for _, a := range aborted {
				if a.ProducerID == h.ProducerID && a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
					skip = true
					break
				}
			}
		}
		out = append(out, sharepart.Batch{First: h.BaseOffset, Last: min(h.LastOffset(), end-1), Skip: skip, MaxTs: h.MaxTimestamp, Size: h.Size()})
		if !skip {
			records += int(h.LastOffset() - max(h.BaseOffset, from) + 1)
		}
		bytes += h.Size()
		return records < maxRecords && bytes < int64(maxBytes)
	})
	return out, err
}

// addRecordTimes reads the stored bytes of the batches of bs that begin
// below window (the record-lock window's end: nothing past it can be
// delivered now) and sets each one's Records: its records that carry
// their own times (share_headers.go). The batches past it are marked
// Unread. A batch that cannot be read keeps none (delivered as before).
func addRecordTimes(lp *log.Partition, bs []sharepart.Batch, window int64) {
	i := 0
	for i < len(bs) && bs[i].First < window {
		if bs[i].Skip {
			i++
			continue
		}
		from := i
		size := int64(0)
		for j := i; j < len(bs) && bs[j].First < window && size < recordTimesRead; j++ {
			size += bs[j].Size
		}
		rg, _, err := lp.ReadRegion(bs[i].First, int32(min(max(size, 1), recordTimesRead)))
		if err != nil || rg.Len == 0 {
			rg.Release()
			break
		}
		bp := timesBufs.Get().(*[]byte)
		buf, err := rg.AppendTo((*bp)[:0])
		rg.Release()
		if err == nil {
			i = setRecordTimes(bs, i, window, buf)
		}
		*bp = buf[:0]
		timesBufs.Put(bp)
		if err != nil {
			break
		}
		if i == from {
			break // no progress: the log changed under us
		}
	}
	for ; i < len(bs); i++ {
		bs[i].Unread = true
	}
}

// setRecordTimes sets the Records of the batches of bs from i on that buf
// (whole stored batches) holds, below window, and returns the index of
// the first batch it did not reach.
func setRecordTimes(bs []sharepart.Batch, i int, window int64, buf []byte) int {
	spans, err := segment.SplitBatches(buf, len(bs))
	if err != nil {
		return i
	}
	for _, sp := range spans {
		b := buf[sp[0]:sp[1]]
		base := int64(binary.BigEndian.Uint64(b))
		for i < len(bs) && bs[i].First < base {
			i++
		}
		if i == len(bs) || base >= window {
			return i
		}
		if bs[i].First == base {
			if !bs[i].Skip {
				bs[i].Records = recordTimes(b)
			}
			i++
		}
	}
	return i
}

// timesBufs are the buffers records are read into for their times.
var timesBufs = sync.Pool{New: func() any { b := make([]byte, 0, recordTimesRead); return &b }}

// recordTimesRead bounds how much of the log one read for records' own
// times takes (at least one whole batch).
const recordTimesRead = 1 << 20

// readSpan reads the stored batches that cover [first, last]: their
// headers first, to size one read exactly. With region set it takes them
// as a region of one segment file instead (sent by sendfile, not copied)
// when one holds them all.
func (l *shareLeader) readSpan(lp *log.Partition, first, last int64, region bool) (*log.Region, []byte, error) {
	var size int64
	err := lp.ScanHeadersFrom(first, func(h *segment.Header) bool {
		if h.BaseOffset > last {
			return false
		}
		if h.LastOffset() >= first {
			size += h.Size()
		}
		return h.LastOffset() < last
	})
	if err != nil {
		return nil, nil, err
	}
	if region {
		rg, _, err := lp.ReadRegion(first, int32(min(max(size, 1), 1<<31-1)))
		if err == nil && rg.Len == size {
			return rg, nil, nil
		}
		rg.Release() // the span crosses segments: copy it
	}
	res, err := lp.Read(first, int32(min(max(size, 1), 1<<31-1)))
	if err != nil {
		return nil, nil, err
	}
	return nil, res.Records, nil
}

// shareSweepEvery is how often the leader ends lapsed locks.
const shareSweepEvery = 500 * time.Millisecond

// sweep ends lapsed acquisition locks on the share partitions this broker
// leads, until stop closes: their records become available (or archived at
// the delivery count limit) without waiting for a fetch, so the metrics
// and DescribeShareGroupOffsets tell the truth and long polls wake.
// Share partitions no longer led here are forgotten.
func (l *shareLeader) sweep(stop <-chan struct{}) {
	go l.dlq.run(stop)
	go l.dlq.depthLoop(stop)
	go l.dlq.floodLoop(stop)
	t := time.NewTicker(shareSweepEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		keys := make([]shareKey, 0, len(l.parts))
		for k := range l.parts {
			keys = append(keys, k)
		}
		l.mu.Unlock()
		for _, k := range keys {
			select {
			case <-stop:
				return
			default:
			}
			if !l.expire(k) {
				l.mu.Lock()
				delete(l.parts, k)
				l.mu.Unlock()
			}
		}
	}
}

// expire ends k's lapsed locks; false when this broker no longer leads k's
// partition or the group has no state there.
func (l *shareLeader) expire(k shareKey) bool {
	t, ok := l.broker.TopicByID(k.topicID)
	if !ok {
		return false
	}
	pi, ok := partitionInfo(t, k.partition)
	if !ok || pi.Leader != l.broker.NodeID() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	reg, epoch, err := l.broker.ShareLeader(ctx, t.Name, k.partition)
	if err != nil {
		return !errors.Is(err, replication.ErrNotLeader) && !errors.Is(err, replication.ErrUnknownTopicOrPartition)
	}
	sp := l.part(k)
	if err := sp.acquire(ctx); err != nil {
		return true
	}
	defer sp.release()
	st, _ := reg.Group(k.group)
	if st == nil {
		return false
	}
	d, stats, _ := sharepart.Expire(st, k.group, l.settings(k.group).part, l.cfg.Now().UnixMilli())
	if d.Empty() {
		return true
	}
	if err := l.broker.ShareApplyAt(ctx, t.Name, k.partition, epoch, d.Encode()); err != nil {
		return true
	}
	l.count(k, stats)
	sp.notify()
	return true
}
