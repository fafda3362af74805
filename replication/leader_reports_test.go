package replication

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/log"
)

// raftLeaders is, for each partition of topic, the running broker whose
// group is leader (node id) and its term; partitions led by no running
// broker, or by two (a stale leader not yet stepped down), are missing.
func (q *testQuorum) raftLeaders(topic string) map[int32][2]int64 {
	out := map[int32][2]int64{}
	dup := map[int32]bool{}
	for i, b := range q.brokers {
		if b == nil {
			continue
		}
		b.groupsMu.RLock()
		for tp, g := range b.groups {
			if tp.Topic != topic || g.raft.State() != raft.Leader {
				continue
			}
			if _, ok := out[tp.Partition]; ok {
				dup[tp.Partition] = true
			}
			out[tp.Partition] = [2]int64{int64(i + 1), int64(g.raft.CurrentTerm())}
		}
		b.groupsMu.RUnlock()
	}
	for p := range dup {
		delete(out, p)
	}
	return out
}

// metadataMismatches lists where a running broker's image of topic
// (partitions partitions) differs from the raft leaders; empty when every
// broker names each partition's raft leader at its term.
func (q *testQuorum) metadataMismatches(topic string, partitions int) []string {
	leaders := q.raftLeaders(topic)
	var out []string
	for p := int32(0); p < int32(partitions); p++ {
		if _, ok := leaders[p]; !ok {
			out = append(out, fmt.Sprintf("%s-%d: no single raft leader among the running brokers", topic, p))
		}
	}
	for i, b := range q.brokers {
		if b == nil {
			continue
		}
		t, ok := b.Topic(topic)
		if !ok {
			out = append(out, fmt.Sprintf("broker %d: no topic %s", i+1, topic))
			continue
		}
		for _, pi := range t.Partitions {
			want, ok := leaders[pi.Partition]
			if ok && (int64(pi.Leader) != want[0] || int64(pi.LeaderEpoch) != want[1]) {
				out = append(out, fmt.Sprintf("broker %d: %s-%d leader %d epoch %d, raft: leader %d term %d",
					i+1, topic, pi.Partition, pi.Leader, pi.LeaderEpoch, want[0], want[1]))
			}
		}
	}
	sort.Strings(out)
	return out
}

