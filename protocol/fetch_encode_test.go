package protocol

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeFetch must produce exactly what kmsg produces, for every version
// served, with small (inlined) and large (referenced) record sets, null and
// empty aborted transactions, topic names or IDs, and the KIP-951 leader
// hints (a partition's CurrentLeader, the response's NodeEndpoints).
func TestEncodeFetchMatchesKmsg(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 3*inlineRecordBytes)
	small := []byte{1, 2, 3}
	r := apis[1]
	for v := r.min; v <= r.max; v++ {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		resp.SessionID = 42
		resp.ErrorCode = 0
		for ti, name := range []string{"alpha", "b"} {
			st := kmsg.NewFetchResponseTopic()
			st.Topic = name
			st.TopicID = [16]byte{byte(ti + 1), 9}
			for pi, rec := range [][]byte{big, small, {}, nil, big} {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition = int32(pi)
				sp.ErrorCode = int16(pi % 2)
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = 100+int64(pi), 90, 3
				sp.PreferredReadReplica = -1
				sp.RecordBatches = rec
				if pi%2 == 0 {
					sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
				}
				if pi == 1 {
					sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = 3, 17
				}
				if pi == 4 {
					a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					a.ProducerID, a.FirstOffset = 5, 6
					sp.AbortedTransactions = append(sp.AbortedTransactions, a)
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if v >= 16 {
			rack := "r1"
			for id, r := range []*string{nil, &rack} {
				nb := kmsg.NewFetchResponseBroker()
				nb.NodeID, nb.Host, nb.Port, nb.Rack = int32(id+2), "host-"+string(rune('a'+id)), 9092+int32(id), r
				resp.Brokers = append(resp.Brokers, nb)
			}
		}
		if !fetchEncodable(resp) {
			t.Fatalf("v%d: not encodable", v)
		}
		p := &pending{corr: 77, key: 1, respFlexible: resp.IsFlexible(), resp: resp}
		want := appendResponse(nil, p)
		var got []byte
		for _, b := range encodeFetch(77, resp) {
			got = append(got, b...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("v%d: encodeFetch differs from kmsg (%d vs %d bytes)", v, len(got), len(want))
		}
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 16
	nb := kmsg.NewFetchResponseBroker()
	nb.UnknownTags.Set(9, []byte{1})
	resp.Brokers = append(resp.Brokers, nb)
	if fetchEncodable(resp) {
		t.Fatal("unknown tags must fall back to kmsg")
	}
}
