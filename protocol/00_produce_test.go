package protocol

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func produceReq(version int16, acks int16, topic string, partition int32, rec []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, rec
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func producePart(t *testing.T, resp kmsg.Response) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	r := resp.(*kmsg.ProduceResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("unexpected response shape %+v", r)
	}
	return r.Topics[0].Partitions[0]
}

// Produce and consume with kgo, once per codec.
func TestProduceFetchRoundTripCodecs(t *testing.T) {
	c := newCluster(t, nil)
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			c.createTopic(topic, 2)
			ctx := testCtx(t)
			prod := c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec))
			const n = 300
			var rs []*kgo.Record
			for i := range n {
				rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(i % 7)), Value: bytes.Repeat([]byte{byte(i)}, 100+i)})
			}
			if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			cons := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
			got := 0
			for got < n {
				fs := cons.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("consumed %d of %d: %v", got, n, err)
				}
				fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
				fs.EachRecord(func(r *kgo.Record) {
					i := int(r.Value[0])
					if len(r.Value) < 100 || r.Value[len(r.Value)-1] != r.Value[0] {
						t.Fatalf("bad record value %d bytes", len(r.Value))
					}
					_ = i
					got++
				})
			}
			if got != n {
				t.Fatalf("consumed %d, want %d", got, n)
			}
		})
	}
}

// Produce v3, the oldest version served (kafka-python 2.0, kafka-go).
func TestProduceV3AndErrors(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("p", 1)
	rc := dialRaw(t, c.addr)

	sp := producePart(t, rc.roundTrip(produceReq(3, 1, "p", 0, makeBatch(batchOpts{}, values(3, "a")...))))
	if sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("v3 produce: %+v", sp)
	}
	sp = producePart(t, rc.roundTrip(produceReq(8, -1, "p", 0, makeBatch(batchOpts{}, values(2, "b")...))))
	if sp.ErrorCode != 0 || sp.BaseOffset != 3 || sp.LogStartOffset != 0 || sp.LogAppendTime != -1 {
		t.Fatalf("v8 produce: %+v", sp)
	}

	cases := []struct {
		name  string
		req   *kmsg.ProduceRequest
		want  int16
		check func(kmsg.ProduceResponseTopicPartition)
	}{
		{"unknown topic", produceReq(9, 1, "nope", 0, makeBatch(batchOpts{}, values(1, "x")...)), kerr.UnknownTopicOrPartition.Code, nil},
		{"unknown partition", produceReq(9, 1, "p", 7, makeBatch(batchOpts{}, values(1, "x")...)), kerr.UnknownTopicOrPartition.Code, nil},
		{"bad acks", produceReq(9, 2, "p", 0, makeBatch(batchOpts{}, values(1, "x")...)), kerr.InvalidRequiredAcks.Code, nil},
		{"two batches", produceReq(9, 1, "p", 0, append(makeBatch(batchOpts{}, values(1, "x")...), makeBatch(batchOpts{}, values(1, "y")...)...)), kerr.InvalidRecord.Code, nil},
		{"truncated", produceReq(9, 1, "p", 0, makeBatch(batchOpts{}, values(1, "x")...)[:40]), kerr.InvalidRecord.Code, nil},
		{"magic 1", produceReq(9, 1, "p", 0, func() []byte { b := makeBatch(batchOpts{}, values(1, "x")...); b[16] = 1; return b }()), kerr.InvalidRecord.Code, nil},
		{"bad crc", produceReq(9, 1, "p", 0, func() []byte { b := makeBatch(batchOpts{}, values(1, "x")...); b[len(b)-1] ^= 0xff; return b }()), kerr.CorruptMessage.Code, nil},
		{"record count lies", produceReq(9, 1, "p", 0, func() []byte {
			b := makeBatch(batchOpts{}, values(2, "x")...)
			b[60] = 3 // three records claimed, two present; CRC still valid
			return recrc(b)
		}()), kerr.InvalidRecord.Code, nil},
		{"control batch", produceReq(9, 1, "p", 0, makeBatch(batchOpts{attrs: 1 << 5}, values(1, "x")...)), kerr.InvalidRecord.Code, nil},
		{"transactional batch without id", produceReq(9, 1, "p", 0, makeBatch(batchOpts{attrs: 1 << 4}, values(1, "x")...)), kerr.TransactionalIDAuthorizationFailed.Code, nil},
		{"zstd below v7", produceReq(6, 1, "p", 0, makeBatch(batchOpts{attrs: 4}, values(1, "x")...)), kerr.UnsupportedCompressionType.Code, nil},
		{"transactional outside a transaction", func() *kmsg.ProduceRequest {
			r := produceReq(9, -1, "p", 0, makeBatch(batchOpts{attrs: 1 << 4}, values(1, "x")...))
			id := "txn"
			r.TransactionID = &id
			return r
		}(), kerr.InvalidTxnState.Code, nil},
		{"too large", produceReq(9, 1, "p", 0, makeBatch(batchOpts{}, recordSpec{value: make([]byte, 2<<20)})), kerr.MessageTooLarge.Code, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp := producePart(t, rc.roundTrip(tc.req))
			if sp.ErrorCode != tc.want {
				t.Fatalf("error %v, want %v (%+v)", kerr.ErrorForCode(sp.ErrorCode), kerr.ErrorForCode(tc.want), sp)
			}
		})
	}
	// Nothing above was written.
	p, err := c.b.Partition("p", 0)
	if err != nil {
		t.Fatal(err)
	}
	if off := p.Offsets(); off.LogEnd != 5 || off.HighWatermark != 5 {
		t.Fatalf("offsets after rejected produces: %+v", off)
	}
}

