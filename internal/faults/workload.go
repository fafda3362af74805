package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/faults/check"
)

// recorder is the history being written by the workload's goroutines.
type recorder struct {
	mu     sync.Mutex
	h      check.History // protected by mu
	closed bool          // no more ops (a client still hung at the check); protected by mu
}

func (r *recorder) add(op check.Op) {
	r.mu.Lock()
	if !r.closed {
		r.h.Add(op)
	}
	r.mu.Unlock()
}

func (r *recorder) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

// clientOpts are every workload client's: all brokers as seeds, quick
// retries and timeouts (the defaults would hide a failover's length).
func clientOpts(seeds []string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(seeds...),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.DialTimeout(time.Second),
		kgo.RequestTimeoutOverhead(3 * time.Second),
		kgo.ConnIdleTimeout(5 * time.Second),
	}
}

// workload is the clients of a run, all writing into rec.
type workload struct {
	seeds []string
	topic string
	parts int32
	rec   *recorder
	logf  func(string, ...any)
	rate  int // records/s per producer
	// brokers in the cluster (the admin workload's reassignments)
	brokers int
}

// produce runs an idempotent producer (acks=all, franz-go's default)
// named name until stop, round robin over the partitions.
func (w *workload) produce(name string, stop <-chan struct{}) error {
	cl, err := kgo.NewClient(append(clientOpts(w.seeds), kgo.DefaultProduceTopic(w.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(20*time.Second),
		kgo.ProducerLinger(0))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	tick := time.NewTicker(time.Second / time.Duration(w.rate))
	defer tick.Stop()
	// In flight per partition: a partition that takes no writes does not
	// hold back the others (its turns are skipped).
	inflight := make([]chan struct{}, w.parts)
	for p := range inflight {
		inflight[p] = make(chan struct{}, 32)
	}
	var wg sync.WaitGroup
	for seq, turn := 0, 0; ; turn++ {
		select {
		case <-stop:
			wg.Wait()
			return nil
		case <-tick.C:
		}
		p := int32(turn) % w.parts
		select {
		case inflight[p] <- struct{}{}:
		default:
			continue
		}
		op := check.Op{Type: check.Produce, Process: name, Topic: w.topic, Partition: p,
			Value: fmt.Sprintf("%s-%d", name, seq), Start: time.Now()}
		seq++
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Partition: op.Partition, Value: []byte(op.Value)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			op.End = time.Now()
			if err != nil {
				op.Err = err.Error()
			} else {
				op.Ok, op.Offset = true, r.Offset
			}
			w.rec.add(op)
			<-inflight[op.Partition]
		})
	}
}

// transact runs a transactional producer: transactions of 1-5 records
// over the partitions, four in five committed and one aborted.
func (w *workload) transact(name string, seed int64, stop <-chan struct{}) error {
	rng := rand.New(rand.NewSource(seed))
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	seq := 0
	for txn := 0; ; txn++ {
		select {
		case <-stop:
			return nil
		default:
		}
		if cl == nil {
			var err error
			cl, err = kgo.NewClient(append(clientOpts(w.seeds), kgo.DefaultProduceTopic(w.topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("faults-"+name),
				kgo.TransactionTimeout(10*time.Second), kgo.RecordDeliveryTimeout(10*time.Second))...)
			if err != nil {
				return err
			}
		}
		id := fmt.Sprintf("%s/%d", name, txn)
		if err := cl.BeginTransaction(); err != nil {
			w.logf("%s: begin: %v (new client)", id, err)
			cl.Close()
			cl = nil
			continue
		}
		var wg sync.WaitGroup
		failed := false
		var mu sync.Mutex
		for i, n := 0, 1+rng.Intn(5); i < n; i++ {
			op := check.Op{Type: check.Produce, Process: name, Topic: w.topic, Partition: int32(rng.Intn(int(w.parts))),
				Value: fmt.Sprintf("%s-%d", name, seq), Txn: id, Start: time.Now()}
			seq++
			wg.Add(1)
			cl.Produce(context.Background(), &kgo.Record{Partition: op.Partition, Value: []byte(op.Value)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				op.End = time.Now()
				if err != nil {
					op.Err = err.Error()
					mu.Lock()
					failed = true
					mu.Unlock()
				} else {
					op.Ok, op.Offset = true, r.Offset
				}
				w.rec.add(op)
			})
		}
		wg.Wait()
		abort := failed || rng.Intn(5) == 0
		end := check.Op{Type: check.TxnEnd, Process: name, Txn: id, Abort: abort, Start: time.Now()}
		commit := kgo.TryCommit
		if abort {
			commit = kgo.TryAbort
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := cl.EndTransaction(ctx, commit)
		cancel()
		end.End = time.Now()
		if err != nil {
			end.Err = err.Error()
			w.rec.add(end)
			w.logf("%s: end (abort %v): %v (new client)", id, abort, err)
			cl.Close()
			cl = nil
			continue
		}
		end.Ok = true
		w.rec.add(end)
	}
}

// read runs a consumer of every partition from the start at isolation
// iso, recording each record.
func (w *workload) read(name, iso string, stop <-chan struct{}) error {
	offs := map[int32]kgo.Offset{}
	for p := int32(0); p < w.parts; p++ {
		offs[p] = kgo.NewOffset().AtStart()
	}
	opts := append(clientOpts(w.seeds), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.topic: offs}),
		kgo.FetchMaxWait(500*time.Millisecond))
	if iso == check.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return w.poll(cl, name, iso, "", stop, nil)
}

