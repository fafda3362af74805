package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication/raftconf"
	"github.com/strata-io/strata/retention"
	"github.com/strata-io/strata/segment"
)

// leaderOf waits until broker i's image names a leader for topic-p with an
// elected epoch (> 0) that is running, and returns its index.
func (q *testQuorum) leaderOf(i int, topic string, p int32) (int, PartitionInfo) {
	q.t.Helper()
	var pi PartitionInfo
	testwait.For(q.t, 20*time.Second, func() bool {
		t, ok := q.brokers[i].Topic(topic)
		if !ok || int(p) >= len(t.Partitions) {
			return false
		}
		pi = t.Partitions[p]
		return pi.LeaderEpoch > 0 && pi.Leader > 0 && q.brokers[pi.Leader-1] != nil
	}, "no elected leader for %s-%d", topic, p)
	return int(pi.Leader - 1), pi
}

// produceTo produces b to topic-p through whichever broker leads it,
// retrying NOT_LEADER while leadership settles.
func (q *testQuorum) produceTo(topic string, p int32, b []byte) log.AppendResult {
	q.t.Helper()
	var res log.AppendResult
	var last error
	if !testwait.Until(30*time.Second, func() bool {
		for _, br := range q.brokers {
			if br == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var err error
			res, err = br.Produce(ctx, topic, p, b)
			cancel()
			if err == nil {
				return true
			}
			last = err
		}
		return false
	}) {
		q.t.Fatalf("produce to %s-%d: %v", topic, p, last)
	}
	return res
}

// localBatches reads every batch of broker i's replica of topic-p.
func (q *testQuorum) localBatches(i int, topic string, p int32) [][]byte {
	lp := q.brokers[i].logs.Get(log.TopicPartition{Topic: topic, Partition: p})
	if lp == nil {
		q.t.Fatalf("broker %d has no log of %s-%d", i+1, topic, p)
	}
	var out [][]byte
	off := lp.LogStartOffset()
	for {
		rr, err := lp.ReadUncommitted(off, 1<<20)
		if err != nil {
			q.t.Fatal(err)
		}
		if len(rr.Records) == 0 {
			return out
		}
		spans, err := segment.SplitBatches(rr.Records, 1<<20)
		if err != nil {
			q.t.Fatal(err)
		}
		for _, sp := range spans {
			b := rr.Records[sp[0]:sp[1]]
			out = append(out, b)
			h, _ := segment.ParseHeader(b)
			off = h.LastOffset() + 1
		}
	}
}

// waitSameReplicas waits until all running brokers hold identical batches
// for topic-p, want of them.
func (q *testQuorum) waitSameReplicas(topic string, p int32, want int) {
	q.t.Helper()
	same := func() bool {
		var ref [][]byte
		for i, br := range q.brokers {
			if br == nil {
				continue
			}
			got := q.localBatches(i, topic, p)
			if len(got) != want {
				return false
			}
			if ref == nil {
				ref = got
				continue
			}
			for k := range got {
				if !bytes.Equal(got[k], ref[k]) {
					q.t.Fatalf("broker %d batch %d differs from the others", i+1, k)
				}
			}
		}
		return true
	}
	if !testwait.Until(20*time.Second, same) {
		for i, br := range q.brokers {
			if br != nil {
				q.t.Logf("broker %d holds %d batches", i+1, len(q.localBatches(i, topic, p)))
			}
		}
		q.t.Fatalf("replicas of %s-%d never converged on %d batches", topic, p, want)
	}
}