// acks=0 is processed but not answered: the next response on the
// connection is the next request's.
func TestProduceAcksZeroNoResponse(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("z", 1)
	rc := dialRaw(t, c.addr)
	rc.send(produceReq(9, 0, "z", 0, makeBatch(batchOpts{}, values(4, "z")...)))
	req := apiVersionsReq(3)
	corr := rc.send(req)
	rc.recv(req, corr) // fails if a produce response came first
	p, err := c.b.Partition("z", 0)
	if err != nil {
		t.Fatal(err)
	}
	if off := p.Offsets(); off.HighWatermark != 4 {
		t.Fatalf("acks=0 batch not written: %+v", off)
	}
	// A failed acks=0 produce closes the connection (Kafka does the same).
	rc = dialRaw(t, c.addr)
	rc.send(produceReq(9, 0, "nope", 0, makeBatch(batchOpts{}, values(4, "z")...)))
	rc.expectClosed()
}

// A partition named twice in one request is produced in request order.
func TestProduceSamePartitionTwice(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("twice", 2)
	rc := dialRaw(t, c.addr)
	req := produceReq(9, -1, "twice", 0, makeBatch(batchOpts{}, values(2, "a")...))
	for _, p := range []int32{1, 0} {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, makeBatch(batchOpts{}, values(3, "b")...)
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	r := rc.roundTrip(req).(*kmsg.ProduceResponse)
	ps := r.Topics[0].Partitions
	if ps[0].BaseOffset != 0 || ps[1].BaseOffset != 0 || ps[2].BaseOffset != 2 {
		t.Fatalf("offsets %d %d %d", ps[0].BaseOffset, ps[1].BaseOffset, ps[2].BaseOffset)
	}
}

// A retried idempotent batch is answered with its original offset and no
// error, and written once.
func TestProduceIdempotentDuplicate(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("idem", 1)
	rc := dialRaw(t, c.addr)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version = 4
	ir := rc.roundTrip(init).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(ir.ErrorCode))
	}
	o := batchOpts{producerID: ir.ProducerID, producerEpoch: ir.ProducerEpoch}
	first := producePart(t, rc.roundTrip(produceReq(9, -1, "idem", 0, makeBatch(o, values(3, "i")...))))
	o.baseSequence = 3
	second := producePart(t, rc.roundTrip(produceReq(9, -1, "idem", 0, makeBatch(o, values(2, "j")...))))
	dup := producePart(t, rc.roundTrip(produceReq(9, -1, "idem", 0, makeBatch(o, values(2, "j")...))))
	if first.ErrorCode != 0 || second.ErrorCode != 0 || dup.ErrorCode != 0 {
		t.Fatalf("errors: %d %d %d", first.ErrorCode, second.ErrorCode, dup.ErrorCode)
	}
	if first.BaseOffset != 0 || second.BaseOffset != 3 || dup.BaseOffset != 3 {
		t.Fatalf("offsets: %d %d %d", first.BaseOffset, second.BaseOffset, dup.BaseOffset)
	}
	o.baseSequence = 9
	gap := producePart(t, rc.roundTrip(produceReq(9, -1, "idem", 0, makeBatch(o, values(1, "k")...))))
	if gap.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: %v", kerr.ErrorForCode(gap.ErrorCode))
	}
	p, _ := c.b.Partition("idem", 0)
	if off := p.Offsets(); off.HighWatermark != 5 {
		t.Fatalf("duplicate written: %+v", off)
	}
}

