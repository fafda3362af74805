package groupcoord

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication"
)

// These tests run the coordinator over a real single-node broker on disk
// (log manager + replication.Broker in t.TempDir()), calling its methods as
// the protocol handlers do; the wire is covered by the protocol and e2e
// tests.

type testNode struct {
	dir    string
	broker *replication.Broker
	coord  *Coordinator
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openNode(t *testing.T, dir string) *testNode { return openNodeTB(t, dir) }

func openNodeTB(t testing.TB, dir string) *testNode {
	t.Helper()
	m, err := log.OpenManager(log.ManagerOptions{Dir: dir, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := replication.NewBroker(replication.BrokerConfig{
		NodeID: 1, AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092, DataDir: dir,
		NumPartitions: 1, DefaultReplicationFactor: 1, DeleteTopicEnable: true, Logger: quiet(),
	}, m)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	n := &testNode{dir: dir, broker: b}
	n.coord = New(Config{NumPartitions: 3, InitialRebalanceDelay: -1, TickInterval: 10 * time.Millisecond, Logger: quiet()}, b)
	t.Cleanup(n.close)
	return n
}

func (n *testNode) close() {
	if n.coord != nil {
		n.coord.Close()
		n.broker.Close()
		n.coord = nil
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func strp(s string) *string { return &s }

// joinAndSync makes a one-member group and returns the member ID.
func joinAndSync(t *testing.T, n *testNode, group string) string {
	t.Helper()
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Version, jr.Group, jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = 9, group, 10000, 10000
	jr.ProtocolType = "consumer"
	meta := kmsg.ConsumerMemberMetadata{Topics: []string{"t"}}
	jr.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	resp, err := n.coord.JoinGroup(ctx(t), jr, "cli", "/127.0.0.1")
	if err != nil || resp.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %v %+v", err, resp)
	}
	jr.MemberID = resp.MemberID
	resp, err = n.coord.JoinGroup(ctx(t), jr, "cli", "/127.0.0.1")
	if err != nil || resp.ErrorCode != 0 || resp.Generation != 1 || resp.LeaderID != jr.MemberID {
		t.Fatalf("second join: %v %+v", err, resp)
	}
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Version, sr.Group, sr.Generation, sr.MemberID = 5, group, 1, jr.MemberID
	sr.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte("A")}}
	sresp, err := n.coord.SyncGroup(ctx(t), sr)
	if err != nil || sresp.ErrorCode != 0 || string(sresp.MemberAssignment) != "A" {
		t.Fatalf("sync: %v %+v", err, sresp)
	}
	return jr.MemberID
}

func commit(t *testing.T, n *testNode, group, member string, gen int32, offsets map[int32]int64) *kmsg.OffsetCommitResponse {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.MemberID, req.Generation = 9, group, member, gen
	rt := kmsg.OffsetCommitRequestTopic{Topic: "t"}
	for p, o := range offsets {
		rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: o, LeaderEpoch: -1, Metadata: strp("m")})
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
	resp, err := n.coord.OffsetCommit(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func fetch(t *testing.T, n *testNode, group string) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 9
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 1}}}}}
	resp, err := n.coord.OffsetFetch(ctx(t), req)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("fetch: %v %+v", err, resp)
	}
	out := map[int32]int64{}
	for _, rt := range resp.Groups[0].Topics {
		for _, p := range rt.Partitions {
			out[p.Partition] = p.Offset
		}
	}
	return out
}

func describe(t *testing.T, n *testNode, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version, req.Groups = 5, []string{group}
	resp, err := n.coord.DescribeGroups(ctx(t), req)
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("describe: %v %+v", err, resp)
	}
	return resp.Groups[0]
}

func findCoordinator(t *testing.T, n *testNode, keys ...string) *kmsg.FindCoordinatorResponse {
	return findCoordinatorTB(t, n, keys...)
}

func findCoordinatorTB(t testing.TB, n *testNode, keys ...string) *kmsg.FindCoordinatorResponse {
	t.Helper()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKeys = 4, keys
	return n.coord.FindCoordinator(ctx(t), req)
}