// A partition of replication factor 3: the group elects a leader, which
// records itself and its epoch in the metadata; produce commits on the
// leader and is refused by followers; every replica stores identical
// batches stamped with the epoch; the loss of the leader elects another
// that keeps every acknowledged batch and takes writes; the old leader
// catches up when it returns.
func TestReplicatedPartition(t *testing.T) {
	q := newTestQuorum(t)
	ctx := context.Background()
	q.controller()
	// The last registration may still be on its way.
	testwait.For(t, 30*time.Second, func() bool { return len(q.brokers[0].Brokers()) == 3 }, "three brokers registered")
	if _, err := q.brokers[0].CreateTopic(ctx, CreateTopicRequest{Name: "rep", NumPartitions: 2, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	li, pi := q.leaderOf(0, "rep", 0)
	if len(pi.Replicas) != 3 || len(pi.ISR) != 3 {
		t.Fatalf("partition info %+v", pi)
	}
	for i := range q.brokers {
		_, got := q.leaderOf(i, "rep", 0)
		if got.Leader != pi.Leader || got.LeaderEpoch < pi.LeaderEpoch {
			t.Fatalf("broker %d sees %+v, broker 1 %+v", i+1, got, pi)
		}
	}
	for i := range q.brokers {
		_, err := q.brokers[i].Produce(ctx, "rep", 0, batch(1, -1, -1, -1))
		if i == li && err != nil {
			t.Fatalf("leader %d: %v", i+1, err)
		}
		if i != li && !errors.Is(err, ErrNotLeader) {
			t.Fatalf("follower %d: %v", i+1, err)
		}
	}
	acked := 1
	for k := 0; k < 20; k++ {
		q.produceTo("rep", 0, batch(2, -1, -1, -1))
		acked++
	}
	q.waitSameReplicas("rep", 0, acked)
	q.checkRoleTiming("rep", 0)
	for _, b := range q.localBatches(li, "rep", 0) {
		h, _ := segment.ParseHeader(b)
		if h.LeaderEpoch != q.brokers[li].img.Load().topics["rep"].Partitions[0].LeaderEpoch {
			t.Fatalf("batch at %d has epoch %d, the leader's is %+v", h.BaseOffset, h.LeaderEpoch, q.brokers[li].img.Load().topics["rep"].Partitions[0])
		}
	}

	// Lose the leader.
	q.brokers[li].Close()
	q.brokers[li] = nil
	start := time.Now()
	res := q.produceTo("rep", 0, batch(1, -1, -1, -1))
	acked++
	t.Logf("leader loss to next committed produce: %v", time.Since(start).Round(time.Millisecond))
	if res.BaseOffset != int64(1+20*2) {
		t.Fatalf("first produce after failover at %d, want %d", res.BaseOffset, 1+20*2)
	}
	other := (li + 1) % 3
	nl, npi := q.leaderOf(other, "rep", 0)
	if nl == li || npi.LeaderEpoch <= pi.LeaderEpoch {
		t.Fatalf("after failover %+v (before %+v)", npi, pi)
	}
	if err := q.start(li); err != nil {
		t.Fatal(err)
	}
	q.waitSameReplicas("rep", 0, acked)
	q.checkRoleTiming("rep", 0) // the new leader took a leader's timing, the old one a follower's

	// Preferred leader election: leadership goes back to the first
	// replica once it is in the ISR.
	pref := pi.Replicas[0]
	var err error
	if !testwait.Until(30*time.Second, func() bool {
		err = q.brokers[0].ElectLeader(ctx, "rep", 0, ElectPreferred)
		return errors.Is(err, ErrElectionNotNeeded)
	}) {
		t.Fatalf("preferred election: %v", err)
	}
	for i := range q.brokers {
		var got PartitionInfo
		if !testwait.Until(4*time.Second, func() bool {
			_, got = q.leaderOf(i, "rep", 0)
			return got.Leader == pref
		}) {
			t.Fatalf("broker %d sees leader %d after the preferred election, want %d", i+1, got.Leader, pref)
		}
	}

	// DeleteRecords moves the log start on every replica.
	li, _ = q.leaderOf(0, "rep", 0)
	if start, err := q.brokers[li].DeleteRecords(ctx, "rep", 0, 10); err != nil || start != 10 {
		t.Fatalf("DeleteRecords: %d, %v", start, err)
	}
	for i := range q.brokers {
		lp := q.brokers[i].logs.Get(log.TopicPartition{Topic: "rep", Partition: 0})
		if !testwait.Until(5*time.Second, func() bool { return lp.LogStartOffset() == 10 }) {
			t.Fatalf("broker %d: log start %d after DeleteRecords, want 10", i+1, lp.LogStartOffset())
		}
	}

	// A clean stop hands leadership over: the next leader is in the
	// metadata well before an election timeout would have passed.
	_, before := q.leaderOf(0, "rep", 0)
	q.brokers[li].Close()
	q.brokers[li] = nil
	other = (li + 1) % 3
	var got PartitionInfo
	if !testwait.Until(10*time.Second, func() bool {
		var nl int
		nl, got = q.leaderOf(other, "rep", 0)
		return nl != li && got.LeaderEpoch > before.LeaderEpoch
	}) {
		t.Fatalf("no new leader after a clean stop: %+v", got)
	}
	q.produceTo("rep", 0, batch(1, -1, -1, -1))
}

// Retention on replicated partitions: each replica's cleaner deletes old
// segments (the group snapshots first, so its raft log never loses an
// entry it maps); a replica restarted afterwards rebuilds its raft log
// from the snapshot and keeps replicating; a replica that was down while
// the others deleted what it lacks catches up through a snapshot install
// that streams the leader's segments.
func TestReplicatedRetention(t *testing.T) {
	q := newTestQuorum(t)
	ctx := context.Background()
	q.controller()
	testwait.For(t, 30*time.Second, func() bool { return len(q.brokers[0].Brokers()) == 3 }, "three brokers registered")
	cfgs := map[string]string{"segment.bytes": "1024", "retention.bytes": "2048"}
	if _, err := q.brokers[0].CreateTopic(ctx, CreateTopicRequest{Name: "ret", NumPartitions: 1, ReplicationFactor: 3, Configs: cfgs}); err != nil {
		t.Fatal(err)
	}
	clean := func() {
		for _, br := range q.brokers {
			if br != nil {
				c := retention.NewCleaner(retention.CleanerOptions{Logs: br.logs, Logger: discardLogger()})
				c.RunOnce()
				c.Close()
			}
		}
	}
	produce := func(n int) {
		for k := 0; k < n; k++ {
			q.produceTo("ret", 0, batch(3, -1, -1, -1))
		}
	}
	produce(40)
	q.waitSameReplicasFrom("ret", 0)
	clean()
	for i, br := range q.brokers {
		lp := br.logs.Get(log.TopicPartition{Topic: "ret", Partition: 0})
		if lp.LogStartOffset() == 0 || len(lp.Segments()) > 4 {
			t.Fatalf("broker %d: log start %d, %d segments after retention", i+1, lp.LogStartOffset(), len(lp.Segments()))
		}
	}
	// Restart a follower: its raft log comes back from the snapshot.
	li, _ := q.leaderOf(0, "ret", 0)
	f := (li + 1) % 3
	q.brokers[f].Close()
	q.brokers[f] = nil
	if err := q.start(f); err != nil {
		t.Fatalf("restart after retention: %v", err)
	}
	produce(5)
	q.waitSameReplicasFrom("ret", 0)

	// A follower down while the others write and delete past what it
	// holds gets the leader's segments.
	li, _ = q.leaderOf(0, "ret", 0)
	f = (li + 2) % 3
	q.brokers[f].Close()
	q.brokers[f] = nil
	produce(40)
	clean()
	for _, i := range []int{li, (li + 1) % 3} {
		if g := q.brokers[i].group(log.TopicPartition{Topic: "ret", Partition: 0}); g != nil {
			if err := g.snapshotNow(); err != nil {
				t.Fatal(err)
			}
		}
	}
	clean()
	installs := snapshotInstalls.Load()
	if err := q.start(f); err != nil {
		t.Fatal(err)
	}
	produce(3)
	q.waitSameReplicasFrom("ret", 0)
	if snapshotInstalls.Load() == installs {
		t.Fatal("the returning follower caught up without a snapshot install")
	}
}

// waitSameReplicasFrom waits until every running broker holds the same
// batches of topic-p from the highest log start among them, up to the
// same log end.
func (q *testQuorum) waitSameReplicasFrom(topic string, p int32) {
	q.t.Helper()
	converged := func() bool {
		var from, end int64 = 0, -1
		same := true
		for _, br := range q.brokers {
			if br == nil {
				continue
			}
			lp := br.logs.Get(log.TopicPartition{Topic: topic, Partition: p})
			o := lp.Offsets()
			from = max(from, o.LogStart)
			if end >= 0 && o.LogEnd != end {
				same = false
			}
			end = o.LogEnd
		}
		if same {
			var ref [][]byte
			for i, br := range q.brokers {
				if br == nil {
					continue
				}
				var got [][]byte
				for _, b := range q.localBatches(i, topic, p) {
					if h, _ := segment.ParseHeader(b); h.BaseOffset >= from {
						got = append(got, b)
					}
				}
				if ref == nil {
					ref = got
					continue
				}
				if len(got) != len(ref) {
					same = false
					break
				}
				for k := range got {
					if !bytes.Equal(got[k], ref[k]) {
						q.t.Fatalf("broker %d batch %d differs from the others", i+1, k)
					}
				}
			}
			if same {
				return true
			}
		}
		return false
	}
	if !testwait.Until(30*time.Second, converged) {
		for i, br := range q.brokers {
			if br != nil {
				q.t.Logf("broker %d: %+v", i+1, br.logs.Get(log.TopicPartition{Topic: topic, Partition: p}).Offsets())
			}
		}
		q.t.Fatalf("replicas of %s-%d never converged", topic, p)
	}
}

// Reassignment: a partition on brokers 1,2 moves to 2,3 through raft
// configuration changes (3 joins and catches up, 1 leaves and deletes its
// log), keeps every batch and takes writes; a cancel of nothing is
// refused; growing to three replicas works too.
func TestReassignPartition(t *testing.T) {
	q := newTestQuorum(t)
	ctx := context.Background()
	q.controller()
	testwait.For(t, 30*time.Second, func() bool { return len(q.brokers[0].Brokers()) == 3 }, "three brokers registered")
	if _, err := q.brokers[0].CreateTopic(ctx, CreateTopicRequest{Name: "mv", NumPartitions: -1, ReplicationFactor: -1,
		Assignment: map[int32][]int32{0: {1, 2}}}); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 30; k++ {
		q.produceTo("mv", 0, batch(2, -1, -1, -1))
	}
	if err := q.brokers[2].AlterPartitionReassignment(ctx, "mv", 0, nil); !errors.Is(err, ErrNoReassignmentInProgress) {
		t.Fatalf("cancel without a reassignment: %v", err)
	}
	if err := q.brokers[2].AlterPartitionReassignment(ctx, "mv", 0, []int32{2, 9}); !errors.Is(err, ErrInvalidReplicaAssignment) {
		t.Fatalf("unregistered broker: %v", err)
	}
	if err := q.brokers[2].AlterPartitionReassignment(ctx, "mv", 0, []int32{2, 3}); err != nil {
		t.Fatal(err)
	}
	if rs := q.brokers[0].Reassignments(); len(rs) != 1 || !equalNodes(rs[0].Adding, []int32{3}) || !equalNodes(rs[0].Removing, []int32{1}) {
		t.Logf("reassignments right after the request: %+v", rs) // may already be done
	}
	waitReplicas := func(want []int32) {
		t.Helper()
		if !testwait.Until(30*time.Second, func() bool {
			for _, br := range q.brokers {
				ti, _ := br.Topic("mv")
				if p := ti.Partitions[0]; p.Target != nil || !equalNodes(p.Replicas, want) {
					return false
				}
			}
			return true
		}) {
			ti, _ := q.brokers[0].Topic("mv")
			t.Fatalf("reassignment to %v not done: %+v", want, ti.Partitions[0])
		}
	}
	waitReplicas([]int32{2, 3})
	for k := 0; k < 5; k++ {
		q.produceTo("mv", 0, batch(1, -1, -1, -1))
	}
	testwait.For(t, 10*time.Second, func() bool { return !q.brokers[0].hasLog(log.TopicPartition{Topic: "mv", Partition: 0}) },
		"broker 1 kept the log of a partition moved away")
	b1 := q.brokers[0]
	q.brokers[0] = nil // waitSameReplicas compares the replicas only
	q.waitSameReplicas("mv", 0, 35)
	q.brokers[0] = b1
	// Watch the leader's configuration: broker 1 joins as a non-voter and
	// votes only once it has caught up (reassignStep).
	firstSeen := make(chan raft.ServerSuffrage, 1)
	stopWatch := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(2 * time.Millisecond):
			}
			for _, br := range q.brokers[1:] {
				g := br.group(log.TopicPartition{Topic: "mv", Partition: 0})
				if g == nil || g.raft.State() != raft.Leader {
					continue
				}
				for _, s := range g.raft.GetConfiguration().Configuration().Servers {
					if s.ID == serverID(1) {
						firstSeen <- s.Suffrage
						return
					}
				}
			}
		}
	}()
	if err := q.brokers[0].AlterPartitionReassignment(ctx, "mv", 0, []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	waitReplicas([]int32{1, 2, 3})
	close(stopWatch)
	select {
	case su := <-firstSeen:
		if su != raft.Nonvoter {
			t.Fatalf("broker 1 entered the configuration as %v, want a non-voter until it caught up", su)
		}
	default:
		t.Fatal("never saw broker 1 in the leader's configuration")
	}
	q.produceTo("mv", 0, batch(1, -1, -1, -1))
	q.waitSameReplicas("mv", 0, 36)
	// Broker 1 came back empty: it joined with its votes held back
	// (transport/join_gate.go) and votes again once caught up.
	testwait.For(t, 10*time.Second, func() bool {
		g := b1.group(log.TopicPartition{Topic: "mv", Partition: 0})
		return g != nil && !g.trans.Joining()
	}, "the re-added replica still holds its votes back after catching up")
	// The metadata's ISR follows the promotion (the ISR counts voters, and
	// nothing else makes the leader report after it).
	testwait.For(t, 15*time.Second, func() bool {
		ti, _ := q.brokers[1].Topic("mv")
		return len(ti.Partitions[0].ISR) == 3
	}, "the ISR never grew to the three replicas after the reassignment")
}

