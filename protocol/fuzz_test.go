package protocol

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/replication"
)

// FuzzDecodeRequest feeds raw frames (header and body; the size prefix is
// added) through a real connection to a real broker. Properties: the server
// never panics (a handler panic would close the connection, and the race
// detector / test binary would report a crash elsewhere), a fresh
// connection still works afterwards, and the records of an existing topic
// are byte-for-byte unchanged.
//
// CreateTopics and CreatePartitions frames are skipped: mutated partition
// counts would create up to tens of thousands of partition directories per
// input; their decoding is kmsg's and is covered by TestEveryKeyAnswers.
func FuzzDecodeRequest(f *testing.F) {
	c := newCluster(f, func(cfg *replication.BrokerConfig) { cfg.AutoCreateTopics = false })
	c.createTopic("keep", 1)
	c.createTopic("scratch", 1)
	seed := dialRaw(f, c.addr)
	for i := range 3 {
		producePart2(f, seed, produceReq(9, -1, "keep", 0, makeBatch(batchOpts{}, values(5, string(rune('a'+i)))...)))
	}
	snapshot := func() []byte {
		p, err := c.b.Partition("keep", 0)
		if err != nil {
			f.Fatal(err)
		}
		res, err := p.Read(0, 1<<20)
		if err != nil {
			f.Fatal(err)
		}
		return append([]byte(nil), res.Records...)
	}
	before := snapshot()

	fm := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	for _, key := range registered() {
		if key == 19 || key == 37 {
			continue
		}
		r := apis[key]
		for _, v := range []int16{r.min, r.max} {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			switch rq := req.(type) {
			case *kmsg.ProduceRequest:
				rq.Acks = 1
				rq.TimeoutMillis = 1000
				rq.Topics = produceReq(v, 1, "scratch", 0, makeBatch(batchOpts{}, values(2, "f")...)).Topics
			case *kmsg.FetchRequest:
				*rq = *fetchReq(v, "keep", 0, 0)
				rq.MaxWaitMillis = 10
			case *kmsg.MetadataRequest:
				*rq = *metadataReq(v, "keep")
			case *kmsg.ListOffsetsRequest:
				*rq = *listOffsetsReq(v, "keep", 0, -1)
			}
			frame := fm.AppendRequest(nil, req, 1)
			f.Add(frame[4:])
		}
	}
	f.Add([]byte{0, 18, 0, 127, 0, 0, 0, 1, 0xff, 0xff, 0})
	f.Add([]byte{0x7f, 0x7f, 0, 0, 0, 0, 0, 1, 0xff, 0xff})

	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) >= 2 {
			if key := int16(binary.BigEndian.Uint16(frame)); key == 19 || key == 37 {
				return
			}
		}
		nc, err := net.DialTimeout("tcp", c.addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(3 * time.Second))
		nc.Write(binary.BigEndian.AppendUint32(nil, uint32(len(frame))))
		nc.Write(frame)
		var sz [4]byte
		if _, err := nc.Read(sz[:]); err == nil {
			// A response (or its first bytes): fine.
		}
		nc.Close()

		// The server still answers.
		rc := dialRaw(t, c.addr)
		rc.roundTrip(apiVersionsReq(3))
		if n := c.s.panics.Load(); n != 0 {
			t.Fatalf("%d handler panics", n)
		}
		if after := snapshot(); !bytes.Equal(before, after) {
			t.Fatalf("records of an existing topic changed")
		}
	})
}

func producePart2(t testing.TB, rc *rawConn, req *kmsg.ProduceRequest) {
	t.Helper()
	r := rc.roundTrip(req).(*kmsg.ProduceResponse)
	if code := r.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("produce: error %d", code)
	}
}