// Pipelined idempotent batches on one connection keep their order.
func TestProducePipelinedOrder(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("pipe", 1)
	rc := dialRaw(t, c.addr)
	init := kmsg.NewPtrInitProducerIDRequest()
	ir := rc.roundTrip(init).(*kmsg.InitProducerIDResponse)
	o := batchOpts{producerID: ir.ProducerID, producerEpoch: ir.ProducerEpoch}
	const n = 50
	var reqs []*kmsg.ProduceRequest
	var buf []byte
	for i := range n {
		o.baseSequence = int32(i * 2)
		req := produceReq(9, -1, "pipe", 0, makeBatch(o, values(2, fmt.Sprint(i))...))
		reqs = append(reqs, req)
		buf = append(buf, rc.fmt.AppendRequest(nil, req, int32(i+1))...)
	}
	go rc.nc.Write(buf)
	for i := range n {
		sp := producePart(t, rc.recv(reqs[i], int32(i+1)))
		if sp.ErrorCode != 0 || sp.BaseOffset != int64(2*i) {
			t.Fatalf("request %d: %v offset %d", i, kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset)
		}
	}
}

// Produce v13 addresses topics by ID.
func TestProduceByTopicID(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("byid", 1)
	ti, _ := c.b.Topic("byid")
	rc := dialRaw(t, c.addr)
	req := produceReq(13, 1, "", 0, makeBatch(batchOpts{}, values(1, "x")...))
	req.Topics[0].TopicID = ti.ID
	if sp := producePart(t, rc.roundTrip(req)); sp.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(sp.ErrorCode))
	}
	req = produceReq(13, 1, "", 0, makeBatch(batchOpts{}, values(1, "x")...))
	req.Topics[0].TopicID = [16]byte{1, 2, 3}
	if sp := producePart(t, rc.roundTrip(req)); sp.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatal(kerr.ErrorForCode(sp.ErrorCode))
	}
}

// A record whose timestamp is too far ahead (message.timestamp.after.max.ms,
// 1 h by default) fails the batch with INVALID_TIMESTAMP, and v8+ names the
// record in RecordErrors; nothing is written.
func TestProduceRecordErrors(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("ts", 1)
	rc := dialRaw(t, c.addr)
	recs := []recordSpec{{value: []byte("ok")}, {value: []byte("ok")}, {value: []byte("late"), tsDelta: 3 * time.Hour.Milliseconds()}}
	sp := producePart(t, rc.roundTrip(produceReq(9, 1, "ts", 0, makeBatch(batchOpts{}, recs...))))
	if sp.ErrorCode != kerr.InvalidTimestamp.Code {
		t.Fatalf("error %v, want INVALID_TIMESTAMP", kerr.ErrorForCode(sp.ErrorCode))
	}
	if len(sp.ErrorRecords) != 1 || sp.ErrorRecords[0].RelativeOffset != 2 {
		t.Fatalf("record errors %+v, want record 2", sp.ErrorRecords)
	}
	// Before v8 there is no RecordErrors field; the code alone says it.
	sp = producePart(t, rc.roundTrip(produceReq(7, 1, "ts", 0, makeBatch(batchOpts{firstTS: time.Now().Add(-400 * 24 * time.Hour).UnixMilli()}, recs[:1]...))))
	if sp.ErrorCode != 0 {
		// before.max.ms is unbounded by default: an old timestamp is fine.
		t.Fatalf("old timestamp rejected: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	p, err := c.b.Partition("ts", 0)
	if err != nil {
		t.Fatal(err)
	}
	if off := p.Offsets(); off.LogEnd != 1 {
		t.Fatalf("log end %d after one good and one rejected batch, want 1", off.LogEnd)
	}
}
