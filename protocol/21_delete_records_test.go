package protocol

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/log"
)

func TestDeleteRecords(t *testing.T) {
	c := newRetentionCluster(t)
	ctx := testCtx(t)
	adm := c.admin()
	segBytes, compact := "1024", "compact"
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &segBytes}, "dr"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, "drc"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	prod := c.client(kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1))
	for i := 0; i < 100; i++ {
		for _, topic := range []string{"dr", "drc"} {
			r := &kgo.Record{Topic: topic, Key: []byte{byte(i)}, Value: make([]byte, 60)}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	del := func(topic string, offset int64) kadm.DeleteRecordsResponse {
		t.Helper()
		var os kadm.Offsets
		os.AddOffset(topic, 0, offset, -1)
		resps, err := adm.DeleteRecords(ctx, os)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := resps.Lookup(topic, 0)
		if !ok {
			t.Fatalf("no answer for %s", topic)
		}
		return r
	}
	if r := del("dr", 50); r.Err != nil || r.LowWatermark != 50 {
		t.Fatalf("delete before 50: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	starts, err := adm.ListStartOffsets(ctx, "dr")
	if err != nil {
		t.Fatal(err)
	}
	if lo, _ := starts.Lookup("dr", 0); lo.Offset != 50 {
		t.Fatalf("ListOffsets earliest %d, want 50", lo.Offset)
	}
	p := c.logs.Get(log.TopicPartition{Topic: "dr", Partition: 0})
	if segs := p.Segments(); segs[0].BaseOffset == 0 || segs[0].BaseOffset > 50 {
		t.Fatalf("first segment %d: the segments wholly below 50 should be gone, the one holding 50 kept", segs[0].BaseOffset)
	}
	// A consumer from the start begins at 50.
	cons := c.client(kgo.ConsumeTopics("dr"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != 50 {
		t.Fatalf("consumer from the start: first record %v", recs)
	}
	// The log start never moves back.
	if r := del("dr", 30); r.Err != nil || r.LowWatermark != 50 {
		t.Fatalf("delete before 30: low watermark %d, %v; want 50", r.LowWatermark, r.Err)
	}
	if r := del("dr", 101); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete past the high watermark: %v", r.Err)
	}
	if r := del("dr", -7); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete before -7: %v", r.Err)
	}
	if r := del("dr", -1); r.Err != nil || r.LowWatermark != 100 {
		t.Fatalf("delete before the high watermark (-1): %d, %v", r.LowWatermark, r.Err)
	}
	if r := del("drc", 10); !errors.Is(r.Err, kerr.PolicyViolation) {
		t.Fatalf("delete on a compacted topic: %v, want POLICY_VIOLATION", r.Err)
	}
	// An unknown topic, over the wire (kadm would not find a leader).
	for _, v := range []int16{0, 2} {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.SetVersion(v)
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = "nope"
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Offset = 10
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		rc := dialRaw(t, c.addr)
		resp := rc.recv(req, rc.send(req)).(*kmsg.DeleteRecordsResponse)
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code || p.LowWatermark != -1 {
			t.Fatalf("v%d delete on an unknown topic: code %d low watermark %d", v, p.ErrorCode, p.LowWatermark)
		}
	}
	// Produce carries on at the log end.
	res := prod.ProduceSync(ctx, &kgo.Record{Topic: "dr", Value: []byte("after")})
	if r, err := res.First(); err != nil || r.Offset != 100 {
		t.Fatalf("produce after deleting everything: %v", err)
	}
}
