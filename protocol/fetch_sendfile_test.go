package protocol

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
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
		testwait.Until(time.Second, func() bool { return sentByFile.Load()-before >= int64(len(want.Records)) })
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

// Small record sets are read by the encoder straight into the (pooled)
// response buffer: in one response beside a sendfile'd large one they read
// the same as the copy path, for every version shape, and fetch after
// fetch at other offsets (the pool hands the buffers round) each response
// holds its own bytes.
func TestFetchSmallRegionsReadIntoResponse(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("small", 3)
	ctx := testCtx(t)
	prod := c.client(kgo.DefaultProduceTopic("small"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 40; i++ {
		big := make([]byte, 1000) // incompressible, each its own
		rand.Read(big)
		prod.Produce(ctx, &kgo.Record{Partition: 0, Value: big}, nil)
	}
	for i := 0; i < 30; i++ {
		for p := int32(1); p <= 2; p++ {
			v := []byte(fmt.Sprintf("p%d-record-%d", p, i))
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	copyPath := func(part int32, off int64) []byte {
		p, err := c.b.Partition("small", part)
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return res.Records
	}
	ti, _ := c.b.Topic("small")
	rc := dialRaw(t, c.addr)
	fetch := func(v int16, offs map[int32]int64) map[int32][]byte {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(v)
		req.ReplicaID, req.MaxBytes, req.MaxWaitMillis, req.MinBytes = -1, 1<<20, 0, 1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "small", ti.ID
		for p := int32(0); p < 3; p++ {
			if off, ok := offs[p]; ok {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, off, 1<<20, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		req.Topics = append(req.Topics, rt)
		resp := rc.roundTrip(req).(*kmsg.FetchResponse)
		got := map[int32][]byte{}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				got[p.Partition] = p.RecordBatches
			}
		}
		return got
	}
	for _, v := range []int16{4, 11, 12, 13, 16} {
		before := sentByFile.Load()
		got := fetch(v, map[int32]int64{0: 0, 1: 0, 2: 0})
		for p := int32(0); p < 3; p++ {
			if want := copyPath(p, 0); !bytes.Equal(got[p], want) {
				t.Fatalf("v%d: partition %d: %d record bytes, want the %d the copy path reads", v, p, len(got[p]), len(want))
			}
		}
		if len(got[1]) >= inlineRecordBytes || len(got[0]) < inlineRecordBytes {
			t.Fatalf("v%d: the test needs a large partition 0 (%d bytes) and small others (%d)", v, len(got[0]), len(got[1]))
		}
		testwait.Until(time.Second, func() bool { return sentByFile.Load()-before >= int64(len(got[0])) })
		if sent := sentByFile.Load() - before; sent != int64(len(got[0])) {
			t.Fatalf("v%d: %d bytes went by sendfile, want partition 0's %d only", v, sent, len(got[0]))
		}
	}
	for off := int64(0); off < 30; off++ {
		got := fetch(16, map[int32]int64{1: off, 2: 29 - off})
		if want := copyPath(1, off); !bytes.Equal(got[1], want) {
			t.Fatalf("partition 1 at %d: %q, want %q", off, got[1], want)
		}
		if want := copyPath(2, 29-off); !bytes.Equal(got[2], want) {
			t.Fatalf("partition 2 at %d: %q, want %q", 29-off, got[2], want)
		}
	}
}
