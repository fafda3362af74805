package protocol

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/groupconfig"
	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/replication"
)

// newShareCluster is newCluster with the broker's share-group settings
// gc, and share.auto.offset.reset=earliest for every group named.
func newShareCluster(t *testing.T, gc groupconfig.Broker, earliest ...string) *testCluster {
	t.Helper()
	var b *replication.Broker
	s, addr := startServerWith(t, Config{GroupConfig: gc}, func(p int32) *replication.Broker {
		b = testBroker(t, func(c *replication.BrokerConfig) { c.AdvertisedPort = p })
		return b
	})
	c := &testCluster{t: t, b: b, s: s, addr: addr, broker: b}
	for _, g := range earliest {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, g
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
		r.Configs = append(r.Configs, cfg)
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(testCtx(t), c.client())
		if err != nil || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("group config of %s: %v %+v", g, err, resp)
		}
	}
	return c
}

// shareClient sends share requests for one member by hand.
type shareClient struct {
	t       *testing.T
	cl      *kgo.Client
	group   string
	member  string
	epoch   int32
	topicID [16]byte
}

type ackSpec struct {
	first, last int64
	types       []int8
}

func (c *shareClient) fetch(maxRecords int32, wait time.Duration, acks ...ackSpec) *kmsg.ShareFetchResponse {
	c.t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 2
	req.GroupID, req.MemberID = kmsg.StringPtr(c.group), kmsg.StringPtr(c.member)
	req.ShareSessionEpoch = c.epoch
	req.MaxWaitMillis = int32(wait.Milliseconds())
	req.MaxBytes = 1 << 20
	req.MaxRecords = maxRecords
	req.ShareAcquireMode = 1
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = c.topicID
	rp := kmsg.NewShareFetchRequestTopicPartition()
	for _, a := range acks {
		ab := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = a.first, a.last, a.types
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(c.t), c.cl)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.ErrorCode == 0 {
		c.epoch = nextShareEpoch(c.epoch)
	}
	return resp
}

func (c *shareClient) ack(epoch int32, acks ...ackSpec) *kmsg.ShareAcknowledgeResponse {
	c.t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version = 2
	req.GroupID, req.MemberID = kmsg.StringPtr(c.group), kmsg.StringPtr(c.member)
	req.ShareSessionEpoch = epoch
	for _, a := range acks {
		req.IsRenewAck = req.IsRenewAck || (len(a.types) == 1 && a.types[0] == 4)
	}
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = c.topicID
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	for _, a := range acks {
		ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = a.first, a.last, a.types
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(c.t), c.cl)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.ErrorCode == 0 && epoch > 0 {
		c.epoch = nextShareEpoch(c.epoch)
	}
	return resp
}

// acquiredOf returns the acquired ranges of the only partition as
// "first-last#count" and the number of records in its batches.
func acquiredOf(t *testing.T, resp *kmsg.ShareFetchResponse) (string, int16, int16) {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("ShareFetch error %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	out := ""
	var code, ackCode int16
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			code, ackCode = p.ErrorCode, p.AcknowledgeErrorCode
			for _, a := range p.AcquiredRecords {
				if out != "" {
					out += " "
				}
				out += fmt.Sprintf("%d-%d#%d", a.FirstOffset, a.LastOffset, a.DeliveryCount)
			}
			if len(p.AcquiredRecords) > 0 && len(p.Records) == 0 {
				t.Fatalf("acquired %s but no record batches", out)
			}
		}
	}
	return out, code, ackCode
}

