package protocol

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// encodeShareFetchPieces frames exactly what kmsg does, for every version
// served and every field handleShareFetch sets.
func TestEncodeShareFetchMatchesKmsg(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 3*inlineRecordBytes)
	small := []byte{1, 2, 3}
	msg := "not the leader"
	for v := int16(1); v <= 2; v++ {
		resp := kmsg.NewPtrShareFetchResponse()
		resp.Version = v
		resp.AcquisitionLockTimeoutMillis = 30000
		resp.ThrottleMillis = 5
		for ti := range 2 {
			st := kmsg.NewShareFetchResponseTopic()
			st.TopicID = [16]byte{byte(ti + 1), 9}
			for pi, rec := range [][]byte{big, small, {}, nil, big} {
				sp := kmsg.NewShareFetchResponseTopicPartition()
				sp.Partition = int32(pi)
				sp.Records = rec
				switch pi {
				case 1:
					sp.ErrorCode = 6
					sp.ErrorMessage = &msg
					sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = 3, 17
				case 3:
					sp.AcknowledgeErrorCode = 121
					sp.AcknowledgeErrorMessage = &msg
				}
				for k := range pi {
					ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
					ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = int64(10*k), int64(10*k+4), int16(k+1)
					sp.AcquiredRecords = append(sp.AcquiredRecords, ar)
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		rack := "r1"
		for id, r := range []*string{nil, &rack} {
			ne := kmsg.NewShareFetchResponseNodeEndpoint()
			ne.NodeID, ne.Host, ne.Port, ne.Rack = int32(id+2), "host-"+string(rune('a'+id)), 9092+int32(id), r
			resp.NodeEndpoints = append(resp.NodeEndpoints, ne)
		}
		if !shareFetchEncodable(resp) {
			t.Fatalf("v%d: not encodable", v)
		}
		p := &pending{corr: 77, key: 78, respFlexible: resp.IsFlexible(), resp: resp}
		want := appendResponse(nil, p)
		w, err := encodeShareFetchPieces(77, resp, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for _, b := range w.bufs {
			got = append(got, b...)
		}
		w.free()
		if !bytes.Equal(got, want) {
			t.Fatalf("v%d: encodeShareFetchPieces differs from kmsg (%d vs %d bytes)", v, len(got), len(want))
		}
		if len(got) < 2*2*3*inlineRecordBytes {
			t.Fatalf("v%d: %d bytes: record sets missing", v, len(got))
		}
	}
	resp := kmsg.NewPtrShareFetchResponse()
	resp.Version = 2
	resp.UnknownTags.Set(9, []byte{1})
	if shareFetchEncodable(resp) {
		t.Fatal("a response with unknown tags must go through kmsg")
	}
}