// poll records what cl's polls return until stop; after is called with
// each poll's records.
// share names the share group of a share consumer's deliveries.
func (w *workload) poll(cl *kgo.Client, name, iso, share string, stop <-chan struct{}, after func([]*kgo.Record)) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()
	for {
		start := time.Now()
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		end := time.Now()
		recs := fs.Records()
		for _, r := range recs {
			w.rec.add(check.Op{Type: check.Read, Process: name, Topic: r.Topic, Partition: r.Partition,
				Offset: r.Offset, Value: string(r.Value), Isolation: iso, Group: share, Start: start, End: end})
		}
		if after != nil && len(recs) > 0 {
			after(recs)
		}
	}
}

// group runs a consumer group member that commits after each poll, and
// beside it a prober that fetches the group's offsets.
// kip848 makes the member use the consumer group protocol of KIP-848
// (ConsumerGroupHeartbeat) instead of the classic JoinGroup/SyncGroup.
func (w *workload) group(name, group string, kip848 bool, stop <-chan struct{}) error {
	opts := append(clientOpts(w.seeds), kgo.ConsumeTopics(w.topic), kgo.ConsumerGroup(group),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if kip848 {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	admCl, err := kgo.NewClient(clientOpts(w.seeds)...)
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			resps, err := adm.FetchOffsets(ctx, group)
			cancel()
			if err != nil || resps.Error() != nil {
				continue
			}
			end := time.Now()
			for p := int32(0); p < w.parts; p++ {
				off := int64(-1)
				if r, ok := resps.Lookup(w.topic, p); ok {
					if r.Err != nil {
						continue
					}
					off = r.At
				}
				w.rec.add(check.Op{Type: check.OffsetFetch, Process: name + "-probe", Group: group, Topic: w.topic,
					Partition: p, Offset: off, Start: start, End: end})
			}
		}
	}()
	defer wg.Wait()
	return w.poll(cl, name, check.ReadUncommitted, "", stop, func(recs []*kgo.Record) {
		next := map[int32]int64{}
		for _, r := range recs {
			next[r.Partition] = r.Offset + 1
		}
		offs := map[string]map[int32]kgo.EpochOffset{w.topic: {}}
		for p, o := range next {
			offs[w.topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			end := time.Now()
			perr := map[int32]error{}
			if resp != nil {
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						perr[p.Partition] = kerr.ErrorForCode(p.ErrorCode)
					}
				}
			}
			for p, o := range next {
				op := check.Op{Type: check.Commit, Process: name, Group: group, Topic: w.topic, Partition: p,
					Offset: o, Start: start, End: end}
				e, answered := perr[p]
				switch {
				case err != nil:
					op.Err = err.Error()
				case !answered:
					op.Err = "no answer for the partition"
				case e != nil:
					op.Err = e.Error()
				default:
					op.Ok = true
				}
				w.rec.add(op)
			}
		})
	})
}

// share runs a share group consumer: of the records it gets, about 8 in
// 10 are accepted, 1 rejected and 1 released; every ack is flushed after
// its poll and recorded with the broker's answer for its partition.
func (w *workload) share(name, group string, seed int64, stop <-chan struct{}) error {
	var mu sync.Mutex
	results := map[int32]error{} // this flush's answers; protected by mu
	cl, err := kgo.NewClient(append(clientOpts(w.seeds), kgo.ConsumeTopics(w.topic), kgo.ShareGroup(group),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rs {
				if r.Topic != w.topic {
					continue
				}
				if prev, seen := results[r.Partition]; !seen || prev == nil {
					results[r.Partition] = r.Err
				}
			}
		}))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	rng := rand.New(rand.NewSource(seed))
	// A share group reads at share.isolation.level, read_uncommitted by
	// default.
	return w.poll(cl, name, check.ReadUncommitted, group, stop, func(recs []*kgo.Record) {
		var ops []check.Op
		for _, r := range recs {
			st, ack := kgo.AckAccept, "accept"
			switch rng.Intn(10) {
			case 0:
				st, ack = kgo.AckReject, "reject"
			case 1:
				st, ack = kgo.AckRelease, "release"
			}
			r.Ack(st)
			ops = append(ops, check.Op{Type: check.ShareAck, Process: name, Group: group, Topic: r.Topic,
				Partition: r.Partition, Offset: r.Offset, Ack: ack})
		}
		mu.Lock()
		clear(results)
		mu.Unlock()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ferr := cl.FlushAcks(ctx)
		cancel()
		end := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, op := range ops {
			op.Start, op.End = start, end
			perr, answered := results[op.Partition]
			switch {
			case ferr != nil:
				op.Err = ferr.Error()
			case !answered:
				op.Err = "no answer for the partition"
			case perr != nil:
				op.Err = perr.Error()
			default:
				op.Ok = true
			}
			w.rec.add(op)
		}
	})
}