// TestShareFetchAcknowledge drives two members of one share group on one
// partition through ShareFetch and ShareAcknowledge over a real socket:
// records are spread with none held by two members, acknowledgements
// finish or release records, a release is redelivered with a higher
// delivery count, a lapsed lock redelivers, and the session errors are
// Kafka's.
func TestShareFetchAcknowledge(t *testing.T) {
	c := newShareCluster(t, groupconfig.Broker{ShareRecordLockDuration: time.Second, ShareMinRecordLockDuration: time.Second, ShareDeliveryCountLimit: 3}, "g")
	c.createTopic("jobs", 1)
	cl := c.client()
	for i := range 20 {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "jobs", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	info, ok := c.b.Topic("jobs")
	if !ok {
		t.Fatal("no topic")
	}
	a := &shareClient{t: t, cl: c.client(), group: "g", member: "member-a", topicID: info.ID}
	b := &shareClient{t: t, cl: c.client(), group: "g", member: "member-b", topicID: info.ID}

	if got, _, _ := acquiredOf(t, a.fetch(5, 0)); got != "0-4#1" {
		t.Fatalf("a acquired %q, want 0-4#1", got)
	}
	if got, _, _ := acquiredOf(t, b.fetch(5, 0)); got != "5-9#1" {
		t.Fatalf("b acquired %q, want 5-9#1", got)
	}
	// a: accept 0-2, release 3, reject 4; then fetch again: 3 comes back
	// (delivery 2) before new records.
	got, _, ackCode := acquiredOf(t, a.fetch(3, 0, ackSpec{0, 2, []int8{1}}, ackSpec{3, 3, []int8{2}}, ackSpec{4, 4, []int8{3}}))
	if ackCode != 0 || got != "3-3#2 10-11#1" {
		t.Fatalf("a: ack code %d, acquired %q, want 0 and 3-3#2 10-11#1", ackCode, got)
	}
	// b cannot acknowledge a's records.
	r := b.ack(b.epoch, ackSpec{10, 10, []int8{1}})
	if code := r.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRecordState.Code {
		t.Fatalf("b acking a's record: %v, want INVALID_RECORD_STATE", kerr.ErrorForCode(code))
	}
	// Session errors.
	if r := b.ack(0, ackSpec{5, 5, []int8{1}}); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("ShareAcknowledge at epoch 0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := b.ack(b.epoch+5, ackSpec{5, 5, []int8{1}}); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("ShareAcknowledge at a wrong epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	stranger := &shareClient{t: t, cl: c.client(), group: "g", member: "nobody", topicID: info.ID, epoch: 3}
	if r := stranger.ack(3, ackSpec{5, 5, []int8{1}}); r.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("ShareAcknowledge without a session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// b accepts 5-9 with ShareAcknowledge.
	if r := b.ack(b.epoch, ackSpec{5, 9, []int8{1}}); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("b accepting 5-9: %+v", r)
	}
	// b takes the rest of the log; a's locks on 3, 10, 11 lapse: b gets
	// them back with delivery 3 and 2.
	if got, _, _ := acquiredOf(t, b.fetch(10, 0)); got != "12-19#1" {
		t.Fatalf("b acquired %q, want 12-19#1", got)
	}
	if r := b.ack(b.epoch, ackSpec{12, 19, []int8{1}}); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("b accepting 12-19: %+v", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _, _ = acquiredOf(t, b.fetch(10, 200*time.Millisecond))
		if got != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a's lapsed locks never came back to b")
		}
	}
	if got != "3-3#3 10-11#2" {
		t.Fatalf("b after a's locks lapsed: %q, want 3-3#3 10-11#2", got)
	}
	// Record 3 is at the delivery limit (3): released, it is archived.
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "jobs", Value: []byte("20")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got, _, ackCode = acquiredOf(t, b.fetch(1, 0, ackSpec{3, 3, []int8{2}}, ackSpec{10, 11, []int8{1}}))
	if ackCode != 0 || got != "20-20#1" {
		t.Fatalf("b's acks: %v, acquired %q, want 20-20#1", kerr.ErrorForCode(ackCode), got)
	}
	reg, err := c.b.ShareRegistry("jobs", 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := reg.Group("g")
	if st == nil || st.Start != 20 {
		t.Fatalf("share partition start = %+v, want 20 (0-19 done, 20 acquired by b)", st)
	}
	// Closing b's session releases 20 at once.
	if r := b.ack(-1); r.ErrorCode != 0 {
		t.Fatalf("closing b's session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if got, _, _ := acquiredOf(t, a.fetch(10, 0)); got != "20-20#2" {
		t.Fatalf("a after b closed: %q, want 20-20#2", got)
	}
}

// TestShareFetchLongPoll waits for records produced while it waits.
func TestShareFetchLongPoll(t *testing.T) {
	c := newShareCluster(t, groupconfig.Broker{})
	c.createTopic("lp", 1)
	info, _ := c.b.Topic("lp")
	a := &shareClient{t: t, cl: c.client(), group: "g", member: "m", topicID: info.ID}
	if got, _, _ := acquiredOf(t, a.fetch(10, 0)); got != "" {
		t.Fatalf("empty topic gave %q", got)
	}
	cl := c.client()
	go func() {
		// Produce once the fetch below is in the server's hands (its
		// long poll then waits, as nothing is there yet).
		testwait.Until(10*time.Second, func() bool { return c.s.running[78].Load() > 0 })
		cl.ProduceSync(context.Background(), &kgo.Record{Topic: "lp", Value: []byte("x")})
	}()
	start := time.Now()
	got, _, _ := acquiredOf(t, a.fetch(10, 5*time.Second))
	if got != "0-0#1" {
		t.Fatalf("long poll got %q after %v, want 0-0#1", got, time.Since(start))
	}
}

// TestShareFetchHeldByOwnLocks: a member whose own unacknowledged records
// fill the lock window (share.partition.max.record.locks past the start
// offset) gets its fetch answered at once instead of after MaxWaitMs (its
// acknowledgements come with its next request); another member, whom
// only the first member's acknowledgements can serve, waits its MaxWaitMs
// out; the first member's acknowledgements move the window on.
func TestShareFetchHeldByOwnLocks(t *testing.T) {
	c := newShareCluster(t, groupconfig.Broker{SharePartitionMaxRecordLocks: 100}, "g")
	c.createTopic("win", 1)
	cl := c.client()
	recs := make([]*kgo.Record, 250)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "win", Value: []byte(fmt.Sprint(i))}
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	info, _ := c.b.Topic("win")
	a := &shareClient{t: t, cl: c.client(), group: "g", member: "member-a", topicID: info.ID}
	b := &shareClient{t: t, cl: c.client(), group: "g", member: "member-b", topicID: info.ID}
	if got, _, _ := acquiredOf(t, a.fetch(500, 0)); got != "0-99#1" {
		t.Fatalf("a acquired %q, want the window 0-99#1", got)
	}
	const maxWait = 5 * time.Second
	start := time.Now()
	if got, _, _ := acquiredOf(t, a.fetch(500, maxWait)); got != "" {
		t.Fatalf("a acquired %q past a full window", got)
	}
	if took := time.Since(start); took >= maxWait/2 {
		t.Fatalf("a's fetch, held back only by its own locks, was answered after %v (MaxWaitMs %v)", took, maxWait)
	}
	const bWait = 300 * time.Millisecond
	start = time.Now()
	if got, _, _ := acquiredOf(t, b.fetch(500, bWait)); got != "" {
		t.Fatalf("b acquired %q past a full window", got)
	}
	if took := time.Since(start); took < bWait {
		t.Fatalf("b's fetch, whom a's locks hold back, was answered after %v, before its MaxWaitMs %v", took, bWait)
	}
	if got, _, ackCode := acquiredOf(t, a.fetch(500, maxWait, ackSpec{0, 99, []int8{1}})); ackCode != 0 || got != "100-199#1" {
		t.Fatalf("a after accepting 0-99: ack %v, acquired %q, want 100-199#1", kerr.ErrorForCode(ackCode), got)
	}
}

// TestShareGroupOffsetsAdmin describes, alters and deletes a share group's
// start offsets with kadm (DescribeShareGroupOffsets v1 with lag,
// AlterShareGroupOffsets, DeleteShareGroupOffsets).
func TestShareGroupOffsetsAdmin(t *testing.T) {
	c := newShareCluster(t, groupconfig.Broker{}, "sg")
	c.createTopic("adm", 2)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "adm", Partition: 0, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	info, _ := c.b.Topic("adm")
	a := &shareClient{t: t, cl: c.client(), group: "sg", member: "m", topicID: info.ID}
	if got, _, _ := acquiredOf(t, a.fetch(4, 0)); got != "0-3#1" {
		t.Fatalf("acquired %q", got)
	}
	if r := a.ack(a.epoch, ackSpec{0, 1, []int8{1}}); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	adm := c.admin()
	desc := func() map[int32][2]int64 {
		t.Helper()
		ds, err := adm.DescribeShareGroupOffsets(testCtx(t), "sg")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32][2]int64{}
		for _, d := range ds {
			if d.Err != nil {
				t.Fatal(d.Err)
			}
			for _, ps := range d.Offsets {
				for p, o := range ps {
					if o.Err != nil {
						t.Fatalf("partition %d: %v", p, o.Err)
					}
					out[p] = [2]int64{o.StartOffset, o.Lag}
				}
			}
		}
		return out
	}
	// Partition 0: 0-1 accepted, 2-3 in flight, 4-9 not delivered: start
	// 2, lag 8. Partition 1 has no state: not listed.
	if got := desc(); len(got) != 1 || got[0] != [2]int64{2, 8} {
		t.Fatalf("described %v, want partition 0 at start 2 lag 8", got)
	}
	// Closing the session releases 2-3; then the group is reset to 7.
	if r := a.ack(-1); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "adm", Partition: 0, At: 7})
	ar, err := adm.AlterShareGroupOffsets(testCtx(t), "sg", offs)
	if err != nil || ar.Error() != nil {
		t.Fatalf("alter: %v %v", err, ar.Error())
	}
	if got := desc(); got[0] != [2]int64{7, 3} {
		t.Fatalf("after alter: %v, want start 7 lag 3", got)
	}
	b := &shareClient{t: t, cl: c.client(), group: "sg", member: "m2", topicID: info.ID}
	if got, _, _ := acquiredOf(t, b.fetch(10, 0)); got != "7-9#1" {
		t.Fatalf("after alter acquired %q, want 7-9#1", got)
	}
	b.ack(-1)
	dr, err := adm.DeleteShareGroupOffsets(testCtx(t), "sg", "adm")
	if err != nil || dr.Error() != nil {
		t.Fatalf("delete: %v %v", err, dr.Error())
	}
	if got := desc(); len(got) != 0 {
		t.Fatalf("after delete: %v, want no partitions", got)
	}
}