// checkRoleTiming waits until every running replica of the partition
// runs with its role's heartbeat timeout: the leader with
// leaderHeartbeatFactor times the followers' (partitionGroup.fitTiming).
func (q *testQuorum) checkRoleTiming(topic string, part int32) {
	q.t.Helper()
	tp := log.TopicPartition{Topic: topic, Partition: part}
	var last string
	if !testwait.Until(10*time.Second, func() bool {
		last = ""
		for i, b := range q.brokers {
			if b == nil {
				continue
			}
			g := b.group(tp)
			if g == nil {
				last += fmt.Sprintf("broker %d has no group; ", i+1)
				continue
			}
			want := g.timing.Heartbeat
			if g.raft.State() == raft.Leader {
				want *= raftconf.LeaderHeartbeatFactor
			}
			if got := g.raft.ReloadableConfig().HeartbeatTimeout; got != want {
				last += fmt.Sprintf("broker %d (%v) heartbeat timeout %v, want %v; ", i+1, g.raft.State(), got, want)
			}
		}
		return last == ""
	}) {
		q.t.Fatalf("role timing: %s", last)
	}
}

// Three brokers create the same topic at once (as their coordinators
// auto-create __consumer_offsets on the first FindCoordinator each gets):
// one wins, the others answer TOPIC_ALREADY_EXISTS, and none removes the
// partitions the winner's command opened on it as "stray" directories
// (which deleted a running raft group's files, and raft panicked in a CI
// run). Every partition then takes writes on all three replicas.
func TestConcurrentCreateOfOneTopic(t *testing.T) {
	q := newTestQuorum(t)
	ctx := context.Background()
	q.controller()
	for i, b := range q.brokers { // every broker's image has every registration
		testwait.For(t, 30*time.Second, func() bool { return len(b.Brokers()) == 3 }, "broker %d sees three brokers registered", i+1)
	}
	check := func(name string) {
		t.Helper()
		for p := int32(0); p < 3; p++ {
			q.produceTo(name, p, batch(2, -1, -1, -1))
			q.waitSameReplicas(name, p, 1)
		}
	}
	for cycle := 0; cycle < 6; cycle++ {
		name := fmt.Sprintf("same-%d", cycle)
		errs := make([]error, len(q.brokers))
		var wg sync.WaitGroup
		for i := range q.brokers {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, errs[i] = q.brokers[i].CreateTopic(ctx, CreateTopicRequest{Name: name, NumPartitions: 3, ReplicationFactor: 3})
			}(i)
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrTopicExists):
				t.Fatalf("%s: broker %d: %v", name, i+1, err)
			}
		}
		if won != 1 {
			t.Fatalf("%s: %d creates succeeded (%v), want 1", name, won, errs)
		}
		check(name)
	}
}
