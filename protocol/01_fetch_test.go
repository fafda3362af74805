package protocol

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

func fetchReq(version int16, topic string, partition int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchPartResp(t *testing.T, resp kmsg.Response) kmsg.FetchResponseTopicPartition {
	t.Helper()
	r := resp.(*kmsg.FetchResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("fetch: top-level %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("unexpected response shape %+v", r)
	}
	return r.Topics[0].Partitions[0]
}

// countBatches counts whole v2 batches and their records.
func countBatches(t *testing.T, b []byte) (batches, records int) {
	t.Helper()
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("bad batch: %v", err)
		}
		batches++
		records += int(rb.NumRecords)
		b = b[12+rb.Length:]
	}
	return
}

func produceN(t *testing.T, rc *rawConn, topic string, partition int32, batches, perBatch int) {
	t.Helper()
	for range batches {
		sp := producePart(t, rc.roundTrip(produceReq(9, -1, topic, partition, makeBatch(batchOpts{}, values(perBatch, "v")...))))
		if sp.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(sp.ErrorCode))
		}
	}
}

// Fetch v4, the oldest version served (kafka-python, kafka-go), and the
// newest, by topic ID.
func TestFetchVersions(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("f", 1)
	rc := dialRaw(t, c.addr)
	produceN(t, rc, "f", 0, 3, 4)

	sp := fetchPartResp(t, rc.roundTrip(fetchReq(4, "f", 0, 0)))
	if sp.ErrorCode != 0 || sp.HighWatermark != 12 || sp.LastStableOffset != 12 {
		t.Fatalf("v4: %+v", sp)
	}
	if b, r := countBatches(t, sp.RecordBatches); b != 3 || r != 12 {
		t.Fatalf("v4: %d batches %d records", b, r)
	}

	ti, _ := c.b.Topic("f")
	req := fetchReq(kmsg.NewPtrFetchRequest().MaxVersion(), "", 0, 4)
	req.Topics[0].TopicID = ti.ID
	req.IsolationLevel = 1
	sp = fetchPartResp(t, rc.roundTrip(req))
	if sp.ErrorCode != 0 || sp.LogStartOffset != 0 || sp.AbortedTransactions == nil {
		t.Fatalf("max version: %+v", sp)
	}
	if b, r := countBatches(t, sp.RecordBatches); b != 2 || r != 8 {
		t.Fatalf("from offset 4: %d batches %d records", b, r)
	}
	req.Topics[0].TopicID = [16]byte{9}
	if sp := fetchPartResp(t, rc.roundTrip(req)); sp.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown id: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
}

