package dlq

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Options is one redrive.
type Options struct {
	// Seeds are the brokers to bootstrap from.
	Seeds []string
	// Group is the share group whose dead letters are redriven.
	Group string
	// Topic is the dead-letter topic; "" = the group's
	// errors.deadletterqueue.topic.name.
	Topic string
	// To is the topic records are re-published to; "" = each letter's
	// source topic.
	To string
	// Reason, when set, takes only letters of that reason.
	Reason string
	// Since, when set, takes only letters written at or after it; older
	// ones not yet redriven are left (later runs can take them).
	Since time.Time
	// Max bounds the records re-published (0 = all).
	Max int
	// Limit is the redrive limit (0 = DefaultLimit): a record already
	// redriven Limit times is refused and stays.
	Limit int
	// Execute re-publishes; false only plans (nothing changes).
	Execute bool
	// Batch is the records per transaction (0 = 500).
	Batch int
	// AfterProduce, when set, runs after a batch's records were
	// produced and before its transaction commits (fault injection: an
	// error ends the run there, as a crash would).
	AfterProduce func(batch int) error
	// Opts are extra client options (dialer, logger).
	Opts []kgo.Opt
}

// Report is what a redrive did, or (a plan) would do.
type Report struct {
	Topic    string // the dead-letter topic
	Executed bool
	// Moved is the records re-published (a plan: to be re-published),
	// by reason and by source ("topic/partition").
	Moved    int
	ByReason map[string]int
	BySource map[string]int
	// Refused is the letters past the redrive limit (they stay);
	// RefusedSample names some of them.
	Refused       int
	RefusedSample []Letter
	// Gone is the letters whose record was no longer in its source
	// (retention removed it, or the topic was deleted): reported and
	// skipped; GoneSample names some.
	Gone       int
	GoneSample []Letter
	// Older is the letters older than Since left behind.
	Older int
	// Transactions committed (Execute).
	Transactions int
	// Unread is the letters without a copy whose source was not read
	// (a plan does not read sources: their redrive counts are unknown).
	Unread int
}

const sampleMax = 20

// runner is one redrive in progress.
type runner struct {
	o      Options
	cl     *kgo.Client // plain: metadata, reads, cursor fetches and non-transactional commits
	adm    *kadm.Client
	txn    *kgo.Client // transactional producer (Execute)
	rep    *Report
	scope  []string
	cursor map[string]map[int32]done // reason -> partition -> done
	srcEnd map[string]kadm.ListedOffsets
	n      int // transactions so far
}