// TestStateSurvivesRestart: commits, membership and deletions are in
// __consumer_offsets, and a new coordinator over the reopened broker
// rebuilds them by replay.
func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	// Before the offsets topic exists, group requests are NOT_COORDINATOR.
	if r := describe(t, n, "g1"); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("describe before topic: %+v", r)
	}
	fc := findCoordinator(t, n, "g1", "g2", "")
	if len(fc.Coordinators) != 3 || fc.Coordinators[0].NodeID != 1 || fc.Coordinators[0].ErrorCode != 0 ||
		fc.Coordinators[2].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("find coordinator: %+v", fc)
	}
	if ti, ok := n.broker.Topic(OffsetsTopic); !ok || len(ti.Partitions) != 3 || !ti.Internal || ti.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("offsets topic: %+v", ti)
	}
	if _, err := n.broker.CreateTopic(ctx(t), replication.CreateTopicRequest{Name: "t", NumPartitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	member := joinAndSync(t, n, "g1")
	resp := commit(t, n, "g1", member, 1, map[int32]int64{0: 5, 1: 7})
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("commit: %+v", resp)
		}
	}
	if r := commit(t, n, "g2", "", -1, map[int32]int64{0: 42}); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("simple commit: %+v", r)
	}
	if r := commit(t, n, "g3", "m", 3, map[int32]int64{0: 1}); r.Topics[0].Partitions[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("commit to unknown group with a generation: %+v", r)
	}
	n.close()

	n = openNode(t, dir)
	if got := fetch(t, n, "g1"); got[0] != 5 || got[1] != 7 {
		t.Fatalf("g1 offsets after restart: %v", got)
	}
	if got := fetch(t, n, "g2"); got[0] != 42 || got[1] != -1 {
		t.Fatalf("g2 offsets after restart: %v", got)
	}
	d := describe(t, n, "g1")
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].MemberID != member || string(d.Members[0].MemberAssignment) != "A" {
		t.Fatalf("g1 after restart: %+v", d)
	}
	lr := kmsg.NewPtrListGroupsRequest()
	lr.Version, lr.StatesFilter = 5, []string{"stable"}
	list, err := n.coord.ListGroups(ctx(t), lr)
	if err != nil || len(list.Groups) != 1 || list.Groups[0].Group != "g1" {
		t.Fatalf("list stable: %v %+v", err, list)
	}
	lr.StatesFilter, lr.TypesFilter = nil, []string{"consumer"}
	if list, _ := n.coord.ListGroups(ctx(t), lr); len(list.Groups) != 0 {
		t.Fatalf("list consumer type: %+v", list)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"g1", "g2", "nope"}
	dr, err := n.coord.DeleteGroups(ctx(t), del)
	if err != nil || dr.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code || dr.Groups[1].ErrorCode != 0 || dr.Groups[2].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete: %v %+v", err, dr)
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g1"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	odr, err := n.coord.OffsetDelete(ctx(t), od)
	if err != nil || odr.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code {
		t.Fatalf("offset delete while subscribed: %v %+v", err, odr)
	}
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version, lv.Group = 5, "g1"
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member}}
	if lr, err := n.coord.LeaveGroup(ctx(t), lv); err != nil || lr.Members[0].ErrorCode != 0 {
		t.Fatalf("leave: %v %+v", err, lr)
	}
	if odr, _ := n.coord.OffsetDelete(ctx(t), od); odr.ErrorCode != 0 || odr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", odr)
	}
	n.close()

	n = openNode(t, dir)
	if got := fetch(t, n, "g1"); got[0] != -1 || got[1] != 7 {
		t.Fatalf("g1 after offset delete and restart: %v", got)
	}
	if got := fetch(t, n, "g2"); got[0] != -1 {
		t.Fatalf("g2 after delete and restart: %v", got)
	}
	if d := describe(t, n, "g1"); d.State != "Empty" {
		t.Fatalf("g1 after leave and restart: %+v", d)
	}
}