// TestShareGroupOffsetsRefusedWhileActive: AlterShareGroupOffsets and
// DeleteShareGroupOffsets answer GROUP_NOT_EMPTY while the share group has
// a member (a franz-go share consumer).
func TestShareGroupOffsetsRefusedWhileActive(t *testing.T) {
	c := newShareCluster(t, groupconfig.Broker{}, "busy")
	c.createTopic("busyq", 1)
	member := c.client(kgo.ShareGroup("busy"), kgo.ConsumeTopics("busyq"))
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			member.PollRecords(ctx, 10)
		}
	}()
	adm := c.admin()
	var ds kadm.DescribedShareGroups
	var err error
	if !testwait.Until(15*time.Second, func() bool {
		ds, err = adm.DescribeShareGroups(testCtx(t), "busy")
		return err == nil && len(ds["busy"].Members) > 0
	}) {
		t.Fatalf("the share consumer never joined: %v %+v", err, ds)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "busyq", Partition: 0, At: 0})
	ar, err := adm.AlterShareGroupOffsets(testCtx(t), "busy", offs)
	if err == nil {
		err = ar.Error()
	}
	if !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("alter while active: %v, want GROUP_NOT_EMPTY", err)
	}
	dr, err := adm.DeleteShareGroupOffsets(testCtx(t), "busy", "busyq")
	if err == nil {
		err = dr.Error()
	}
	if !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("delete while active: %v, want GROUP_NOT_EMPTY", err)
	}
}