// admin runs admin operations in a loop until stop: create a topic (3
// partitions, 3 replicas), add a partition, elect its preferred leaders,
// delete it. Failures under faults are expected; it counts them, and
// returns the error of the last cycle when that one failed.
func (w *workload) admin(name string, stop <-chan struct{}, stats *adminStats) error {
	cl, err := kgo.NewClient(clientOpts(w.seeds)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		err := adminCycle(adm, fmt.Sprintf("%s-%d", name, i), w.brokers, i)
		if err == nil {
			// The workload's own topic: its preferred leaders elected,
			// and (more than 3 brokers) one partition moved to other
			// brokers every 4th cycle, while it is written and read.
			err = moveMain(adm, w.topic, w.parts, w.brokers, i)
		}
		if err != nil {
			w.logf("admin cycle %d: %v", i, err)
			// Not a busy loop when a step fails at once (a controller
			// whose disk is full answers CreateTopics immediately).
			select {
			case <-stop:
			case <-time.After(250 * time.Millisecond):
			}
		}
		stats.mu.Lock()
		stats.cycles++
		if err != nil {
			stats.failed++
			stats.last = err.Error()
		}
		stats.mu.Unlock()
	}
}

// moveMain elects the preferred leaders of the workload's topic and,
// with more than 3 brokers, every 4th cycle reassigns one of its
// partitions to the next replica set.
func moveMain(adm *kadm.Client, topic string, parts int32, brokers, cycle int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	set := kadm.TopicsSet{topic: {}}
	for p := int32(0); p < parts; p++ {
		set[topic][p] = struct{}{}
	}
	rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		return fmt.Errorf("elect leaders of %s: %w", topic, err)
	}
	for _, ps := range rs {
		for _, r := range ps {
			if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) && !errors.Is(r.Err, kerr.PreferredLeaderNotAvailable) {
				return fmt.Errorf("elect leaders of %s p%d: %w", topic, r.Partition, r.Err)
			}
		}
	}
	if brokers <= 3 || cycle%4 != 0 {
		return nil
	}
	var req kadm.AlterPartitionAssignmentsReq
	p := int32(cycle/4) % parts
	req.Assign(topic, p, rotated(brokers, cycle/4+int(p)))
	ar, err := adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = ar.Error()
	}
	if err != nil {
		return fmt.Errorf("reassign %s p%d: %w", topic, p, err)
	}
	return nil
}

type adminStats struct {
	mu             sync.Mutex
	cycles, failed int
	last           string // the last error
}

// rotated is 3 of brokers (1..brokers), starting at the cycle's: a new
// replica set each cycle when there are more than 3 brokers.
func rotated(brokers, cycle int) []int32 {
	var out []int32
	for i := 0; i < min(3, brokers); i++ {
		out = append(out, int32(1+(cycle+i)%brokers))
	}
	return out
}

// adminCycle creates topic, adds a partition, elects preferred leaders,
// reassigns partition 0 (a replica set drawn from cycle) and deletes the
// topic, each step within 10 s.
func adminCycle(adm *kadm.Client, topic string, brokers, cycle int) error {
	step := func(what string, f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f(ctx); err != nil {
			return fmt.Errorf("%s %s: %w", what, topic, err)
		}
		return nil
	}
	err := step("create", func(ctx context.Context) error {
		r, err := adm.CreateTopic(ctx, 3, 3, nil, topic)
		if err == nil {
			err = r.Err
		}
		return err
	})
	if err == nil {
		err = step("add partitions to", func(ctx context.Context) error {
			rs, err := adm.CreatePartitions(ctx, 1, topic)
			if err == nil {
				err = rs.Error()
			}
			return err
		})
	}
	if err == nil {
		err = step("elect leaders of", func(ctx context.Context) error {
			rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
			if err != nil {
				return err
			}
			for _, ps := range rs {
				for _, r := range ps {
					// Already led by its preferred replica, or no leader to
					// move at this moment: not a failure of the request.
					if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) && !errors.Is(r.Err, kerr.PreferredLeaderNotAvailable) {
						return fmt.Errorf("p%d: %w", r.Partition, r.Err)
					}
				}
			}
			return nil
		})
	}
	if err == nil {
		// Move partition 0 to other brokers (with 3 brokers and 3
		// replicas, only its replicas' order, so its preferred leader,
		// changes) and elect its preferred leader.
		err = step("reassign", func(ctx context.Context) error {
			var req kadm.AlterPartitionAssignmentsReq
			req.Assign(topic, 0, rotated(brokers, cycle))
			rs, err := adm.AlterPartitionAssignments(ctx, req)
			if err == nil {
				err = rs.Error()
			}
			return err
		})
	}
	derr := step("delete", func(ctx context.Context) error {
		r, err := adm.DeleteTopic(ctx, topic)
		if err == nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			err = r.Err
		}
		return err
	})
	return errors.Join(err, derr)
}