// TestSessionExpiresOnTicks: the shard's ticker drives session timeouts.
func TestSessionExpiresOnTicks(t *testing.T) {
	n := openNode(t, t.TempDir())
	clock := time.Unix(1700000000, 0)
	var now = func() time.Time { return clock }
	n.coord.Close()
	n.coord = New(Config{NumPartitions: 1, InitialRebalanceDelay: -1, TickInterval: 5 * time.Millisecond, Logger: quiet(), Now: func() time.Time { return now() }}, n.broker)
	findCoordinator(t, n, "g")
	if _, err := n.broker.CreateTopic(ctx(t), replication.CreateTopicRequest{Name: "t", NumPartitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	joinAndSync(t, n, "g")
	// The clock variable is read on the shard goroutine; hand the new
	// time over through a call rather than a racy write.
	_, _, _ = n.coord.do(ctx(t), "g", func(s *shard, e *effects, rid uint64) {
		clock = clock.Add(11 * time.Second)
		e.reply(rid, nil)
	})
	if !testwait.Until(5*time.Second, func() bool { return describe(t, n, "g").State == "Empty" }) {
		t.Fatalf("member never expired: %+v", describe(t, n, "g"))
	}
}

// TestOffsetsExpire: an empty group's offsets go after the retention, as
// tombstones in the log (gone after a restart too), and the group with them.
func TestOffsetsExpire(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	n.coord.Close()
	n.coord = New(Config{NumPartitions: 1, TickInterval: 5 * time.Millisecond, Logger: quiet(),
		OffsetsRetention: 200 * time.Millisecond, OffsetsRetentionCheckInterval: 10 * time.Millisecond}, n.broker)
	findCoordinator(t, n, "g")
	if _, err := n.broker.CreateTopic(ctx(t), replication.CreateTopicRequest{Name: "t", NumPartitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	commit(t, n, "g", "", -1, map[int32]int64{0: 3})
	if got := fetch(t, n, "g"); got[0] != 3 {
		t.Fatalf("before expiry: %v", got)
	}
	testwait.For(t, 5*time.Second, func() bool { return fetch(t, n, "g")[0] == -1 }, "offset never expired")
	if d := describe(t, n, "g"); d.State != "Dead" {
		t.Fatalf("group after its last offset expired: %+v", d)
	}
	n.close()
	n = openNode(t, dir)
	findCoordinator(t, n, "g")
	if got := fetch(t, n, "g"); got[0] != -1 {
		t.Fatalf("expired offset back after restart: %v", got)
	}
}

// A group ID is either classic or KIP-848: a classic join to a consumer
// group with members is INCONSISTENT_GROUP_PROTOCOL, a heartbeat to a
// classic group with members GROUP_ID_NOT_FOUND; an empty group of one
// kind can be taken over by the other, keeping its offsets.
func TestGroupKindsExclusive(t *testing.T) {
	n := openNode(t, t.TempDir())
	findCoordinator(t, n, "cg")
	if _, err := n.broker.CreateTopic(ctx(t), replication.CreateTopicRequest{Name: "t", NumPartitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Version, hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = 1, "cg", "m1", 30000
	hb.SubscribedTopicNames = []string{"t"}
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	r, err := n.coord.ConsumerGroupHeartbeat(ctx(t), hb, "c", "/h")
	if err != nil || r.ErrorCode != 0 || r.MemberEpoch != 1 || r.Assignment == nil || len(r.Assignment.Topics) != 1 || len(r.Assignment.Topics[0].Partitions) != 2 {
		t.Fatalf("848 join: %v %+v", err, r)
	}
	if c := commit(t, n, "cg", "m1", 1, map[int32]int64{0: 4}); c.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("848 commit: %+v", c)
	}
	if c := commit(t, n, "cg", "m1", 7, map[int32]int64{0: 4}); c.Topics[0].Partitions[0].ErrorCode != kerr.StaleMemberEpoch.Code {
		t.Fatalf("848 commit at a wrong epoch: %+v", c)
	}
	if c := commit(t, n, "cg", "", -1, map[int32]int64{0: 4}); c.Topics[0].Partitions[0].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("admin commit to a live 848 group: %+v", c)
	}
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Version, jr.Group, jr.SessionTimeoutMillis, jr.ProtocolType = 9, "cg", 10000, "consumer"
	jr.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if j, _ := n.coord.JoinGroup(ctx(t), jr, "c", "/h"); j.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join to a live 848 group: %+v", j)
	}
	cd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cd.Groups = []string{"cg", "nope"}
	d, err := n.coord.ConsumerGroupDescribe(ctx(t), cd)
	if err != nil || d.Groups[0].ErrorCode != 0 || d.Groups[0].State != "Stable" || len(d.Groups[0].Members) != 1 ||
		d.Groups[0].Members[0].Assignment.TopicPartitions[0].Topic != "t" || d.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe: %v %+v", err, d)
	}
	hb.MemberEpoch = -1
	if r, _ := n.coord.ConsumerGroupHeartbeat(ctx(t), hb, "c", "/h"); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("848 leave: %+v", r)
	}
	// Now empty: a classic member takes it over; the offset stays.
	j, _ := n.coord.JoinGroup(ctx(t), jr, "c", "/h")
	if j.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("classic join to an empty 848 group: %+v", j)
	}
	jr.MemberID = j.MemberID
	if j, _ = n.coord.JoinGroup(ctx(t), jr, "c", "/h"); j.ErrorCode != 0 {
		t.Fatalf("classic rejoin: %+v", j)
	}
	if got := fetch(t, n, "cg"); got[0] != 4 {
		t.Fatalf("offsets after the takeover: %v", got)
	}
	hb.MemberEpoch, hb.MemberID = 0, "m2"
	if r, _ := n.coord.ConsumerGroupHeartbeat(ctx(t), hb, "c", "/h"); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("848 heartbeat to a live classic group: %+v", r)
	}
	lr := kmsg.NewPtrListGroupsRequest()
	lr.Version = 5
	if l, _ := n.coord.ListGroups(ctx(t), lr); len(l.Groups) != 1 || l.Groups[0].GroupType != "classic" {
		t.Fatalf("list after the takeover: %+v", l)
	}
}

// A partition of the offsets topic whose first leader is not recorded yet
// (the placeholder at epoch 0) gets no shard: one started there would be
// replaced at the elected epoch, losing the members it held in memory.
func TestNoShardAtThePlaceholderEpoch(t *testing.T) {
	n := openNode(t, t.TempDir())
	if s, code := n.coord.shardFor(replication.PartitionInfo{Partition: 0, Leader: 1, LeaderEpoch: 0}); s != nil || code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("shard at the placeholder epoch: %v, code %d; want none, COORDINATOR_LOAD_IN_PROGRESS", s, code)
	}
	if s, code := n.coord.shardFor(replication.PartitionInfo{Partition: 0, Leader: 1, LeaderEpoch: 1}); s == nil || code != 0 {
		t.Fatalf("shard at an elected epoch: %v, code %d", s, code)
	}
}
