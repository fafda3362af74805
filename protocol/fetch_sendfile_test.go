package protocol

import (
	"bytes"
	"crypto/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Large record sets go out by sendfile, framed exactly as kmsg frames
// the same bytes, for every Fetch version shape (names before v13, topic
// IDs after, flexible from v12), and read the same as the copy path.
func TestFetchSendfileMatchesCopy(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("sf", 1)
	ctx := testCtx(t)
	// Incompressible values, some in one large batch and some in small
	// ones, so that a read ends inside a batch.
	prod := c.client(kgo.DefaultProduceTopic("sf"), kgo.ProducerLinger(50e6))
	val := make([]byte, 1000)
	rand.Read(val)
	for i := 0; i < 300; i++ {
		prod.Produce(ctx, &kgo.Record{Value: val}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: val}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := c.b.Partition("sf", 0)
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.Read(0, 350<<10)
	if err != nil || len(want.Records) < inlineRecordBytes {
		t.Fatalf("copy path read %d bytes (%v); the test needs more than %d", len(want.Records), err, inlineRecordBytes)
	}
	ti, _ := c.b.Topic("sf")
	rc := dialRaw(t, c.addr)
	for _, v := range []int16{4, 11, 12, 13, 16} {
		before := sentByFile.Load()
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(v)
		req.ReplicaID, req.MaxBytes, req.MaxWaitMillis, req.MinBytes = -1, 350<<10, 0, 1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "sf", ti.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 0, 350<<10, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := rc.roundTrip(req).(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: answer shape %+v", v, resp)
		}
		got := resp.Topics[0].Partitions[0]
		if got.ErrorCode != 0 || !bytes.Equal(got.RecordBatches, want.Records) {
			t.Fatalf("v%d: code %d, %d record bytes, want the %d the copy path reads", v, got.ErrorCode, len(got.RecordBatches), len(want.Records))
		}
		// The writer counts after sendfile returns, which may be after the
		// client has read the bytes.
		for w := 0; w < 200 && sentByFile.Load()-before < int64(len(want.Records)); w++ {
			time.Sleep(5 * time.Millisecond)
		}
		if sentByFile.Load()-before != int64(len(want.Records)) {
			t.Fatalf("v%d: %d bytes went by sendfile, want %d", v, sentByFile.Load()-before, len(want.Records))
		}
	}
	// A consumer reads every record.
	cons := c.client(kgo.ConsumeTopics("sf"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	n := 0
	for n < 400 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 400", n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !bytes.Equal(r.Value, val) {
				t.Fatalf("record %d differs", r.Offset)
			}
			n++
		})
	}
}
