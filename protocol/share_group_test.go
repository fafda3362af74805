package protocol

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/groupcoord"
	"github.com/strata-io/strata/internal/groupconfig"
	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/replication"
)

// Share-group membership (ShareGroupHeartbeat, ShareGroupDescribe) over a
// real socket, with kmsg requests routed by a kgo client (it finds the
// group's coordinator itself), and the group in ListGroups, DescribeGroups
// and DeleteGroups. The session timeout is lowered to 1 s (Kafka's
// minimum is 45 s) so an expiry takes about a second.

func newShareGroupCluster(t *testing.T) *testCluster {
	t.Helper()
	var b *replication.Broker
	cfg := Config{Groups: groupcoord.Config{NumPartitions: 2, TickInterval: 20 * time.Millisecond,
		ShareSessionTimeout: time.Second, ShareHeartbeatInterval: 200 * time.Millisecond}}
	s, addr := startServerWith(t, cfg, func(p int32) *replication.Broker {
		b = testBroker(t, func(c *replication.BrokerConfig) { c.AdvertisedPort = p })
		return b
	})
	return &testCluster{t: t, b: b, s: s, addr: addr, broker: b}
}

func shareHB(t *testing.T, cl *kgo.Client, group, member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.Version, req.GroupID, req.MemberID, req.MemberEpoch = 1, group, member, epoch
	if topics != nil {
		req.SubscribedTopicNames = topics
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ShareGroupHeartbeat %s: %v", member, err)
	}
	return resp
}

func shareDescribe(t *testing.T, cl *kgo.Client, group string) kmsg.ShareGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrShareGroupDescribeRequest()
	req.Version, req.GroupIDs = 1, []string{group}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("ShareGroupDescribe: %v %+v", err, resp)
	}
	return resp.Groups[0]
}

func assignedCount(r *kmsg.ShareGroupHeartbeatResponse) int {
	n := 0
	if r.Assignment != nil {
		for _, tp := range r.Assignment.TopicPartitions {
			n += len(tp.Partitions)
		}
	}
	return n
}

func TestShareGroupMembershipOverTheWire(t *testing.T) {
	c := newShareGroupCluster(t)
	c.createTopic("jobs", 2)
	cl := c.client()
	defer cl.Close()

	r := shareHB(t, cl, "workers", "m1", 0, "jobs")
	if r.ErrorCode != 0 || r.MemberEpoch != 1 || r.HeartbeatIntervalMillis != 200 || assignedCount(r) != 2 {
		t.Fatalf("m1 join: %+v", r)
	}
	for _, m := range []string{"m2", "m3"} {
		if r = shareHB(t, cl, "workers", m, 0, "jobs"); r.ErrorCode != 0 || assignedCount(r) != 1 {
			t.Fatalf("%s join: %+v", m, r)
		}
	}
	d := shareDescribe(t, cl, "workers")
	if d.ErrorCode != 0 || d.GroupState != "Stable" || d.GroupEpoch != 3 || len(d.Members) != 3 {
		t.Fatalf("describe: %+v", d)
	}
	if d := shareDescribe(t, cl, "nope"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe of an unknown group: %+v", d)
	}
	if r = shareHB(t, cl, "workers", "", 0, "jobs"); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("empty member ID: %+v", r)
	}

	// ListGroups with the share type, DescribeGroups (a share group is not
	// a classic group), DeleteGroups while members are in.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lr := kmsg.NewPtrListGroupsRequest()
	lr.Version, lr.TypesFilter, lr.StatesFilter = 5, []string{"share"}, []string{"stable"}
	lresp, err := lr.RequestWith(ctx, cl)
	if err != nil || len(lresp.Groups) != 1 || lresp.Groups[0].Group != "workers" || lresp.Groups[0].GroupType != "share" {
		t.Fatalf("ListGroups: %v %+v", err, lresp)
	}
	lr.TypesFilter = []string{"consumer"}
	if lresp, err = lr.RequestWith(ctx, cl); err != nil || len(lresp.Groups) != 0 {
		t.Fatalf("ListGroups consumer: %v %+v", err, lresp)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = 6, []string{"workers"}
	if dresp, err := dg.RequestWith(ctx, cl); err != nil || dresp.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DescribeGroups: %v %+v", err, dresp)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{"workers"}
	if dresp, err := del.RequestWith(ctx, cl); err != nil || dresp.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("DeleteGroups with members: %v %+v", err, dresp)
	}

	// m3 goes silent: m1 and m2 heartbeat until its session expires,
	// and m1 is told its new assignment.
	epochs := map[string]int32{"m1": 1, "m2": 2}
	if !testwait.UntilEvery(15*time.Second, 100*time.Millisecond, func() bool {
		if len(shareDescribe(t, cl, "workers").Members) == 2 {
			return true
		}
		for _, m := range []string{"m1", "m2"} {
			r = shareHB(t, cl, "workers", m, epochs[m])
			if r.ErrorCode != 0 {
				t.Fatalf("%s heartbeat: %+v", m, r)
			}
			epochs[m] = r.MemberEpoch
		}
		return false
	}) {
		t.Fatalf("m3 never expired: %+v", shareDescribe(t, cl, "workers"))
	}
	r = shareHB(t, cl, "workers", "m1", epochs["m1"], "jobs")
	if r.ErrorCode != 0 || r.MemberEpoch != 4 || assignedCount(r) != 1 {
		t.Fatalf("m1 after m3 expired: %+v", r)
	}
	for _, m := range []string{"m1", "m2"} {
		if r = shareHB(t, cl, "workers", m, -1); r.ErrorCode != 0 || r.MemberEpoch != -1 {
			t.Fatalf("%s leave: %+v", m, r)
		}
	}
	if dresp, err := del.RequestWith(ctx, cl); err != nil || dresp.Groups[0].ErrorCode != 0 {
		t.Fatalf("DeleteGroups of the empty group: %v %+v", err, dresp)
	}
	if d := shareDescribe(t, cl, "workers"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("deleted group: %+v", d)
	}
}