// Redrive plans (o.Execute false) or runs a redrive of o.Group's dead
// letters.
func Redrive(ctx context.Context, o Options) (*Report, error) {
	if o.Group == "" {
		return nil, errors.New("no share group named")
	}
	if o.Limit <= 0 {
		o.Limit = DefaultLimit
	}
	if o.Batch <= 0 {
		o.Batch = 500
	}
	if o.Reason != "" && reasonOf(o.Reason) != o.Reason {
		return nil, fmt.Errorf("unknown reason %q (one of %s)", o.Reason, strings.Join(Reasons, ", "))
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(o.Seeds...)}, o.Opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	r := &runner{o: o, cl: cl, adm: kadm.NewClient(cl), rep: &Report{ByReason: map[string]int{}, BySource: map[string]int{}, Executed: o.Execute},
		srcEnd: map[string]kadm.ListedOffsets{}}
	if o.Topic == "" {
		if o.Topic, err = GroupDLQTopic(ctx, cl, o.Group); err != nil {
			return nil, err
		}
		if o.Topic == "" {
			return nil, fmt.Errorf("share group %s has no dead-letter topic (errors.deadletterqueue.topic.name)", o.Group)
		}
		r.o.Topic = o.Topic
	}
	if o.To == o.Topic {
		return nil, fmt.Errorf("cannot redrive %s into itself", o.Topic)
	}
	r.rep.Topic = o.Topic
	r.scope = Reasons
	if o.Reason != "" {
		r.scope = []string{o.Reason}
	}
	if o.Execute {
		// The transactional producer first: its InitProducerId aborts
		// a dead run's open transaction, so the cursors read next are
		// the committed truth.
		r.txn, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(o.Seeds...), kgo.TransactionalID(TransactionalID(o.Group)),
			kgo.TransactionTimeout(60 * time.Second), kgo.ProducerLinger(0)}, o.Opts...)...)
		if err != nil {
			return nil, err
		}
		defer r.txn.Close()
		if _, _, err := r.txn.ProducerID(ctx); err != nil {
			return nil, fmt.Errorf("initializing the transactional producer %s: %w", TransactionalID(o.Group), err)
		}
	}
	if r.cursor, err = loadCursors(ctx, r.adm, o.Group, o.Topic, r.scope); err != nil {
		return nil, err
	}
	starts, err := r.adm.ListStartOffsets(ctx, o.Topic)
	if err != nil {
		return nil, err
	}
	ends, err := r.adm.ListEndOffsets(ctx, o.Topic)
	if err != nil {
		return nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("dead-letter topic %s: %w", o.Topic, err)
	}
	var sinceAt kadm.ListedOffsets
	if !o.Since.IsZero() {
		if sinceAt, err = r.adm.ListOffsetsAfterMilli(ctx, o.Since.UnixMilli(), o.Topic); err != nil {
			return nil, err
		}
	}
	var parts []int32
	ends.Each(func(l kadm.ListedOffset) { parts = append(parts, l.Partition) })
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		end, _ := ends.Lookup(o.Topic, p)
		from := int64(-1)
		for _, reason := range r.scope {
			c := r.cursor[reason][p]
			if from < 0 || c.low < from {
				from = c.low
			}
		}
		if s, ok := starts.Lookup(o.Topic, p); ok {
			from = max(from, s.Offset)
		}
		if s, ok := sinceAt.Lookup(o.Topic, p); ok && s.Err == nil && s.Offset >= 0 {
			from = max(from, s.Offset)
		}
		stop, err := r.partition(ctx, p, from, end.Offset)
		if err != nil {
			return r.rep, err
		}
		if stop {
			break
		}
	}
	return r.rep, nil
}

// candidate is a letter to re-publish.
type candidate struct {
	l   Letter
	rec *kgo.Record // the source's record, when read back
}

// partition redrives letters [from, end) of one dead-letter partition;
// stop reports that Max was reached.
func (r *runner) partition(ctx context.Context, p int32, from, end int64) (stop bool, err error) {
	if from >= end {
		return false, nil
	}
	batchFrom := from
	var cands []candidate
	holes := map[string][]int64{}
	hole := func(reason string, o int64) { holes[reason] = append(holes[reason], o) }
	flush := func(upto int64) error {
		err := r.flush(ctx, p, batchFrom, upto, cands, holes)
		batchFrom, cands, holes = upto, nil, map[string][]int64{}
		return err
	}
	inScope := func(reason string) bool {
		for _, s := range r.scope {
			if s == reason {
				return true
			}
		}
		return false
	}
	err = scanPartition(ctx, r.o.Seeds, r.o.Opts, r.o.Topic, p, from, end, func(rec *kgo.Record) (bool, error) {
		l := ParseLetter(rec)
		if !inScope(l.Reason) || r.cursor[l.Reason][p].has(l.Offset) {
			return true, nil
		}
		if !r.o.Since.IsZero() && l.Time.Before(r.o.Since) {
			r.rep.Older++
			hole(l.Reason, l.Offset)
			return true, nil
		}
		if l.Copied && l.Redrives >= r.o.Limit {
			r.refuse(l)
			hole(l.Reason, l.Offset)
			return true, nil
		}
		cands = append(cands, candidate{l: l})
		if r.o.Max > 0 && r.rep.Moved+len(cands) >= r.o.Max {
			stop = true
			return false, flush(l.Offset + 1)
		}
		if len(cands) >= r.o.Batch {
			return true, flush(l.Offset + 1)
		}
		return true, nil
	})
	if err != nil || stop {
		return stop, err
	}
	return false, flush(end)
}

