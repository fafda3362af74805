package groupcoord

import (
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/coord"
	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/replication"
)

// Share groups over a real single-node broker, on a fake clock: the
// shard's ticks and the members' session deadlines move only when the
// test advances it.

type shareNode struct {
	*testNode
	clk  *coord.Fake
	mu   sync.Mutex
	gone []string // ShareMemberGone calls, "group/member"
}

func openShareNode(t *testing.T, dir string, opts ...func(*Config)) *shareNode {
	t.Helper()
	n := &shareNode{testNode: openNode(t, dir), clk: coord.NewFake(time.Now())}
	n.coord.Close()
	cfg := Config{
		NumPartitions: 1, TickInterval: time.Second, Logger: quiet(), Clock: n.clk,
		ShareSessionTimeout: 10 * time.Second, ShareHeartbeatInterval: 2 * time.Second, ShareMaxSize: 4,
		ShareMemberGone: func(g, m string) {
			n.mu.Lock()
			n.gone = append(n.gone, g+"/"+m)
			n.mu.Unlock()
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	n.coord = New(cfg, n.broker)
	findCoordinator(t, n.testNode, "sg")
	if _, ok := n.broker.Topic("t"); !ok {
		if _, err := n.broker.CreateTopic(ctx(t), replication.CreateTopicRequest{Name: "t", NumPartitions: 3, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (n *shareNode) hb(t *testing.T, member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version, req.GroupID, req.MemberID, req.MemberEpoch = 1, "sg", member, epoch
	if topics != nil {
		req.SubscribedTopicNames = topics
	}
	resp, err := n.coord.ShareGroupHeartbeat(ctx(t), req, "cli-"+member, "/127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func partitionsOf(r *kmsg.ShareGroupHeartbeatResponse) []int32 {
	if r.Assignment == nil {
		return nil
	}
	var out []int32
	for _, tp := range r.Assignment.TopicPartitions {
		out = append(out, tp.Partitions...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (n *shareNode) describe(t *testing.T) kmsg.ShareGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.Version, req.GroupIDs = 1, []string{"sg"}
	resp, err := n.coord.ShareGroupDescribe(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Groups[0]
}

func eqParts(a []int32, b ...int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestShareGroupMembership(t *testing.T) {
	dir := t.TempDir()
	n := openShareNode(t, dir)

	r := n.hb(t, "m1", 0, "t")
	if r.ErrorCode != 0 || r.MemberEpoch != 1 || r.HeartbeatIntervalMillis != 2000 || !eqParts(partitionsOf(r), 0, 1, 2) {
		t.Fatalf("m1 join: %+v %v", r, partitionsOf(r))
	}
	r = n.hb(t, "m2", 0, "t")
	if r.ErrorCode != 0 || r.MemberEpoch != 2 || !eqParts(partitionsOf(r), 2) {
		t.Fatalf("m2 join: %+v %v", r, partitionsOf(r))
	}
	// m1 learns the new epoch and its smaller share at its next heartbeat
	// (it keeps what it had, less what m2 took).
	r = n.hb(t, "m1", 1)
	if r.ErrorCode != 0 || r.MemberEpoch != 2 || !eqParts(partitionsOf(r), 0, 1) {
		t.Fatalf("m1 at epoch 2: %+v %v", r, partitionsOf(r))
	}
	// Nothing changed: no assignment in the answer.
	if r = n.hb(t, "m1", 2); r.ErrorCode != 0 || r.Assignment != nil {
		t.Fatalf("m1 steady: %+v", r)
	}
	// The epoch before the current one is accepted (a lost response),
	// others are fenced.
	if r = n.hb(t, "m1", 1); r.ErrorCode != 0 {
		t.Fatalf("m1 previous epoch: %+v", r)
	}
	if r = n.hb(t, "m1", 7); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("m1 wrong epoch: %+v", r)
	}
	if r = n.hb(t, "nobody", 3); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %+v", r)
	}
	if r = n.hb(t, "m9", 0); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("join without topics: %+v", r)
	}

	// More members than partitions: partitions are shared.
	for _, m := range []string{"m3", "m4"} {
		if r = n.hb(t, m, 0, "t"); r.ErrorCode != 0 {
			t.Fatalf("%s join: %+v", m, r)
		}
	}
	if r = n.hb(t, "m5", 0, "t"); r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("5th member of at most 4: %+v", r)
	}
	owners := map[int32]int{}
	for _, m := range []string{"m1", "m2", "m3", "m4"} {
		r = n.hb(t, m, 0, "t") // a rejoin with the full request returns the assignment
		if r.ErrorCode != 0 || len(partitionsOf(r)) != 1 {
			t.Fatalf("%s: %+v %v", m, r, partitionsOf(r))
		}
		owners[partitionsOf(r)[0]]++
	}
	if owners[0]+owners[1]+owners[2] != 4 || owners[0] == 0 || owners[1] == 0 || owners[2] == 0 {
		t.Fatalf("4 members over 3 partitions: %v", owners)
	}
	d := n.describe(t)
	if d.ErrorCode != 0 || d.GroupState != "Stable" || len(d.Members) != 4 || d.Assignor != "simple" ||
		d.Members[0].MemberID != "m1" || d.Members[0].ClientID != "cli-m1" || d.Members[0].Assignment.TopicPartitions[0].Topic != "t" {
		t.Fatalf("describe: %+v", d)
	}
	reg := prometheus.NewRegistry()
	RegisterMetrics(reg, n.coord)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kafka_consumergroup_members Members of a group this broker coordinates.
# TYPE kafka_consumergroup_members gauge
kafka_consumergroup_members{group="sg"} 4
`), "kafka_consumergroup_members"); err != nil {
		t.Errorf("share group in the metrics: %v", err)
	}
	assigned, ok, code, err := n.coord.ShareMember(ctx(t), "sg", "m2")
	if err != nil || code != 0 || !ok || len(assigned) != 1 {
		t.Fatalf("ShareMember m2: %v %v %d %v", assigned, ok, code, err)
	}
	if _, ok, _, _ := n.coord.ShareMember(ctx(t), "sg", "m5"); ok {
		t.Fatal("ShareMember of a refused member")
	}

	// Types: a share group is not a classic or consumer group.
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Version, jr.Group, jr.ProtocolType, jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = 9, "sg", "consumer", 10000, 10000
	if resp, err := n.coord.JoinGroup(ctx(t), jr, "c", "h"); err != nil || resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("JoinGroup on a share group: %v %+v", err, resp)
	}
	lr := kmsg.NewPtrListGroupsRequest()
	lr.Version, lr.TypesFilter = 5, []string{"share"}
	if resp, err := n.coord.ListGroups(ctx(t), lr); err != nil || len(resp.Groups) != 1 || resp.Groups[0].GroupType != "share" || resp.Groups[0].GroupState != "Stable" {
		t.Fatalf("ListGroups share: %v %+v", err, resp)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"sg"}
	if resp, err := n.coord.DeleteGroups(ctx(t), del); err != nil || resp.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("DeleteGroups with members: %v %+v", err, resp)
	}

	// A leave, then a restart: the log has the rest.
	if r = n.hb(t, "m4", -1); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("m4 leave: %+v", r)
	}
	before := n.describe(t)
	n.close()
	n = openShareNode(t, dir)
	after := n.describe(t)
	if after.GroupEpoch != before.GroupEpoch || after.AssignmentEpoch != before.AssignmentEpoch || len(after.Members) != 3 {
		t.Fatalf("after restart: %+v\nbefore: %+v", after, before)
	}
	for i := range after.Members {
		if a, b := after.Members[i], before.Members[i]; a.MemberID != b.MemberID || a.MemberEpoch != b.MemberEpoch ||
			len(a.Assignment.TopicPartitions) != len(b.Assignment.TopicPartitions) {
			t.Fatalf("member %d after restart: %+v, before %+v", i, a, b)
		}
	}

	// Sessions: m1 keeps heartbeating, the others expire on the fake clock.
	waitTicker(t, n.clk)
	for i := 0; i < 12; i++ {
		n.clk.Advance(time.Second)
		if r = n.hb(t, "m1", 0, "t"); r.ErrorCode != 0 {
			t.Fatalf("m1 keeping its session: %+v", r)
		}
	}
	if !testwait.Until(10*time.Second, func() bool {
		if len(n.describe(t).Members) == 1 {
			return true
		}
		n.clk.Advance(time.Second)
		return false
	}) {
		t.Fatalf("sessions never expired: %+v", n.describe(t))
	}
	n.mu.Lock()
	gone := append([]string(nil), n.gone...)
	n.mu.Unlock()
	sort.Strings(gone)
	if len(gone) != 2 || gone[0] != "sg/m2" || gone[1] != "sg/m3" {
		t.Fatalf("ShareMemberGone: %v", gone)
	}
	if r = n.hb(t, "m1", 0, "t"); !eqParts(partitionsOf(r), 0, 1, 2) {
		t.Fatalf("m1 alone: %+v %v", r, partitionsOf(r))
	}
	if r = n.hb(t, "m1", -1); r.ErrorCode != 0 {
		t.Fatalf("m1 leave: %+v", r)
	}
	if d := n.describe(t); d.GroupState != "Empty" {
		t.Fatalf("empty group: %+v", d)
	}
	if resp, err := n.coord.DeleteGroups(ctx(t), del); err != nil || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("DeleteGroups of the empty group: %v %+v", err, resp)
	}
	if d := n.describe(t); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("deleted group: %+v", d)
	}
	n.close()
	n = openShareNode(t, dir)
	if d := n.describe(t); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("deleted group after restart: %+v", d)
	}
}

// TestShareGroupTimeouts: a group's own session timeout and heartbeat
// interval (its group configs) override the broker's.
func TestShareGroupTimeouts(t *testing.T) {
	n := openShareNode(t, t.TempDir(), func(c *Config) {
		c.ShareGroupTimeouts = func(g string) (time.Duration, time.Duration) {
			if g == "sg" {
				return 3 * time.Second, 700 * time.Millisecond
			}
			return 0, 0
		}
	})
	if r := n.hb(t, "m1", 0, "t"); r.ErrorCode != 0 || r.HeartbeatIntervalMillis != 700 {
		t.Fatalf("join: %+v", r)
	}
	waitTicker(t, n.clk)
	n.clk.Advance(2 * time.Second)
	if d := n.describe(t); len(d.Members) != 1 {
		t.Fatalf("expired before its 3 s session: %+v", d)
	}
	if !testwait.Until(10*time.Second, func() bool {
		if len(n.describe(t).Members) == 0 {
			return true
		}
		n.clk.Advance(time.Second)
		return false
	}) {
		t.Fatalf("never expired after its 3 s session: %+v", n.describe(t))
	}
}

// TestShareTopicAssignment: every (members, partitions) shape gets
// max(S, P) distinct pairs balanced on both sides, and a balanced previous
// assignment of the same shape is kept as it is; a member joining keeps
// the others' pairs where the balance allows.
func TestShareTopicAssignment(t *testing.T) {
	check := func(members []string, P int, got map[string][]int32) {
		t.Helper()
		S, T := len(members), max(len(members), P)
		pc := make([]int, P)
		total := 0
		for _, m := range members {
			seen := map[int32]bool{}
			if n := len(got[m]); n != T/S && n != T/S+1 {
				t.Fatalf("S=%d P=%d: %s has %d pairs: %v", S, P, m, n, got)
			}
			for _, p := range got[m] {
				if seen[p] || p < 0 || int(p) >= P {
					t.Fatalf("S=%d P=%d: bad pair %s/%d: %v", S, P, m, p, got)
				}
				seen[p] = true
				pc[p]++
				total++
			}
		}
		for p, n := range pc {
			if n != T/P && n != T/P+1 {
				t.Fatalf("S=%d P=%d: partition %d has %d members: %v", S, P, p, n, got)
			}
		}
		if total != T {
			t.Fatalf("S=%d P=%d: %d pairs, want %d: %v", S, P, total, T, got)
		}
	}
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "m" + string(rune('a'+i))
		}
		return out
	}
	for S := 1; S <= 9; S++ {
		for P := 1; P <= 9; P++ {
			ms := names(S)
			first := shareTopicAssignment(ms, P, nil)
			check(ms, P, first)
			again := shareTopicAssignment(ms, P, first)
			for _, m := range ms {
				if !eqParts(again[m], first[m]...) {
					t.Fatalf("S=%d P=%d: balanced input moved: %v -> %v", S, P, first, again)
				}
			}
			// One more member: the others lose at most what the new
			// balance takes from them, never gain a partition they
			// did not have while losing one.
			more := append(ms[:S:S], "mz")
			grown := shareTopicAssignment(more, P, first)
			check(more, P, grown)
			kept := 0
			for _, m := range ms {
				for _, p := range grown[m] {
					for _, q := range first[m] {
						if p == q {
							kept++
						}
					}
				}
			}
			if want := max(S, P) - max(S+1, P)/(S+1) - 1; kept < want {
				t.Fatalf("S=%d P=%d: only %d pairs kept (want >= %d): %v -> %v", S, P, kept, want, first, grown)
			}
		}
	}
}

// waitTicker waits (bounded) until the loaded shard's ticker is armed.
func waitTicker(t *testing.T, clk *coord.Fake) {
	t.Helper()
	testwait.For(t, 10*time.Second, func() bool { return clk.Waiters() > 0 }, "no ticker armed")
}

// FuzzReplayShare: any share-group key/value replays without a panic.
//
//	go test ./groupcoord -run '^$' -fuzz FuzzReplayShare -fuzztime 10s
func FuzzReplayShare(f *testing.F) {
	rack := "r"
	m := &smember{id: "m", rackID: &rack, clientID: "c", clientHost: "h", subscribed: []string{"t"}, epoch: 2, prevEpoch: 1, assigned: assignment{{1}: {0, 1}}}
	g := &sgroup{id: "g", epoch: 2, metaHash: 7}
	for _, r := range []record{
		{Key: sgMemberKey("g", "m"), Value: sgMemberValue(m)},
		{Key: cgKey(keySGMetadata, "g", nil), Value: sgMetadataValue(g)},
		{Key: cgKey(keySGTargetMetadata, "g", nil), Value: sgTargetMetadataValue(2, 1)},
		{Key: cgKey(keySGTargetMember, "g", &m.id), Value: cgTargetValue(m.assigned)},
		{Key: cgKey(keySGCurrent, "g", &m.id), Value: sgCurrentValue(m)},
		{Key: cgKey(keySGCurrent, "g", &m.id)},
	} {
		f.Add(r.Key, r.Value)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		s := newShard(&Coordinator{cfg: Config{Logger: quiet()}.withDefaults()}, 0, 0)
		now := time.Unix(1700000000, 0)
		_ = s.replay(decodedRecord{Key: key, Value: value, Control: -1}, now)
		var e effects
		s.shareTick(&e, now.Add(time.Hour))
	})
}
