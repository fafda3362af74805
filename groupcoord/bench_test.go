package groupcoord

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/replication"
)

// BenchmarkOffsetCommit measures commits through the coordinator over a
// real single-node broker on disk (no network): each commit is appended
// to __consumer_offsets and committed before it is answered.
//
//	go test ./groupcoord -run '^$' -bench OffsetCommit -benchtime 1s
func BenchmarkOffsetCommit(b *testing.B) {
	for _, parts := range []int{1, 100} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			n := openBenchNode(b)
			if _, err := n.broker.CreateTopic(ctx(b), replication.CreateTopicRequest{Name: "t", NumPartitions: int32(parts), ReplicationFactor: 1}); err != nil {
				b.Fatal(err)
			}
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Version, req.Group, req.Generation = 9, "bench", -1
			rt := kmsg.OffsetCommitRequestTopic{Topic: "t"}
			for p := 0; p < parts; p++ {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: int32(p), LeaderEpoch: -1})
			}
			req.Topics = []kmsg.OffsetCommitRequestTopic{rt}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for p := range rt.Partitions {
					rt.Partitions[p].Offset = int64(i)
				}
				resp, err := n.coord.OffsetCommit(ctx(b), req)
				if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
					b.Fatalf("commit: %v %+v", err, resp)
				}
			}
			b.ReportMetric(float64(b.N*parts)/b.Elapsed().Seconds(), "offsets/s")
		})
	}
}

func openBenchNode(b *testing.B) *testNode {
	b.Helper()
	n := openNodeTB(b, b.TempDir())
	findCoordinatorTB(b, n, "bench")
	return n
}