func (r *runner) refuse(l Letter) {
	r.rep.Refused++
	if len(r.rep.RefusedSample) < sampleMax {
		r.rep.RefusedSample = append(r.rep.RefusedSample, l)
	}
}

func (r *runner) gone(l Letter) {
	r.rep.Gone++
	if len(r.rep.GoneSample) < sampleMax {
		r.rep.GoneSample = append(r.rep.GoneSample, l)
	}
}

// flush handles one batch: letters cands, and dead-letter offsets
// [from, upto) done for every reason in scope except holes.
func (r *runner) flush(ctx context.Context, p int32, from, upto int64, cands []candidate, holes map[string][]int64) error {
	var recs []*kgo.Record
	var moved []Letter
	if err := r.readSources(ctx, cands); err != nil {
		return err
	}
	for _, c := range cands {
		l := c.l
		switch {
		case !l.Copied && c.rec == nil && r.o.Execute:
			r.gone(l)
			continue
		case !l.Copied && c.rec == nil: // a plan: the source was not read
			if r.srcGone(ctx, l) {
				r.gone(l)
				continue
			}
			r.rep.Unread++
		case !l.Copied:
			l.Key, l.Value, l.Headers = c.rec.Key, c.rec.Value, c.rec.Headers
			l.Redrives = redriveCount(c.rec.Headers)
			if l.Redrives >= r.o.Limit {
				r.refuse(l)
				holes[l.Reason] = append(holes[l.Reason], l.Offset)
				continue
			}
		}
		to := r.o.To
		if to == "" {
			to = l.SourceTopic
		}
		if to == "" {
			r.gone(l) // no source named: nowhere to go back to
			continue
		}
		rec := &kgo.Record{Topic: to, Key: l.Key, Value: l.Value}
		for _, h := range l.Headers {
			if h.Key != HeaderRedriveCount && h.Key != HeaderRedriveFrom && !dlqHeader(h.Key) {
				rec.Headers = append(rec.Headers, h)
			}
		}
		rec.Headers = append(rec.Headers,
			kgo.RecordHeader{Key: HeaderRedriveCount, Value: []byte(strconv.Itoa(l.Redrives + 1))},
			kgo.RecordHeader{Key: HeaderRedriveFrom, Value: []byte(fmt.Sprintf("%s/%d/%d", r.o.Topic, l.Partition, l.Offset))})
		recs = append(recs, rec)
		moved = append(moved, l)
	}
	// The cursors after this batch.
	next := map[string]done{}
	for _, reason := range r.scope {
		d := r.cursor[reason][p].clone()
		hs := holes[reason]
		sort.Slice(hs, func(i, j int) bool { return hs[i] < hs[j] })
		a := from
		for _, h := range hs {
			d.add(a, h)
			a = h + 1
		}
		d.add(a, upto)
		if !d.equal(r.cursor[reason][p]) {
			next[reason] = d
		}
	}
	if r.o.Execute {
		if err := r.commit(ctx, p, recs, next); err != nil {
			return err
		}
	}
	for reason, d := range next {
		r.cursor[reason][p] = d
	}
	for _, l := range moved {
		r.rep.Moved++
		r.rep.ByReason[l.Reason]++
		r.rep.BySource[l.Source()]++
	}
	return nil
}

// srcGone reports (a plan) whether l's record is below its source
// partition's start offset, or its topic is gone.
func (r *runner) srcGone(ctx context.Context, l Letter) bool {
	lo, ok := r.srcEnd["start:"+l.SourceTopic]
	if !ok {
		lo, _ = r.adm.ListStartOffsets(ctx, l.SourceTopic)
		r.srcEnd["start:"+l.SourceTopic] = lo
	}
	s, ok := lo.Lookup(l.SourceTopic, l.SourcePartition)
	return !ok || s.Err != nil || l.SourceOffset < s.Offset
}