// TestShareOldestUnackedAge: strata_share_oldest_unacked_age_seconds is
// the age of the oldest record not yet acknowledged, also when it lies
// inside a batch (not at a batch's first offset).
func TestShareOldestUnackedAge(t *testing.T) {
	c := newShareCluster(t, groupconfig.Broker{}, "g")
	c.createTopic("aged", 1)
	cl := c.client()
	old := time.Now().Add(-time.Hour)
	recs := make([]*kgo.Record, 10)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "aged", Value: []byte(fmt.Sprint(i)), Timestamp: old}
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	info, _ := c.b.Topic("aged")
	a := &shareClient{t: t, cl: c.client(), group: "g", member: "m", topicID: info.ID}
	if got, _, _ := acquiredOf(t, a.fetch(500, 0)); got != "0-9#1" {
		t.Fatalf("acquired %q, want 0-9#1", got)
	}
	if r := a.ack(a.epoch, ackSpec{0, 4, []int8{1}}); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("accepting 0-4: %+v", r)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(shareCollector{c.s})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	age := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "strata_share_oldest_unacked_age_seconds" {
			for _, m := range mf.GetMetric() {
				age = m.GetGauge().GetValue()
			}
		}
	}
	if age < 3000 || age > 4000 {
		t.Fatalf("oldest unacknowledged age %v s, want about 3600 (records 5-9 of an hour-old batch)", age)
	}
}
