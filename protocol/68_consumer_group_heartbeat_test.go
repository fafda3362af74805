package protocol

import (
	"maps"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// TestKIP848RegexSubscription: a kgo consumer with ConsumeRegex and the
// KIP-848 protocol sends its pattern as SubscribedTopicRegex; the broker
// resolves it (whole names, RE2), so the consumer reads the matching
// topics and not the others, and a matching topic created while it runs
// joins its assignment without any client-side metadata trick.
func TestKIP848RegexSubscription(t *testing.T) {
	c := newGroupCluster(t)
	ctx := testCtx(t)
	c.createTopic("ev-a", 2)
	c.createTopic("ev-b", 1)
	c.createTopic("other", 1)
	for _, topic := range []string{"ev-a", "ev-b", "other"} {
		produceRecords(t, c, topic, 5)
	}
	cl := c.client(kgo.ConsumerGroup("rg"), kgo.ConsumeRegex(), kgo.ConsumeTopics("ev-.*"), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	got := map[string]int{}
	poll := func(want map[string]int) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			done := true
			for topic, n := range want {
				if got[topic] < n {
					done = false
				}
			}
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("consumed %v, want %v", got, want)
			}
			fs := cl.PollRecords(ctx, 100)
			fs.EachRecord(func(r *kgo.Record) { got[r.Topic]++ })
		}
	}
	poll(map[string]int{"ev-a": 5, "ev-b": 5})

	// The group's member carries the regex, resolved on the broker.
	raw := dialRaw(t, c.addr)
	dreq := kmsg.NewPtrConsumerGroupDescribeRequest()
	dreq.Groups = []string{"rg"}
	d := raw.roundTrip(dreq).(*kmsg.ConsumerGroupDescribeResponse)
	if len(d.Groups) != 1 || d.Groups[0].ErrorCode != 0 || len(d.Groups[0].Members) != 1 {
		t.Fatalf("describe: %+v", d)
	}
	if m := d.Groups[0].Members[0]; m.SubscribedTopicRegex == nil || len(m.SubscribedTopics) != 0 {
		t.Fatalf("member subscription: names %v regex %v", m.SubscribedTopics, m.SubscribedTopicRegex)
	}

	// A new matching topic is picked up by the broker's re-evaluation.
	c.createTopic("ev-c", 1)
	produceRecords(t, c, "ev-c", 5)
	poll(map[string]int{"ev-a": 5, "ev-b": 5, "ev-c": 5})
	if got["other"] != 0 {
		t.Fatalf("consumed %d records of a topic the regex does not match", got["other"])
	}
	cl.Close()
}

// TestKIP848RegexInternalTopic: as Kafka 4, the broker's regex resolution
// does not skip internal topics: a kgo ConsumeRegex consumer of a KIP-848
// group whose regex names __consumer_offsets is assigned all of its
// partitions (and reads the group records in them) next to the regular
// topic its other regex matches. This is franz-go's
// Test848RegexBrokerResolves on a single node.
func TestKIP848RegexInternalTopic(t *testing.T) {
	c := newGroupCluster(t)
	ctx := testCtx(t)
	c.createTopic("rx-a", 1)
	produceRecords(t, c, "rx-a", 5)
	const offsets = "__consumer_offsets"
	cl := c.client(kgo.ConsumerGroup("rxg"), kgo.ConsumeRegex(), kgo.ServerSideBalancer(),
		kgo.ConsumeTopics("rx-.*", regexp.QuoteMeta(offsets)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(100*time.Millisecond))
	got := map[string]int{}
	deadline := time.Now().Add(15 * time.Second)
	for got["rx-a"] < 5 || got[offsets] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("consumed %v, want 5 records of rx-a and some of %s", got, offsets)
		}
		fs := cl.PollRecords(ctx, 100)
		fs.EachRecord(func(r *kgo.Record) { got[r.Topic]++ })
	}
	if got["rx-a"] != 5 {
		t.Fatalf("consumed %d records of rx-a, want 5", got["rx-a"])
	}

	// The broker assigned every partition of __consumer_offsets (the
	// group coordinator's 4) to the one member, and rx-a's.
	raw := dialRaw(t, c.addr)
	dreq := kmsg.NewPtrConsumerGroupDescribeRequest()
	dreq.Groups = []string{"rxg"}
	d := raw.roundTrip(dreq).(*kmsg.ConsumerGroupDescribeResponse)
	if len(d.Groups) != 1 || d.Groups[0].ErrorCode != 0 || len(d.Groups[0].Members) != 1 {
		t.Fatalf("describe: %+v", d)
	}
	assigned := map[string]int{}
	for _, tp := range d.Groups[0].Members[0].Assignment.TopicPartitions {
		ti, _ := c.broker.TopicByID(tp.TopicID)
		assigned[ti.Name] = len(tp.Partitions)
	}
	if want := map[string]int{"rx-a": 1, offsets: 4}; !maps.Equal(assigned, want) {
		t.Fatalf("assignment %v, want %v", assigned, want)
	}
	cl.Close()
}

// TestKIP848HeartbeatErrors: Kafka's answers for an invalid regex and the
// static-membership corner cases, on the wire.
func TestKIP848HeartbeatErrors(t *testing.T) {
	c := newGroupCluster(t)
	c.createTopic("t", 2)
	raw := dialRaw(t, c.addr)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "sg" // creates __consumer_offsets
	if r := raw.roundTrip(fc).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 {
		t.Fatalf("find coordinator: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	hb := func(member string, epoch int32, instance, regex *string) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "sg", member, epoch
		req.InstanceID, req.SubscribedTopicRegex = instance, regex
		if epoch == 0 {
			req.RebalanceTimeoutMillis = 30000
			if regex == nil {
				req.SubscribedTopicNames = []string{"t"}
			}
		}
		// The coordinator partition may still be loading: retry that
		// (bounded; the caller checks the last answer).
		var r *kmsg.ConsumerGroupHeartbeatResponse
		testwait.Until(5*time.Second, func() bool {
			r = raw.roundTrip(req).(*kmsg.ConsumerGroupHeartbeatResponse)
			return r.ErrorCode != kerr.CoordinatorLoadInProgress.Code && r.ErrorCode != kerr.NotCoordinator.Code
		})
		return r
	}
	inst := str("i1")
	if r := hb("m1", 0, nil, str("(unclosed")); r.ErrorCode != kerr.InvalidRegularExpression.Code || r.ErrorMessage == nil {
		t.Fatalf("invalid regex: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	r := hb("s1", 0, inst, nil)
	if r.ErrorCode != 0 {
		t.Fatalf("static join: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	epoch := r.MemberEpoch
	if r := hb("s2", 0, inst, nil); r.ErrorCode != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("second member for a held instance: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := hb("s2", epoch, inst, nil); r.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("other member id for the instance: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := hb("s1", epoch, str("nope"), nil); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown instance: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := hb("s1", -2, inst, nil); r.ErrorCode != 0 || r.MemberEpoch != -2 {
		t.Fatalf("static leave: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	r = hb("s2", 0, inst, nil)
	if r.ErrorCode != 0 || r.Assignment == nil || len(r.Assignment.Topics) != 1 || len(r.Assignment.Topics[0].Partitions) != 2 {
		t.Fatalf("replacement after the static leave: %v %+v", kerr.ErrorForCode(r.ErrorCode), r.Assignment)
	}
}