// readSources reads back (Execute only) the records of letters without
// a copy; a record not found is left nil (gone).
func (r *runner) readSources(ctx context.Context, cands []candidate) error {
	if !r.o.Execute {
		return nil
	}
	type tp struct {
		t string
		p int32
	}
	want := map[tp]map[int64][]int{}
	for i, c := range cands {
		if c.l.Copied || c.l.SourceTopic == "" || c.l.SourceOffset < 0 {
			continue
		}
		k := tp{c.l.SourceTopic, c.l.SourcePartition}
		if want[k] == nil {
			want[k] = map[int64][]int{}
		}
		want[k][c.l.SourceOffset] = append(want[k][c.l.SourceOffset], i)
	}
	for k, offs := range want {
		ends, ok := r.srcEnd[k.t]
		if !ok {
			var err error
			if ends, err = r.adm.ListEndOffsets(ctx, k.t); err != nil {
				return err
			}
			r.srcEnd[k.t] = ends
		}
		end, ok := ends.Lookup(k.t, k.p)
		if !ok || end.Err != nil {
			continue // the topic or partition is gone
		}
		lo, hi := int64(-1), int64(-1)
		for o := range offs {
			if lo < 0 || o < lo {
				lo = o
			}
			hi = max(hi, o)
		}
		err := scanPartition(ctx, r.o.Seeds, r.o.Opts, k.t, k.p, lo, min(hi+1, end.Offset), func(rec *kgo.Record) (bool, error) {
			for _, i := range offs[rec.Offset] {
				cands[i].rec = rec
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("reading %s/%d back: %w", k.t, k.p, err)
		}
	}
	return nil
}

// commit re-publishes recs and records the cursors next, in one
// transaction when there is anything to publish.
func (r *runner) commit(ctx context.Context, p int32, recs []*kgo.Record, next map[string]done) error {
	if len(recs) == 0 {
		for reason, d := range next {
			meta, err := d.metadata()
			if err != nil {
				return err
			}
			var os kadm.Offsets
			os.Add(kadm.Offset{Topic: r.o.Topic, Partition: p, At: d.low, LeaderEpoch: -1, Metadata: meta})
			resp, err := r.adm.CommitOffsets(ctx, CursorGroup(r.o.Group, reason), os)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				return fmt.Errorf("committing cursor %s: %w", CursorGroup(r.o.Group, reason), err)
			}
		}
		return nil
	}
	if err := r.txn.BeginTransaction(); err != nil {
		return err
	}
	abort := func(err error) error {
		actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = r.txn.AbortBufferedRecords(actx)
		_ = r.txn.EndTransaction(actx, kgo.TryAbort)
		return err
	}
	if err := r.txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return abort(fmt.Errorf("re-publishing: %w", err))
	}
	r.n++
	if r.o.AfterProduce != nil {
		if err := r.o.AfterProduce(r.n); err != nil {
			return err // as a crash: the transaction stays open until the next run fences it
		}
	}
	id, epoch, err := r.txn.ProducerID(ctx)
	if err != nil {
		return abort(err)
	}
	reasons := make([]string, 0, len(next))
	for reason := range next {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		if err := r.txnCommitCursor(ctx, id, epoch, CursorGroup(r.o.Group, reason), p, next[reason]); err != nil {
			return abort(err)
		}
	}
	if err := r.txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return abort(fmt.Errorf("committing the transaction: %w", err))
	}
	r.rep.Transactions++
	return nil
}

