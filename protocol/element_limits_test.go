package protocol

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCheckElementCounts: the walks count exactly what kmsg encodes, at
// every version of Fetch, OffsetCommit, TxnOffsetCommit and OffsetFetch, and a
// request over the limit is refused.
func TestCheckElementCounts(t *testing.T) {
	const topics, parts = 7, 5
	meta := "m"
	commit := func(v int16) kmsg.Request {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version, r.Group = v, "g"
		for i := 0; i < topics; i++ {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic, rt.TopicID = "topic", [16]byte{1}
			for j := 0; j < parts; j++ {
				p := kmsg.NewOffsetCommitRequestTopicPartition()
				p.Metadata = &meta
				rt.Partitions = append(rt.Partitions, p)
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	txn := func(v int16) kmsg.Request {
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.Version, r.TransactionalID, r.Group = v, "tx", "g"
		for i := 0; i < topics; i++ {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic, rt.TopicID = "topic", [16]byte{1}
			for j := 0; j < parts; j++ {
				p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
				p.Metadata = &meta
				rt.Partitions = append(rt.Partitions, p)
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	fetch := func(v int16) kmsg.Request {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version, r.Group = v, "g"
		if v >= 8 {
			for g := 0; g < 2; g++ {
				rg := kmsg.NewOffsetFetchRequestGroup()
				rg.Group = "g"
				for i := 0; i < topics; i++ {
					rt := kmsg.NewOffsetFetchRequestGroupTopic()
					rt.Topic, rt.TopicID = "topic", [16]byte{1}
					rt.Partitions = make([]int32, parts)
					rg.Topics = append(rg.Topics, rt)
				}
				r.Groups = append(r.Groups, rg)
			}
			return r
		}
		for i := 0; i < topics; i++ {
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic = "topic"
			rt.Partitions = make([]int32, parts)
			r.Topics = append(r.Topics, rt)
		}
		return r
	}
	consume := func(v int16) kmsg.Request {
		r := kmsg.NewPtrFetchRequest()
		r.Version = v
		for i := 0; i < topics; i++ {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "topic", [16]byte{1}
			for j := 0; j < parts; j++ {
				p := kmsg.NewFetchRequestTopicPartition()
				if j == 0 {
					p.ReplicaDirectoryID = [16]byte{2} // a tagged field (v17+)
				}
				rt.Partitions = append(rt.Partitions, p)
			}
			r.Topics = append(r.Topics, rt)
		}
		for i := 0; i < 3; i++ {
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.TopicID = "gone", [16]byte{3}
			ft.Partitions = make([]int32, parts)
			r.ForgottenTopics = append(r.ForgottenTopics, ft)
		}
		return r
	}
	for _, c := range []struct {
		key   int16
		build func(int16) kmsg.Request
	}{{8, commit}, {28, txn}, {9, fetch}, {1, consume}} {
		maxV := c.build(0).MaxVersion()
		for v := int16(0); v <= maxV; v++ {
			req := c.build(v)
			body := req.AppendTo(nil)
			want := topics * parts
			if c.key == 9 && v >= 8 {
				want = 2 * (1 + topics*parts)
			}
			if c.key == 1 && v >= 7 {
				want += 3 * parts
			}
			if err := checkElementCounts(c.key, v, body, want); err != nil {
				t.Fatalf("key %d v%d: %d elements refused at a limit of %d: %v", c.key, v, want, want, err)
			}
			if err := checkElementCounts(c.key, v, body, want-1); !errors.Is(err, ErrTooManyElements) {
				t.Fatalf("key %d v%d: %d elements accepted at a limit of %d", c.key, v, want, want-1)
			}
		}
	}
}
