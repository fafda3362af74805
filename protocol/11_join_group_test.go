package protocol

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/groupcoord"
	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/replication"
)

// newGroupCluster is newCluster with a group coordinator tuned for tests:
// few offsets partitions, no initial rebalance delay.
func newGroupCluster(t testing.TB) *testCluster {
	t.Helper()
	var b *replication.Broker
	cfg := Config{Groups: groupcoord.Config{NumPartitions: 4, InitialRebalanceDelay: -1, TickInterval: 20 * time.Millisecond,
		ConsumerHeartbeatInterval: 100 * time.Millisecond}}
	s, addr := startServerWith(t, cfg, func(p int32) *replication.Broker {
		b = testBroker(t, func(c *replication.BrokerConfig) { c.AdvertisedPort = p })
		return b
	})
	return &testCluster{t: t, b: b, s: s, addr: addr, broker: b}
}

func produceRecords(t *testing.T, c *testCluster, topic string, n int) {
	t.Helper()
	cl := c.client(kgo.DefaultProduceTopic(topic))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < n; i++ {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// consumeWhileProducing produces total records into topic over about a
// second while consumers of group join and leave (six in all, at most three
// at once); it waits until every record was consumed and returns how many
// were delivered more than once (redelivered from an uncommitted window
// after a rebalance).
func consumeWhileProducing(t *testing.T, c *testCluster, group, topic string, total int, opts ...kgo.Opt) int {
	t.Helper()
	type key struct {
		p int32
		o int64
	}
	var mu sync.Mutex
	seen := map[key]int{}
	done := make(chan struct{})
	var closeOnce sync.Once
	consumer := func(stop <-chan struct{}) {
		cl := c.client(append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(6 * time.Second),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)}, opts...)...)
		defer func() {
			// What was polled is committed before leaving, as a
			// well-behaved consumer does on shutdown.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Logf("final commit: %v", err)
			}
			cl.Close()
		}()
		for {
			select {
			case <-done:
				return
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[key{r.Partition, r.Offset}]++
				if len(seen) == total {
					closeOnce.Do(func() { close(done) })
				}
				mu.Unlock()
			})
		}
	}
	var wg sync.WaitGroup
	prod := c.client(kgo.DefaultProduceTopic(topic))
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < total; i++ {
			prod.Produce(context.Background(), &kgo.Record{Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
			if i%(total/10) == 0 {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if err := prod.Flush(context.Background()); err != nil {
			t.Errorf("flush: %v", err)
		}
	}()
	// Six consumers: each joins 250ms after the previous, and each but the
	// last three leaves 750ms after joining.
	for i := 0; i < 6; i++ {
		stop := make(chan struct{})
		wg.Add(1)
		go func() { defer wg.Done(); consumer(stop) }()
		if i < 3 {
			time.AfterFunc(750*time.Millisecond, func() { close(stop) })
		}
		time.Sleep(250 * time.Millisecond)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		closeOnce.Do(func() { close(done) })
		wg.Wait()
		t.Fatalf("consumed %d of %d records", n, total)
	}
	wg.Wait()
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	return dups
}

// Consumers in one group share the partitions and, between them, read
// every record while members come and go, with eager (range),
// cooperative-sticky and KIP-848 (server-side uniform and range)
// rebalancing; afterwards the group's committed offsets reach the end.
func TestGroupConsumersReadEverything(t *testing.T) {
	for _, tc := range []struct {
		name, groupType string
		opts            []kgo.Opt
	}{
		{"range", "classic", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}},
		{"cooperative-sticky", "classic", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}},
		{"kip848-uniform", "consumer", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer()}},
		{"kip848-range", "consumer", []kgo.Opt{kgo.Balancers(kgo.RangeBalancer()), kgo.ServerSideBalancer()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newGroupCluster(t)
			c.createTopic("t", 6)
			dups := consumeWhileProducing(t, c, "g", "t", 5000, tc.opts...)
			t.Logf("%s: 5000 records, %d duplicate deliveries", tc.name, dups)
			adm := c.admin()
			listed, err := adm.ListGroupsByType(testCtx(t), []string{tc.groupType})
			if err != nil || len(listed) != 1 {
				t.Fatalf("list %s groups: %v %+v", tc.groupType, err, listed)
			}
			var sum int64
			if !testwait.Until(10*time.Second, func() bool {
				var off kadm.OffsetResponses
				off, err = adm.FetchOffsets(testCtx(t), "g")
				sum = 0
				if err == nil {
					off.Each(func(o kadm.OffsetResponse) { sum += o.At })
				}
				return sum == 5000
			}) {
				t.Fatalf("committed offsets sum to %d, not 5000 (%v)", sum, err)
			}
		})
	}
}