// txnCommitCursor adds group's cursor d on partition p to the open
// transaction.
func (r *runner) txnCommitCursor(ctx context.Context, id int64, epoch int16, group string, p int32, d done) error {
	meta, err := d.metadata()
	if err != nil {
		return err
	}
	tid := TransactionalID(r.o.Group)
	return retry(ctx, func() error {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = tid, id, epoch, group
		resp, err := req.RequestWith(ctx, r.txn)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}, func() error {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = tid, group, id, epoch
		req.Generation, req.MemberID = -1, ""
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = r.o.Topic
		pp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		pp.Partition, pp.Offset, pp.LeaderEpoch, pp.Metadata = p, d.low, -1, &meta
		t.Partitions = append(t.Partitions, pp)
		req.Topics = append(req.Topics, t)
		resp, err := req.RequestWith(ctx, r.txn)
		if err != nil {
			return err
		}
		for _, t := range resp.Topics {
			for _, pp := range t.Partitions {
				if err := kerr.ErrorForCode(pp.ErrorCode); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// retry runs each step in turn, repeating a step while it fails with a
// retriable error (a coordinator moving, a transaction still ending).
func retry(ctx context.Context, steps ...func() error) error {
	for _, step := range steps {
		for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
			err := step()
			if err == nil {
				break
			}
			if !kerr.IsRetriable(err) && !errors.Is(err, kerr.ConcurrentTransactions) {
				return err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
			case <-time.After(wait):
			}
		}
	}
	return nil
}

// loadCursors reads the reasons' cursors on topic, waiting out pending
// transactional commits (RequireStable).
func loadCursors(ctx context.Context, adm *kadm.Client, group, topic string, reasons []string) (map[string]map[int32]done, error) {
	out := map[string]map[int32]done{}
	for _, reason := range reasons {
		out[reason] = map[int32]done{}
		var resp kadm.OffsetResponses
		err := retry(ctx, func() error {
			var err error
			resp, err = adm.FetchOffsetsForTopics(kadm.RequireStable(ctx), CursorGroup(group, reason), topic)
			if err == nil {
				err = resp.Error()
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("reading cursor %s: %w", CursorGroup(group, reason), err)
		}
		var perr error
		resp.Each(func(o kadm.OffsetResponse) {
			if o.Topic != topic {
				return
			}
			d, err := parseDone(o.At, o.Metadata)
			if err != nil {
				perr = fmt.Errorf("cursor %s partition %d: %w", CursorGroup(group, reason), o.Partition, err)
			}
			out[reason][o.Partition] = d
		})
		if perr != nil {
			return nil, perr
		}
	}
	return out, nil
}

// GroupDLQTopic is group's errors.deadletterqueue.topic.name ("" = none).
func GroupDLQTopic(ctx context.Context, cl *kgo.Client, group string) (string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	res.ConfigNames = []string{"errors.deadletterqueue.topic.name"}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", err
	}
	for _, rr := range resp.Resources {
		if err := kerr.ErrorForCode(rr.ErrorCode); err != nil {
			return "", fmt.Errorf("group %s configs: %w", group, err)
		}
		for _, c := range rr.Configs {
			if c.Name == "errors.deadletterqueue.topic.name" && c.Value != nil {
				return *c.Value, nil
			}
		}
	}
	return "", nil
}

// scanPartition calls fn for the records of topic/p at offsets [from,
// to) in order, until fn returns false or an error.
func scanPartition(ctx context.Context, seeds []string, opts []kgo.Opt, topic string, p int32, from, to int64, fn func(*kgo.Record) (bool, error)) error {
	if from >= to {
		return nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}}),
		kgo.FetchMaxWait(250 * time.Millisecond)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	next := from
	for next < to {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !kerr.IsRetriable(err) && !errors.Is(err, context.Canceled) {
				ferr = err
			}
		})
		if ferr != nil {
			return ferr
		}
		var stop bool
		var cbErr error
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			for _, rec := range fp.Records {
				if rec.Offset >= to {
					next = max(next, to) // past the range: nothing more in it
				}
				if stop || rec.Offset < next || rec.Offset >= to {
					continue
				}
				next = rec.Offset + 1
				cont, err := fn(rec)
				if err != nil {
					cbErr, stop = err, true
				} else if !cont {
					stop = true
				}
			}
			// Nothing at or past to in the log: the range is read.
			if fp.HighWatermark >= 0 && fp.HighWatermark <= next {
				next = max(next, to)
			}
		})
		if cbErr != nil || stop {
			return cbErr
		}
	}
	return nil
}
