package e2e

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/segment"
)

// oneRecordBatch is a magic-2 record batch holding one record with value v.
func oneRecordBatch(v []byte) []byte {
	var rec []byte
	rec = append(rec, 0)                          // attributes
	rec = binary.AppendVarint(rec, 0)             // timestamp delta
	rec = binary.AppendVarint(rec, 0)             // offset delta
	rec = binary.AppendVarint(rec, -1)            // key: null
	rec = binary.AppendVarint(rec, int64(len(v))) // value
	rec = append(rec, v...)
	rec = binary.AppendVarint(rec, 0) // headers
	var records []byte
	records = binary.AppendVarint(records, int64(len(rec)))
	records = append(records, rec...)

	now := time.Now().UnixMilli()
	return segment.AppendBatch(nil, segment.Header{LeaderEpoch: -1, BaseTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, NumRecords: 1}, records)
}

// TestNotLeaderNamesTheLeader (KIP-951): a Produce (v10+) or Fetch (v16+)
// sent to a broker that does not lead the partition is answered
// NOT_LEADER_OR_FOLLOWER with the partition's leader and epoch
// (CurrentLeader) and that leader's endpoint (NodeEndpoints), the same
// that Metadata gives, so a client can move the partition without a
// metadata round trip. A broker that leads answers the same requests.
func TestNotLeaderNamesTheLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := readyQuorum(t, ctx, 3)
	if resp, err := adm.CreateTopic(ctx, 3, 1, nil, "hints"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	// Every broker knows every leader.
	var leader, epoch int32
	var brokers map[int32]kadm.BrokerDetail
	testwait.For(t, 30*time.Second, func() bool {
		ok := true
		for node := int32(1); node <= 3 && ok; node++ {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr("hints")
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl.Broker(int(node)))
			if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
				ok = false
				break
			}
			for _, p := range resp.Topics[0].Partitions {
				if p.ErrorCode != 0 || p.Leader < 1 {
					ok = false
				}
				if p.Partition == 0 {
					leader, epoch = p.Leader, p.LeaderEpoch
				}
			}
		}
		return ok
	}, "brokers never agreed on the leaders")
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	brokers = map[int32]kadm.BrokerDetail{}
	for _, b := range md.Brokers {
		brokers[b.NodeID] = b
	}
	other := leader%3 + 1 // a broker that does not lead partition 0

	produce := func(node int32) *kmsg.ProduceResponse {
		t.Helper()
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "hints", md.Topics["hints"].ID // v13+ by ID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = 0, oneRecordBatch([]byte("v"))
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(node)))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version < 10 {
			t.Fatalf("produce v%d: the test needs v10+", resp.Version)
		}
		return resp
	}
	resp := produce(other)
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != kerr.NotLeaderForPartition.Code || sp.CurrentLeader.LeaderID != leader || sp.CurrentLeader.LeaderEpoch != epoch {
		t.Fatalf("produce to broker %d: error %d, current leader %d epoch %d; want NOT_LEADER_OR_FOLLOWER naming %d at epoch %d",
			other, sp.ErrorCode, sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch, leader, epoch)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != leader || resp.Brokers[0].Host != brokers[leader].Host ||
		resp.Brokers[0].Port != brokers[leader].Port {
		t.Fatalf("produce node endpoints %+v, want broker %d at %s:%d", resp.Brokers, leader, brokers[leader].Host, brokers[leader].Port)
	}
	if resp := produce(leader); resp.Topics[0].Partitions[0].ErrorCode != 0 || len(resp.Brokers) != 0 {
		t.Fatalf("produce to the leader: error %d, node endpoints %+v", resp.Topics[0].Partitions[0].ErrorCode, resp.Brokers)
	}

	fetch := func(node, currentEpoch int32) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 0, 1, 1<<20, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "hints"
		ft.TopicID = md.Topics["hints"].ID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 0, 0, 1<<20, currentEpoch
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctx, cl.Broker(int(node)))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Version < 16 {
			t.Fatalf("fetch v%d: the test needs v16+", resp.Version)
		}
		return resp
	}
	fr := fetch(other, epoch)
	fpr := fr.Topics[0].Partitions[0]
	if fpr.ErrorCode != kerr.NotLeaderForPartition.Code || fpr.CurrentLeader.LeaderID != leader || fpr.CurrentLeader.LeaderEpoch != epoch {
		t.Fatalf("fetch from broker %d: error %d, current leader %d epoch %d; want NOT_LEADER_OR_FOLLOWER naming %d at epoch %d",
			other, fpr.ErrorCode, fpr.CurrentLeader.LeaderID, fpr.CurrentLeader.LeaderEpoch, leader, epoch)
	}
	if len(fr.Brokers) != 1 || fr.Brokers[0].NodeID != leader || fr.Brokers[0].Port != brokers[leader].Port {
		t.Fatalf("fetch node endpoints %+v, want broker %d", fr.Brokers, leader)
	}
	// The leader serves it: the record produced above, no hints.
	fr = fetch(leader, epoch)
	if fpr := fr.Topics[0].Partitions[0]; fpr.ErrorCode != 0 || len(fpr.RecordBatches) == 0 || len(fr.Brokers) != 0 ||
		fpr.CurrentLeader.LeaderID != -1 {
		t.Fatalf("fetch from the leader: error %d, %d bytes, current leader %d, node endpoints %+v",
			fpr.ErrorCode, len(fpr.RecordBatches), fpr.CurrentLeader.LeaderID, fr.Brokers)
	}
	// A stale epoch at the leader is fenced; the leader names no other.
	if fpr := fetch(leader, epoch-1).Topics[0].Partitions[0]; fpr.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("fetch with epoch %d from the leader: error %d, want FENCED_LEADER_EPOCH", epoch-1, fpr.ErrorCode)
	}
}