// kadm's view of a group: list, describe with members, commit/fetch by an
// admin (simple commit), delete.
func TestGroupAdmin(t *testing.T) {
	c := newGroupCluster(t)
	c.createTopic("t", 2)
	produceRecords(t, c, "t", 10)
	adm := c.admin()
	ctx := testCtx(t)
	os := kadm.Offsets{}
	os.AddOffset("t", 0, 3, -1)
	os.AddOffset("t", 1, 4, -1)
	if r, err := adm.CommitOffsets(ctx, "admin-g", os); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	f, err := adm.FetchOffsets(ctx, "admin-g")
	if err != nil || f.Error() != nil {
		t.Fatal(err, f.Error())
	}
	if o, _ := f.Lookup("t", 1); o.At != 4 {
		t.Fatalf("fetched %+v", f)
	}
	cl := c.client(kgo.ConsumerGroup("live"), kgo.ConsumeTopics("t"), kgo.ClientID("live-client"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n < 10; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no records")
		}
		n += fs.NumRecords()
	}
	d, err := adm.DescribeGroups(ctx, "live")
	if err != nil || d["live"].Err != nil || d["live"].State != "Stable" || len(d["live"].Members) != 1 ||
		d["live"].Members[0].ClientID != "live-client" || d["live"].Members[0].ClientHost != "/127.0.0.1" {
		t.Fatalf("describe: %v %+v", err, d)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil || len(listed) != 2 {
		t.Fatalf("list: %v %+v", err, listed)
	}
	if r, err := adm.DeleteGroups(ctx, "live"); err != nil || !errorIs(r["live"].Err, kerr.NonEmptyGroup) {
		t.Fatalf("delete live group: %v %+v", err, r)
	}
	cl.Close()
	if r, err := adm.DeleteGroups(ctx, "admin-g"); err != nil || r["admin-g"].Err != nil {
		t.Fatalf("delete: %v %+v", err, r)
	}
	if f, _ := adm.FetchOffsets(ctx, "admin-g"); len(f) != 0 {
		if o, ok := f.Lookup("t", 1); ok && o.At >= 0 {
			t.Fatalf("offsets after delete: %+v", f)
		}
	}
}

func errorIs(err error, want *kerr.Error) bool { return err == want }

// FindCoordinator at its oldest and newest versions, batched from v4.
func TestFindCoordinatorVersions(t *testing.T) {
	c := newGroupCluster(t)
	rc := dialRaw(t, c.addr)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKey = 0, "g"
	resp := rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if resp.ErrorCode != 0 || resp.NodeID != 1 || resp.Port != c.broker.Brokers()[0].Port {
		t.Fatalf("v0: %+v", resp)
	}
	req = kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKeys = 6, []string{"a", "b"}
	resp = rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 2 || resp.Coordinators[1].Key != "b" || resp.Coordinators[1].ErrorCode != 0 {
		t.Fatalf("v6: %+v", resp)
	}
	req.CoordinatorType = 1 // transactions: __transaction_state's leader
	resp = rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if resp.Coordinators[0].ErrorCode != 0 || resp.Coordinators[0].NodeID != 1 {
		t.Fatalf("txn key: %+v", resp)
	}
	req.CoordinatorType = 2 // share groups: no coordinator yet
	resp = rc.roundTrip(req).(*kmsg.FindCoordinatorResponse)
	if resp.Coordinators[0].ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("share key: %+v", resp)
	}
}

// The oldest versions (Kafka 2.1's minimums, v0): a join without KIP-394's
// member-ID round trip, sync, an OffsetCommit v0 and OffsetFetch v0/v1.
func TestGroupOldestVersions(t *testing.T) {
	c := newGroupCluster(t)
	c.createTopic("t", 1)
	rc := dialRaw(t, c.addr)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "old"
	if r := rc.roundTrip(fc).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 {
		t.Fatalf("find: %+v", r)
	}
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Version, jr.Group, jr.SessionTimeoutMillis, jr.ProtocolType = 0, "old", 10000, "consumer"
	jr.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0}}}
	var join *kmsg.JoinGroupResponse
	testwait.Until(time.Second, func() bool { // the first request may find the partition still loading
		join = rc.roundTrip(jr).(*kmsg.JoinGroupResponse)
		return join.ErrorCode != kerr.CoordinatorLoadInProgress.Code
	})
	if join.ErrorCode != 0 || join.Generation != 1 || join.LeaderID != join.MemberID || len(join.Members) != 1 {
		t.Fatalf("join v0: %+v", join)
	}
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Version, sr.Group, sr.Generation, sr.MemberID = 0, "old", 1, join.MemberID
	sr.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: join.MemberID, MemberAssignment: []byte("x")}}
	if r := rc.roundTrip(sr).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 || string(r.MemberAssignment) != "x" {
		t.Fatalf("sync v0: %+v", r)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.Generation, hb.MemberID = "old", 1, join.MemberID
	if r := rc.roundTrip(hb).(*kmsg.HeartbeatResponse); r.ErrorCode != 0 {
		t.Fatalf("heartbeat v0: %+v", r)
	}
	// v0 commits carry no generation: refused while the group has members.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group = 0, "old"
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7}}}}
	if r := rc.roundTrip(oc).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("commit v0 with members: %+v", r)
	}
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group, lv.MemberID = "old", join.MemberID
	if r := rc.roundTrip(lv).(*kmsg.LeaveGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("leave v0: %+v", r)
	}
	if r := rc.roundTrip(oc).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit v0: %+v", r)
	}
	for _, v := range []int16{0, 1} {
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Version, of.Group = v, "old"
		of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
		r := rc.roundTrip(of).(*kmsg.OffsetFetchResponse)
		if len(r.Topics) != 1 || r.Topics[0].Partitions[0].Offset != 7 {
			t.Fatalf("fetch v%d: %+v", v, r)
		}
	}
}

// Only the coordinator writes __consumer_offsets: a client's Produce to it
// is INVALID_TOPIC_EXCEPTION, as in Kafka.
func TestProduceToOffsetsTopicRefused(t *testing.T) {
	c := newGroupCluster(t)
	rc := dialRaw(t, c.addr)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	rc.roundTrip(fc) // creates __consumer_offsets
	sp := producePart(t, rc.roundTrip(produceReq(9, -1, groupcoord.OffsetsTopic, 0, makeBatch(batchOpts{}, values(1, "junk")...))))
	if sp.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("produce to %s: %+v", groupcoord.OffsetsTopic, sp)
	}
}
