package protocol

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeFetch must produce exactly what kmsg produces, for every version
// served, with small (inlined) and large (referenced) record sets, null and
// empty aborted transactions, and topic names or IDs.
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
				if pi == 4 {
					a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					a.ProducerID, a.FirstOffset = 5, 6
					sp.AbortedTransactions = append(sp.AbortedTransactions, a)
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
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
	resp.Brokers = append(resp.Brokers, kmsg.NewFetchResponseBroker())
	if fetchEncodable(resp) {
		t.Fatal("node endpoints must fall back to kmsg")
	}
}