func TestFetchErrors(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("fe", 1)
	rc := dialRaw(t, c.addr)
	produceN(t, rc, "fe", 0, 1, 2)

	if sp := fetchPartResp(t, rc.roundTrip(fetchReq(11, "nope", 0, 0))); sp.ErrorCode != kerr.UnknownTopicOrPartition.Code || sp.RecordBatches == nil {
		t.Fatalf("unknown topic: %v (records must be empty, not null)", kerr.ErrorForCode(sp.ErrorCode))
	}
	// At the end of the log: an empty record set, not null (librdkafka).
	if sp := fetchPartResp(t, rc.roundTrip(fetchReq(11, "fe", 0, 2))); sp.ErrorCode != 0 || sp.RecordBatches == nil || len(sp.RecordBatches) != 0 {
		t.Fatalf("at the end: %+v", sp)
	}
	if sp := fetchPartResp(t, rc.roundTrip(fetchReq(11, "fe", 3, 0))); sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	sp := fetchPartResp(t, rc.roundTrip(fetchReq(11, "fe", 0, 100)))
	if sp.ErrorCode != kerr.OffsetOutOfRange.Code || sp.HighWatermark != 2 {
		t.Fatalf("out of range: %v %+v", kerr.ErrorForCode(sp.ErrorCode), sp)
	}
	ti, _ := c.b.Topic("fe")
	epoch := ti.Partitions[0].LeaderEpoch
	req := fetchReq(11, "fe", 0, 0)
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch + 1
	if sp := fetchPartResp(t, rc.roundTrip(req)); sp.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("newer epoch: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	if epoch > 0 {
		req.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch - 1
		if sp := fetchPartResp(t, rc.roundTrip(req)); sp.ErrorCode != kerr.FencedLeaderEpoch.Code {
			t.Fatalf("older epoch: %v", kerr.ErrorForCode(sp.ErrorCode))
		}
	}
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = epoch
	if sp := fetchPartResp(t, rc.roundTrip(req)); sp.ErrorCode != 0 {
		t.Fatalf("current epoch: %v", kerr.ErrorForCode(sp.ErrorCode))
	}

	// An incremental fetch of an unknown session.
	req = fetchReq(11, "fe", 0, 0)
	req.SessionID, req.SessionEpoch = 77, 1
	if r := rc.roundTrip(req).(*kmsg.FetchResponse); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// KIP-227 incremental fetch sessions.
func TestFetchSessions(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("fs", 2)
	rc := dialRaw(t, c.addr)
	produceN(t, rc, "fs", 0, 1, 2)

	full := fetchReq(12, "fs", 0, 2) // p0 already read up to its end
	p1 := kmsg.NewFetchRequestTopicPartition()
	p1.Partition, p1.PartitionMaxBytes = 1, 1<<20
	full.Topics[0].Partitions = append(full.Topics[0].Partitions, p1)
	full.SessionEpoch = 0
	r := rc.roundTrip(full).(*kmsg.FetchResponse)
	if r.ErrorCode != 0 || r.SessionID <= 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 2 {
		t.Fatalf("session start: %+v", r)
	}
	id := r.SessionID

	incr := func(epoch int32, mod func(*kmsg.FetchRequest)) *kmsg.FetchResponse {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.SessionID, req.SessionEpoch = 12, id, epoch
		req.MaxBytes, req.MinBytes = 1<<20, 1
		if mod != nil {
			mod(req)
		}
		return rc.roundTrip(req).(*kmsg.FetchResponse)
	}
	// Nothing new: an empty answer.
	if r := incr(1, nil); r.ErrorCode != 0 || len(r.Topics) != 0 || r.SessionID != id {
		t.Fatalf("nothing new: %+v", r)
	}
	// New data in partition 1 only.
	produceN(t, rc, "fs", 1, 1, 3)
	r = incr(2, nil)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].Partition != 1 {
		t.Fatalf("news in p1: %+v", r)
	}
	if _, n := countBatches(t, r.Topics[0].Partitions[0].RecordBatches); n != 3 {
		t.Fatalf("p1 records: %d", n)
	}
	// The client moves p1's offset to 3 and p0's to 2: nothing to read.
	r = incr(3, func(req *kmsg.FetchRequest) {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "fs"
		for p, off := range map[int32]int64{0: 2, 1: 3} {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	})
	if r.ErrorCode != 0 || len(r.Topics) != 0 {
		t.Fatalf("after moving offsets: %+v", r)
	}
	// Wrong epoch.
	if r := incr(9, nil); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("wrong epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Forget p1: its news no longer shows; p0's does.
	r = incr(4, func(req *kmsg.FetchRequest) {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = "fs", []int32{1}
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	})
	if r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	produceN(t, rc, "fs", 1, 1, 1)
	produceN(t, rc, "fs", 0, 1, 1)
	r = incr(5, nil)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].Partition != 0 {
		t.Fatalf("after forgetting p1: %+v", r)
	}
	// Long poll in a session wakes on news: the produce goes once the
	// fetch is parked on fs-0.
	fs0, err := c.b.Partition("fs", 0)
	if err != nil {
		t.Fatal(err)
	}
	pc := dialRaw(t, c.addr)
	produced := make(chan kmsg.Response, 1)
	go func() {
		if !testwait.Until(10*time.Second, func() bool { return fs0.Notified() > 0 }) {
			t.Error("the session's long poll never parked on fs-0")
		}
		req := produceReq(9, -1, "fs", 0, makeBatch(batchOpts{}, values(1, "w")...))
		corr := pc.corr + 1
		pc.corr = corr
		pc.nc.Write(pc.fmt.AppendRequest(nil, req, corr))
		b, _ := pc.readFrame()
		_ = b
		produced <- nil
	}()
	r = incr(6, func(req *kmsg.FetchRequest) {
		req.MaxWaitMillis = 5000
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "fs"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, 3, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	})
	<-produced
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatalf("session long poll: %+v", r)
	}
	// Epoch -1 closes the session.
	full.SessionID, full.SessionEpoch = id, -1
	if r := rc.roundTrip(full).(*kmsg.FetchResponse); r.ErrorCode != 0 || r.SessionID != 0 {
		t.Fatalf("close: %+v", r)
	}
	if r := incr(7, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("after close: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// MaxBytes and PartitionMaxBytes: whole batches only, at least one in the
// first non-empty partition.
func TestFetchMaxBytes(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("mb", 2)
	rc := dialRaw(t, c.addr)
	produceN(t, rc, "mb", 0, 4, 10)
	produceN(t, rc, "mb", 1, 4, 10)
	one := len(makeBatch(batchOpts{}, values(10, "v")...))

	req := fetchReq(11, "mb", 0, 0)
	req.MaxBytes = 1 // smaller than any batch: still one batch
	p1 := kmsg.NewFetchRequestTopicPartition()
	p1.Partition, p1.PartitionMaxBytes = 1, 1<<20
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, p1)
	r := rc.roundTrip(req).(*kmsg.FetchResponse)
	if b, _ := countBatches(t, r.Topics[0].Partitions[0].RecordBatches); b != 1 {
		t.Fatalf("first partition: %d batches, want 1", b)
	}
	if n := len(r.Topics[0].Partitions[1].RecordBatches); n != 0 {
		t.Fatalf("second partition got %d bytes past MaxBytes", n)
	}

	req.MaxBytes = int32(3*one + one/2)
	r = rc.roundTrip(req).(*kmsg.FetchResponse)
	b0, _ := countBatches(t, r.Topics[0].Partitions[0].RecordBatches)
	b1, _ := countBatches(t, r.Topics[0].Partitions[1].RecordBatches)
	if b0+b1 != 3 {
		t.Fatalf("MaxBytes %d: %d + %d batches, want 3", req.MaxBytes, b0, b1)
	}

	req.MaxBytes = 1 << 20
	req.Topics[0].Partitions[0].PartitionMaxBytes = int32(2*one + 1)
	req.Topics[0].Partitions[1].PartitionMaxBytes = int32(one - 1)
	r = rc.roundTrip(req).(*kmsg.FetchResponse)
	b0, _ = countBatches(t, r.Topics[0].Partitions[0].RecordBatches)
	b1, _ = countBatches(t, r.Topics[0].Partitions[1].RecordBatches)
	if b0 != 2 || b1 != 0 {
		t.Fatalf("PartitionMaxBytes: %d and %d batches, want 2 and 0", b0, b1)
	}
}

// A long poll parks until a produce arrives, then answers at once.
func TestFetchLongPollWakesOnProduce(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("lp", 3)
	fc := dialRaw(t, c.addr)
	req := fetchReq(11, "lp", 0, 0)
	for _, p := range []int32{1, 2} {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1<<20
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	req.MaxWaitMillis = 10000
	start := time.Now()
	corr := fc.send(req)
	lp2, err := c.b.Partition("lp", 2)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, func() bool { return lp2.Notified() > 0 }, "the fetch never parked on lp-2")
	pc := dialRaw(t, c.addr)
	produceN(t, pc, "lp", 2, 1, 1)
	r := fc.recv(req, corr).(*kmsg.FetchResponse)
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("long poll took %v", el)
	}
	if b, _ := countBatches(t, r.Topics[0].Partitions[2].RecordBatches); b != 1 {
		t.Fatalf("woken fetch has %d batches", b)
	}

	// Nothing arrives: the poll lasts MaxWaitMillis.
	req = fetchReq(11, "lp", 0, 0)
	req.MaxWaitMillis = 300
	start = time.Now()
	fc.roundTrip(req)
	if el := time.Since(start); el < 250*time.Millisecond || el > 5*time.Second {
		t.Fatalf("empty poll took %v", el)
	}
}