// waitMetadataMatchesRaft waits until every running broker's image names
// each partition's raft leader and term. It fails when they still differ
// within after the raft leaders last changed (a partition whose leader
// stopped without handing it off elects a new one only after an
// election timeout: the reports cannot precede it), or after 30 s in all.
// It returns how long the metadata took after the raft leaders settled.
func (q *testQuorum) waitMetadataMatchesRaft(topic string, partitions int, within time.Duration) time.Duration {
	q.t.Helper()
	start := time.Now()
	settled, last := start, q.raftLeaders(topic)
	for {
		bad := q.metadataMismatches(topic, partitions)
		if len(bad) == 0 {
			return time.Since(settled)
		}
		if now := q.raftLeaders(topic); !sameLeaders(now, last) {
			settled, last = time.Now(), now
		}
		if time.Since(settled) > within || time.Since(start) > 30*time.Second {
			if len(bad) > 10 {
				bad = append(bad[:10], fmt.Sprintf("... %d more", len(bad)-10))
			}
			q.t.Fatalf("metadata still differs from the raft leaders %v after they last changed (%v after the wait began):\n%s",
				time.Since(settled).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), joinLines(bad))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sameLeaders(a, b map[int32][2]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, l := range a {
		if b[p] != l {
			return false
		}
	}
	return true
}

// waitFollowing waits (bounded) until every group of topic on broker i
// follows a known leader: a restarted broker's groups are candidates
// until they hear from one, and a handoff to them fails meanwhile.
func (q *testQuorum) waitFollowing(i int, topic string, partitions int) {
	q.t.Helper()
	following := 0
	if !testwait.Until(30*time.Second, func() bool {
		following = 0
		b := q.brokers[i]
		b.groupsMu.RLock()
		defer b.groupsMu.RUnlock()
		for tp, g := range b.groups {
			if _, id := g.raft.LeaderWithID(); tp.Topic == topic && g.raft.State() == raft.Follower && id != "" {
				following++
			}
		}
		return following == partitions
	}) {
		q.t.Fatalf("broker %d follows a leader in %d of %d partitions of %s", i+1, following, partitions, topic)
	}
}

func joinLines(ss []string) string {
	return "  " + strings.Join(ss, "\n  ") + "\n"
}

// moveLeadershipsTo transfers every partition of topic to broker i's
// group and waits (bounded) until broker i leads them all.
func (q *testQuorum) moveLeadershipsTo(i int, topic string, partitions int) {
	q.t.Helper()
	target := q.brokers[i]
	addr := target.mux.Addr()
	deadline := time.Now().Add(30 * time.Second)
	for {
		led := 0
		for j, b := range q.brokers {
			if b == nil {
				continue
			}
			b.groupsMu.RLock()
			var groups []*partitionGroup
			for tp, g := range b.groups {
				if tp.Topic == topic && g.raft.State() == raft.Leader {
					groups = append(groups, g)
				}
			}
			b.groupsMu.RUnlock()
			if j == i {
				led = len(groups)
				continue
			}
			for _, g := range groups {
				// Errors are retried by the next pass.
				g.raft.LeadershipTransferToServer(serverID(target.cfg.NodeID), addr)
			}
		}
		if led == partitions {
			return
		}
		if time.Now().After(deadline) {
			q.t.Fatalf("broker %d leads %d of %d partitions of %s", i+1, led, partitions, topic)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// New leaders reach the metadata whatever happens to the controller
// (issue 15): the controller leads every partition and stops cleanly, so
// it hands each one off while the new leaders' reports are on their way
// to it, and some reach it as it shuts down (it answers "shutting down",
// or never). Round after round, every remaining broker's metadata must
// name the raft leaders within seconds.
func TestLeaderReportsSurviveControllerStop(t *testing.T) {
	if testing.Short() {
		t.Skip("three-broker cluster")
	}
	const topic, partitions, rounds = "handoff", 24, 4
	q := newTestQuorum(t)
	q.controller()
	// The last registration may still be on its way.
	testwait.For(t, 5*time.Second, func() bool { return len(q.brokers[0].Brokers()) == 3 }, "three registered brokers")
	if _, err := q.brokers[0].CreateTopic(context.Background(), CreateTopicRequest{Name: topic, NumPartitions: partitions, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	q.waitMetadataMatchesRaft(topic, partitions, 8*time.Second)
	for round := 1; round <= rounds; round++ {
		ctl := q.controller()
		q.moveLeadershipsTo(ctl, topic, partitions)
		q.waitMetadataMatchesRaft(topic, partitions, 8*time.Second)
		q.brokers[ctl].Close()
		q.brokers[ctl] = nil
		closed := time.Now()
		took := q.waitMetadataMatchesRaft(topic, partitions, 8*time.Second)
		t.Logf("round %d: controller %d stopped while handing off %d leaderships; the metadata matched the raft leaders %v after they settled, %v after Close returned",
			round, ctl+1, partitions, took.Round(time.Millisecond), time.Since(closed).Round(time.Millisecond))
		if err := q.start(ctl); err != nil {
			t.Fatal(err)
		}
		q.waitFollowing(ctl, topic, partitions)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// A leadership the image does not show while no report of it is queued
// (a report lost on the way, whatever lost it) is found by the
// reporter's sweep and reported again. The lost report is simulated by
// publishing an image in which one partition is back at the placeholder
// epoch 0, as if its leader's report had never been applied.
func TestLostLeaderReportSentAgain(t *testing.T) {
	logs := &syncBuffer{}
	cfg := testConfig(t.TempDir())
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	b := startBroker(t, cfg)
	defer b.Close()
	if _, err := b.CreateTopic(context.Background(), CreateTopicRequest{Name: "lost", NumPartitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	t0, _ := b.Topic("lost")
	want := t0.Partitions[1]
	if want.LeaderEpoch <= 0 || want.Leader != 1 {
		t.Fatalf("no elected leader after CreateTopic: %+v", want)
	}

	img := b.img.Load().clone()
	img.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
		nt := *topics["lost"]
		nt.Partitions = append([]PartitionInfo(nil), nt.Partitions...)
		nt.Partitions[1].LeaderEpoch = 0
		topics[nt.Name], byID[nt.ID] = &nt, &nt
	})
	b.img.Store(img)
	start := time.Now()
	var got TopicInfo
	if !testwait.Until(4*leaderSweepInterval+5*time.Second, func() bool {
		got, _ = b.Topic("lost")
		p := got.Partitions[1]
		return p.Leader == want.Leader && p.LeaderEpoch == want.LeaderEpoch
	}) {
		t.Fatalf("the leadership of lost-1 was never reported again: %+v, want %+v", got.Partitions[1], want)
	}
	t.Logf("reported again after %v", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(logs.String(), "still not in the metadata; reporting them again") {
		t.Fatalf("no log line for the report sent again:\n%s", logs.String())
	}
}

// A follower whose heartbeats failed in one term is not left out of the
// ISR in the next. hashicorp/raft reports a follower's heartbeats resuming
// only from the heartbeat goroutine that saw them fail, and that goroutine
// ends with its term: the simulated 50-broker cluster (internal/sim) saw
// a partition's ISR stay short for minutes, under load, after its leader
// lost and regained the leadership.
func TestISRFreshEachTerm(t *testing.T) {
	if testing.Short() {
		t.Skip("three-broker cluster")
	}
	const topic = "isr"
	q := newTestQuorum(t)
	q.controller()
	testwait.For(t, 5*time.Second, func() bool { return len(q.brokers[0].Brokers()) == 3 }, "three registered brokers")
	if _, err := q.brokers[0].CreateTopic(context.Background(), CreateTopicRequest{Name: topic, NumPartitions: 1, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	lead, pi := q.leaderOf(0, topic, 0)
	tp := log.TopicPartition{Topic: topic}
	isrOf := func() []int32 {
		ti, _ := q.brokers[0].Topic(topic)
		return ti.Partitions[0].ISR
	}
	testwait.For(t, 10*time.Second, func() bool { return len(isrOf()) == 3 }, "ISR %v, want all 3 replicas", isrOf())
	// The leader's heartbeats to one follower fail, as raft reports them.
	var follower int32
	for _, n := range pi.Replicas {
		if int(n-1) != lead {
			follower = n
			break
		}
	}
	g := q.brokers[lead].group(tp)
	g.setFailed(serverID(follower), true)
	q.brokers[lead].queueReport(g)
	testwait.For(t, 10*time.Second, func() bool { return !containsNode(isrOf(), follower) }, "ISR %v still holds broker %d", isrOf(), follower)
	// The leadership moves away and back: a new term, in which every
	// heartbeat to the follower succeeds.
	q.moveLeadershipsTo(int(follower-1), topic, 1)
	q.moveLeadershipsTo(lead, topic, 1)
	var back PartitionInfo
	if !testwait.Until(10*time.Second, func() bool {
		ti, _ := q.brokers[0].Topic(topic)
		back = ti.Partitions[0]
		return int(back.Leader-1) == lead && len(back.ISR) == 3
	}) {
		t.Fatalf("after the leadership came back: leader %d, ISR %v; want broker %d and all 3 replicas", back.Leader, back.ISR, lead+1)
	}
}

// An ISR the metadata records differently from what the leader sees is
// reported again by the sweep: the report raft's observation queued is
// dropped when the image it is compared with still waits for an earlier
// report in flight (seen in internal/sim: an ISR short for minutes).
func TestStaleISRReportedAgain(t *testing.T) {
	cfg := testConfig(t.TempDir())
	b := startBroker(t, cfg)
	defer b.Close()
	if _, err := b.CreateTopic(context.Background(), CreateTopicRequest{Name: "isr", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	t0, _ := b.Topic("isr")
	want := t0.Partitions[0]
	if want.LeaderEpoch <= 0 || len(want.ISR) != 1 {
		t.Fatalf("after CreateTopic: %+v", want)
	}
	img := b.img.Load().clone()
	img.withTopics(func(topics map[string]*TopicInfo, byID map[[16]byte]*TopicInfo) {
		nt := *topics["isr"]
		nt.Partitions = append([]PartitionInfo(nil), nt.Partitions...)
		nt.Partitions[0].ISR = nil
		topics[nt.Name], byID[nt.ID] = &nt, &nt
	})
	b.img.Store(img)
	var got PartitionInfo
	if !testwait.Until(4*leaderSweepInterval+5*time.Second, func() bool {
		ti, _ := b.Topic("isr")
		got = ti.Partitions[0]
		return equalNodes(got.ISR, want.ISR) && got.LeaderEpoch == want.LeaderEpoch
	}) {
		t.Fatalf("the ISR of isr-0 was never reported again: %+v, want %+v", got, want)
	}
}
