package replication

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/replication/raftconf"
	"github.com/strata-io/strata/segment"
)

// TestMeasurePartitionGroup measures, in one process over the Mux on
// 127.0.0.1 and real segments (so the three "brokers" share this
// machine's cores and disk), produce throughput through a partition group
// of 1 and of 3 replicas, and the time from cutting the leader off to the
// next committed produce with partitionTiming. Opt-in:
//
//	STRATA_RAFT_MEASURE=1 go test ./replication/ -run MeasurePartitionGroup -v
func TestMeasurePartitionGroup(t *testing.T) {
	if os.Getenv("STRATA_RAFT_MEASURE") == "" {
		t.Skip("set STRATA_RAFT_MEASURE=1 to measure")
	}
	const batches, producers, records = 5000, 32, 16 // 16 records of 1 KiB
	rate := func(rf int) float64 {
		pc := newPartitionClusterT(t, rf, raftconf.PartitionTiming, 1<<30)
		leader, err := pc.h.Leader(0, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r := pc.h.Raft(leader, 0)
		b := valueBatch(records, 1024)
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for p := 0; p < producers; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= batches {
					f := r.ApplyLog(raft.Log{Data: append([]byte(nil), b...), Extensions: []byte{extUnstamped}}, 10*time.Second)
					if err := f.Error(); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		mb := float64(batches*len(b)) / (1 << 20) / el.Seconds()
		t.Logf("RF %d: %d batches (%d records, %d B each) in %v: %.0f batches/s, %.1f MB/s", rf, batches, records, len(b), el.Round(time.Millisecond), float64(batches)/el.Seconds(), mb)
		return mb
	}
	rf1 := rate(1)
	rf3 := rate(3)
	t.Logf("RF3/RF1 throughput ratio: %.2f", rf3/rf1)

	pc := newPartitionClusterT(t, 3, raftconf.PartitionTiming, 1<<30)
	old, err := pc.h.Leader(0, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.produce(t, batch(1, -1, -1, -1)); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	pc.h.Disconnect(old)
	var rest []int
	for i := 0; i < 3; i++ {
		if i != old {
			rest = append(rest, i)
		}
	}
	for {
		leader, err := pc.h.Leader(0, 30*time.Second, rest...)
		if err != nil {
			t.Fatal(err)
		}
		f := pc.h.Raft(leader, 0).ApplyLog(raft.Log{Data: batch(1, -1, -1, -1), Extensions: []byte{extUnstamped}}, time.Second)
		if f.Error() == nil {
			break
		}
	}
	t.Logf("leader cut off -> next committed produce: %v (HeartbeatTimeout %v)", time.Since(cut).Round(time.Millisecond), raftconf.PartitionTiming.Heartbeat)
}

// valueBatch is an uncompressed v2 batch of n records with valueLen-byte
// values, built with kmsg.
func valueBatch(n, valueLen int) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), Key: []byte{byte(i)}, Value: make([]byte, valueLen)}
		body := r.AppendTo(nil)[1:]
		r.Length = int32(len(body))
		recs = r.AppendTo(recs)
	}
	rb := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: 1, MaxTimestamp: 1, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: recs}
	rb.Length = int32(segment.HeaderSize - 12 + len(recs))
	b := rb.AppendTo(nil)
	segment.SetCRC(b)
	return b
}