// TestShareGroupKgoMembersSharePartition: three franz-go share consumers
// (kgo.ShareGroup) join one group on a one-partition topic; each is
// assigned that partition (many members per partition), every record is
// delivered and accepted once, and a consumer that closes leaves the group.
func TestShareGroupKgoMembersSharePartition(t *testing.T) {
	c := newShareCluster(t, groupconfig.Broker{}, "pool")
	c.createTopic("q", 1)
	produceRecords(t, c, "q", 300)

	var mu sync.Mutex
	seen := map[int64]string{} // offset -> consumer
	var dup []string
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var wg sync.WaitGroup
	clients := map[string]*kgo.Client{}
	for _, name := range []string{"w1", "w2", "w3"} {
		cl := c.client(kgo.ShareGroup("pool"), kgo.ConsumeTopics("q"), kgo.ClientID(name))
		clients[name] = cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cl.PollRecords(ctx, 50).EachRecord(func(r *kgo.Record) {
					mu.Lock()
					if prev, ok := seen[r.Offset]; ok {
						dup = append(dup, prev+"/"+name)
					}
					seen[r.Offset] = name
					mu.Unlock()
					r.Ack(kgo.AckAccept)
				})
			}
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	adm := c.admin()
	var n, members int
	var ds kadm.DescribedShareGroups
	var err error
	if !testwait.Until(30*time.Second, func() bool {
		mu.Lock()
		n = len(seen)
		mu.Unlock()
		ds, err = adm.DescribeShareGroups(testCtx(t), "pool")
		members = 0
		if err == nil {
			for _, m := range ds["pool"].Members {
				if ps := m.Assignment["q"]; len(ps) == 1 {
					if _, ok := ps[0]; ok {
						members++
					}
				}
			}
		}
		return n == 300 && members == 3
	}) {
		t.Fatalf("consumed %d of 300, %d members assigned q-0: %v %+v", n, members, err, ds)
	}
	mu.Lock()
	per := map[string]int{}
	for _, name := range seen {
		per[name]++
	}
	t.Logf("records per consumer: %v", per)
	if len(dup) > 0 {
		t.Errorf("records delivered twice (lock duration 30 s, all accepted): %v", dup)
	}
	mu.Unlock()

	clients["w3"].Close()
	if !testwait.Until(15*time.Second, func() bool {
		ds, err = adm.DescribeShareGroups(testCtx(t), "pool")
		return err == nil && len(ds["pool"].Members) == 2
	}) {
		t.Fatalf("w3 never left: %v %+v", err, ds)
	}
}
