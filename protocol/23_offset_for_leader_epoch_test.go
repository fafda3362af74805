package protocol

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// ofleReq builds an OffsetForLeaderEpoch request for one partition.
func ofleReq(v int16, topic string, partition, current, epoch int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(v)
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, current, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestOffsetForLeaderEpochRaw(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("ofle", 1)
	c.createTopic("ofle-empty", 1)
	ti, _ := c.b.Topic("ofle")
	te, _ := c.b.Topic("ofle-empty")
	// A new partition's leader epoch is the Raft term its group elected
	// the leader in; the cases below are written for epoch 0 and shifted
	// by it (sh).
	sh := ti.Partitions[0].LeaderEpoch
	if sh <= 0 || te.Partitions[0].LeaderEpoch != sh {
		t.Fatalf("new partitions' leader epochs %d and %d", sh, te.Partitions[0].LeaderEpoch)
	}
	shift := func(e int32) int32 {
		if e < 0 {
			return e
		}
		return e + sh
	}
	// History as a partition that had leaders in epochs 0, 2 and 5 would
	// have it: epoch 0 holds 0-3, epoch 2 holds 4-5, epoch 5 holds 6-8.
	p, err := c.b.Partition("ofle", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		epoch int32
		n     int
	}{{0, 2}, {0, 2}, {2, 2}, {5, 3}} {
		res, err := p.Append(makeBatch(batchOpts{}, values(w.n, "v")...), shift(w.epoch))
		if err != nil {
			t.Fatal(err)
		}
		p.Commit(res.LastOffset + 1)
	}
	rc := dialRaw(t, c.addr)
	ask := func(v int16, topic string, partition, current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		t.Helper()
		req := ofleReq(v, topic, partition, current, epoch)
		resp := rc.roundTrip(req).(*kmsg.OffsetForLeaderEpochResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Topic != topic {
			t.Fatalf("v%d: answer shape %+v", v, resp)
		}
		return resp.Topics[0].Partitions[0]
	}
	for _, v := range []int16{0, 1, 2, 3, 4} {
		for _, tc := range []struct {
			topic          string
			partition      int32
			current, epoch int32
			code           int16
			leaderEpoch    int32
			end            int64
		}{
			{"ofle", 0, -1, 0, 0, 0, 4},
			{"ofle", 0, -1, 1, 0, 0, 4},
			{"ofle", 0, -1, 2, 0, 2, 6},
			{"ofle", 0, -1, 4, 0, 2, 6},
			{"ofle", 0, -1, 5, 0, 5, 9},
			{"ofle", 0, -1, 6, 0, -1, -1},
			{"ofle", 0, -1, -1, 0, -1, -1},
			{"ofle", 0, 0, 5, 0, 5, 9},
			// The current leader epoch counts as started at the log end
			// even with nothing written in it.
			{"ofle-empty", 0, 0, 0, 0, 0, 0},
			{"ofle-empty", 0, -1, 1, 0, -1, -1},
			{"ofle", 0, 1, 0, kerr.UnknownLeaderEpoch.Code, -1, -1},
			{"ofle", 1, -1, 0, kerr.UnknownTopicOrPartition.Code, -1, -1},
			{"ofle", -1, -1, 0, kerr.UnknownTopicOrPartition.Code, -1, -1},
			{"nope", 0, -1, 0, kerr.UnknownTopicOrPartition.Code, -1, -1},
		} {
			if v < 2 && tc.current >= 0 {
				continue // no CurrentLeaderEpoch before v2
			}
			tc.current, tc.epoch, tc.leaderEpoch = shift(tc.current), shift(tc.epoch), shift(tc.leaderEpoch)
			got := ask(v, tc.topic, tc.partition, tc.current, tc.epoch)
			wantEpoch := tc.leaderEpoch
			if v == 0 {
				wantEpoch = -1 // not in the v0 response
			}
			if got.Partition != tc.partition || got.ErrorCode != tc.code || got.LeaderEpoch != wantEpoch || got.EndOffset != tc.end {
				t.Errorf("v%d %s-%d current %d epoch %d: got code %d epoch %d end %d, want %d %d %d", v, tc.topic, tc.partition, tc.current, tc.epoch,
					got.ErrorCode, got.LeaderEpoch, got.EndOffset, tc.code, wantEpoch, tc.end)
			}
		}
	}
	// Several topics and partitions in one request keep their order;
	// ReplicaID (a follower's broker ID, or kmsg's -2) changes nothing.
	req := ofleReq(3, "ofle", 0, -1, shift(2))
	req.ReplicaID = 7
	extra := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	extra.Partition, extra.LeaderEpoch = 3, 0
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, extra)
	req.Topics = append(req.Topics, ofleReq(3, "ofle-empty", 0, -1, shift(0)).Topics[0])
	resp := rc.roundTrip(req).(*kmsg.OffsetForLeaderEpochResponse)
	if len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 2 ||
		resp.Topics[0].Partitions[0].EndOffset != 6 || resp.Topics[0].Partitions[1].ErrorCode != kerr.UnknownTopicOrPartition.Code ||
		resp.Topics[1].Topic != "ofle-empty" || resp.Topics[1].Partitions[0].EndOffset != 0 {
		t.Fatalf("multi-partition answer: %+v", resp)
	}
}

// The leader-epoch comparison shared with Fetch and ListOffsets: FENCED
// cannot be provoked over the wire while leader epochs stay 0.
func TestCheckLeaderEpoch(t *testing.T) {
	for _, tc := range []struct {
		client, current int32
		code            int16
	}{
		{-1, 3, 0}, {3, 3, 0}, {2, 3, kerr.FencedLeaderEpoch.Code}, {4, 3, kerr.UnknownLeaderEpoch.Code},
	} {
		if got := checkLeaderEpoch(tc.client, tc.current); got != tc.code {
			t.Errorf("client %d current %d: %d, want %d", tc.client, tc.current, got, tc.code)
		}
	}
}

// kgo validates an exact start offset carrying a leader epoch with
// OffsetForLeaderEpoch (KIP-320 truncation detection): an offset within
// the epoch is consumed from; one past the epoch's end is reported as
// data loss and consumption resumes at the end offset we answer.
func TestOffsetForLeaderEpochKgo(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("ofle-kgo", 1)
	ctx := testCtx(t)
	prod := c.client(kgo.DefaultProduceTopic("ofle-kgo"))
	for i := range 10 {
		if err := prod.ProduceSync(ctx, kgo.StringRecord(string(rune('a'+i)))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumeFrom := func(off kgo.Offset) (first int64, lossErr error) {
		t.Helper()
		cons := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"ofle-kgo": {0: off}}),
			kgo.FetchMaxWait(100*time.Millisecond))
		defer cons.Close()
		first = -1
		for first < 0 {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatal("no record consumed")
			}
			fs.EachError(func(_ string, _ int32, err error) {
				var dl *kgo.ErrDataLoss
				if !errors.As(err, &dl) {
					t.Fatalf("fetch error: %v", err)
				}
				lossErr = err
			})
			if recs := fs.Records(); len(recs) > 0 {
				first = recs[0].Offset
			}
		}
		return first, lossErr
	}
	ti, _ := c.b.Topic("ofle-kgo")
	e := ti.Partitions[0].LeaderEpoch // the epoch the records were written in
	if first, loss := consumeFrom(kgo.NewOffset().At(4).WithEpoch(e)); first != 4 || loss != nil {
		t.Fatalf("from 4 in epoch %d: first %d, loss %v", e, first, loss)
	}
	// Offset 15 in epoch e is past the end of epoch e (10): data loss,
	// and kgo resumes at 10, the first record produced next: it is
	// produced once the consumer's fetch is parked at the end (a fetch
	// before the reset, at 15, is out of range and does not park). The
	// first consumer's last long poll ends first.
	part, err := c.b.Partition("ofle-kgo", 0)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, func() bool { return part.Notified() == 0 }, "the first consumer's long poll never ended")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !testwait.Until(10*time.Second, func() bool { return part.Notified() > 0 }) {
			t.Error("the consumer never parked a fetch at the end of ofle-kgo-0")
		}
		prod.ProduceSync(ctx, kgo.StringRecord("after"))
	}()
	first, loss := consumeFrom(kgo.NewOffset().At(15).WithEpoch(e))
	<-done
	var dl *kgo.ErrDataLoss
	if first != 10 || !errors.As(loss, &dl) || dl.ResetTo != 10 {
		t.Fatalf("from 15 in epoch %d: first %d, loss %v", e, first, loss)
	}
}
