package protocol

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func listOffsetsReq(version int16, topic string, partition int32, ts int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = version
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func listOffsetsPart(t *testing.T, rc *rawConn, req *kmsg.ListOffsetsRequest) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	r := rc.roundTrip(req).(*kmsg.ListOffsetsResponse)
	return r.Topics[0].Partitions[0]
}

func TestListOffsets(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("lo", 1)
	rc := dialRaw(t, c.addr)
	base := time.Now().Add(-time.Hour).UnixMilli()
	for i, ts := range []int64{base, base + 1000, base + 500} {
		sp := producePart(t, rc.roundTrip(produceReq(9, -1, "lo", 0, makeBatch(batchOpts{firstTS: ts}, values(2, "t")...))))
		if sp.ErrorCode != 0 {
			t.Fatalf("produce %d: %v", i, kerr.ErrorForCode(sp.ErrorCode))
		}
	}
	maxV := kmsg.NewPtrListOffsetsRequest().MaxVersion()
	for _, v := range []int16{1, 4, maxV} {
		if p := listOffsetsPart(t, rc, listOffsetsReq(v, "lo", 0, -2)); p.ErrorCode != 0 || p.Offset != 0 || p.Timestamp != -1 {
			t.Fatalf("v%d earliest: %+v", v, p)
		}
		if p := listOffsetsPart(t, rc, listOffsetsReq(v, "lo", 0, -1)); p.ErrorCode != 0 || p.Offset != 6 {
			t.Fatalf("v%d latest: %+v", v, p)
		}
		if p := listOffsetsPart(t, rc, listOffsetsReq(v, "lo", 0, base+600)); p.ErrorCode != 0 || p.Offset != 2 || p.Timestamp != base+1000 {
			t.Fatalf("v%d by timestamp: %+v", v, p)
		}
		if p := listOffsetsPart(t, rc, listOffsetsReq(v, "lo", 0, base+5000)); p.ErrorCode != 0 || p.Offset != -1 || p.Timestamp != -1 {
			t.Fatalf("v%d after the last timestamp: %+v", v, p)
		}
	}
	if p := listOffsetsPart(t, rc, listOffsetsReq(maxV, "lo", 0, -3)); p.ErrorCode != 0 || p.Timestamp != base+1000 || p.Offset < 2 || p.Offset > 3 {
		t.Fatalf("max timestamp: %+v", p)
	}
	req := listOffsetsReq(maxV, "lo", 0, -1)
	req.IsolationLevel = 1
	if p := listOffsetsPart(t, rc, req); p.Offset != 6 {
		t.Fatalf("read_committed latest: %+v", p)
	}
	if p := listOffsetsPart(t, rc, listOffsetsReq(maxV, "nope", 0, -1)); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %+v", p)
	}
	ti, _ := c.b.Topic("lo")
	req = listOffsetsReq(maxV, "lo", 0, -1)
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = ti.Partitions[0].LeaderEpoch + 1
	if p := listOffsetsPart(t, rc, req); p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("newer leader epoch: %v", kerr.ErrorForCode(p.ErrorCode))
	}

	// v0: old-style offsets.
	req = listOffsetsReq(0, "lo", 0, -1)
	req.Topics[0].Partitions[0].MaxNumOffsets = 1
	if p := listOffsetsPart(t, rc, req); p.ErrorCode != 0 || len(p.OldStyleOffsets) != 1 || p.OldStyleOffsets[0] != 6 {
		t.Fatalf("v0 latest: %+v", p)
	}
	req.Topics[0].Partitions[0].Timestamp = -2
	if p := listOffsetsPart(t, rc, req); len(p.OldStyleOffsets) != 1 || p.OldStyleOffsets[0] != 0 {
		t.Fatalf("v0 earliest: %+v", p)
	}

	// kadm agrees.
	adm := c.admin()
	ctx := testCtx(t)
	ends, err := adm.ListEndOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("lo", 0); o.Err != nil || o.Offset != 6 {
		t.Fatalf("kadm end offset: %+v", o)
	}
}

// An empty partition: earliest = latest = 0, max timestamp -1/-1.
func TestListOffsetsEmpty(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("empty", 1)
	rc := dialRaw(t, c.addr)
	maxV := kmsg.NewPtrListOffsetsRequest().MaxVersion()
	for _, ts := range []int64{-1, -2} {
		if p := listOffsetsPart(t, rc, listOffsetsReq(maxV, "empty", 0, ts)); p.Offset != 0 {
			t.Fatalf("%d: %+v", ts, p)
		}
	}
	if p := listOffsetsPart(t, rc, listOffsetsReq(maxV, "empty", 0, -3)); p.Offset != -1 || p.Timestamp != -1 {
		t.Fatalf("max timestamp on empty: %+v", p)
	}
}

// A timestamp query answers with the record, not its batch: the first
// record whose timestamp is >= the one asked (its own offset and
// timestamp), and -3 the first record holding the largest timestamp, as
// Kafka does -- in a compressed batch too (the Java client's
// offsetsForTimes after one producer batch found the batch's first offset).
func TestListOffsetsRecordInBatch(t *testing.T) {
	c := newCluster(t, nil)
	for i, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.ZstdCompression(), kgo.Lz4Compression()} {
		topic := "lorec-" + strconv.Itoa(i)
		c.createTopic(topic, 1)
		cl := c.client(kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(time.Second), kgo.DefaultProduceTopic(topic))
		base := time.Now().Add(-time.Hour).UnixMilli()
		var recs []*kgo.Record
		for i := 0; i < 10; i++ {
			ts := base + int64(i)*1000
			if i == 7 {
				ts = base + 100_000 // the largest, in the middle
			}
			recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(i)), Timestamp: time.UnixMilli(ts)})
		}
		if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if recs[0].Offset != 0 || recs[9].Offset != 9 {
			t.Fatalf("%s: offsets %d..%d", topic, recs[0].Offset, recs[9].Offset)
		}
		rc := dialRaw(t, c.addr)
		maxV := kmsg.NewPtrListOffsetsRequest().MaxVersion()
		if p := listOffsetsPart(t, rc, listOffsetsReq(maxV, topic, 0, base+2500)); p.ErrorCode != 0 || p.Offset != 3 || p.Timestamp != base+3000 {
			t.Fatalf("%s: by timestamp: offset %d timestamp %d, want 3 and base+3000", topic, p.Offset, p.Timestamp-base)
		}
		if p := listOffsetsPart(t, rc, listOffsetsReq(maxV, topic, 0, base)); p.Offset != 0 || p.Timestamp != base {
			t.Fatalf("%s: first timestamp: offset %d timestamp %d", topic, p.Offset, p.Timestamp-base)
		}
		if p := listOffsetsPart(t, rc, listOffsetsReq(maxV, topic, 0, -3)); p.ErrorCode != 0 || p.Offset != 7 || p.Timestamp != base+100_000 {
			t.Fatalf("%s: max timestamp: offset %d timestamp %d, want 7 and base+100000", topic, p.Offset, p.Timestamp-base)
		}
		// The log start inside the batch: the answer is at or after it.
		if _, err := c.admin().DeleteRecords(testCtx(t), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 5}}}); err != nil {
			t.Fatal(err)
		}
		if p := listOffsetsPart(t, rc, listOffsetsReq(maxV, topic, 0, base+2500)); p.Offset != 5 || p.Timestamp != base+5000 {
			t.Fatalf("%s: by timestamp below the log start: offset %d timestamp %d, want 5 and base+5000", topic, p.Offset, p.Timestamp-base)
		}
	}
}
