package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-io/strata/segment"
)

// The round-trip workload: 3 topics x 8 partitions, every partition written
// by one of five producers, each with its own codec, records from empty to
// 1 MiB. Every record's key and value are a pure function of (topic,
// partition, sequence), so the reader regenerates what it expects instead
// of keeping a copy.
const (
	rtTopics     = 3
	rtPartitions = 8
	rtRecords    = 1_000_008 // >= 1,000,000, divisible by 24
	rtPerPart    = rtRecords / (rtTopics * rtPartitions)
	rtMaxValue   = 1 << 20
)

var rtCodecs = []struct {
	name  string
	codec kgo.CompressionCodec
	attr  int16 // the batch attributes' compression bits for this codec
}{
	{"none", kgo.NoCompression(), 0},
	{"gzip", kgo.GzipCompression(), 1},
	{"snappy", kgo.SnappyCompression(), 2},
	{"lz4", kgo.Lz4Compression(), 3},
	{"zstd", kgo.ZstdCompression(), 4},
}

func rtTopic(i int) string { return fmt.Sprintf("roundtrip-%d", i) }

// rtProducer says which producer (and so which codec) owns a partition.
func rtProducer(topic, partition int) int { return (topic*rtPartitions + partition) % len(rtCodecs) }

// rtSize spreads sizes: mostly small, some empty, some tens of KiB, and a
// couple of 1 MiB values per partition.
func rtSize(seq int) int {
	switch {
	case seq%20000 == 19999:
		return rtMaxValue
	case seq%1000 == 500:
		return 10<<10 + (seq*7919)%(90<<10)
	case seq%50 == 0:
		return 0
	default:
		return (seq * 131) % 200
	}
}

// rtValue regenerates the value of one record.
func rtValue(topic, partition, seq int) []byte {
	n := rtSize(seq)
	v := make([]byte, n)
	x := uint64(topic+1)*0x9E3779B97F4A7C15 ^ uint64(partition+1)*0xC2B2AE3D27D4EB4F ^ uint64(seq+1)*0x165667B19E3779F9
	for i := 0; i < n; i += 8 {
		if i%32 == 0 { // each word repeats four times: compressible, as real data is
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], x)
		copy(v[i:], w[:])
	}
	if n >= 12 {
		binary.BigEndian.PutUint32(v[0:], uint32(topic))
		binary.BigEndian.PutUint32(v[4:], uint32(partition))
		binary.BigEndian.PutUint32(v[8:], uint32(seq))
	}
	return v
}

func rtKey(seq int) []byte {
	if seq%2 == 0 {
		return nil
	}
	return []byte(fmt.Sprintf("k%d", seq))
}

// TestRoundTripMillionRecords produces >= 1,000,000 records with franz-go
// over 127.0.0.1 in every codec, reads them back in order and byte-identical,
// restarts the broker and reads them all again.
func TestRoundTripMillionRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("long: 1,000,000 records")
	}
	b := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	adm := kadm.NewClient(b.client())
	for i := 0; i < rtTopics; i++ {
		resp, err := adm.CreateTopic(ctx, rtPartitions, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("2097152")}, rtTopic(i))
		if err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", rtTopic(i), err, resp.Err)
		}
	}

	start := time.Now()
	var produced, bytesOut atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for p := range rtCodecs {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			cl := b.client(
				kgo.DefaultProduceTopic(rtTopic(0)),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerBatchCompression(rtCodecs[p].codec),
				kgo.ProducerBatchMaxBytes(2<<20),
				kgo.RequiredAcks(kgo.AllISRAcks()),
			)
			type owned struct{ topic, partition int }
			var mine []owned
			for ti := 0; ti < rtTopics; ti++ {
				for pi := 0; pi < rtPartitions; pi++ {
					if rtProducer(ti, pi) == p {
						mine = append(mine, owned{ti, pi})
					}
				}
			}
			var failed atomic.Bool
			for seq := 0; seq < rtPerPart && !failed.Load(); seq++ {
				for _, o := range mine {
					r := &kgo.Record{Topic: rtTopic(o.topic), Partition: int32(o.partition), Key: rtKey(seq), Value: rtValue(o.topic, o.partition, seq)}
					want := int64(seq)
					cl.Produce(ctx, r, func(r *kgo.Record, err error) {
						if err == nil && r.Offset != want {
							err = fmt.Errorf("%s/%d: seq %d acknowledged at offset %d", r.Topic, r.Partition, want, r.Offset)
						}
						if err != nil {
							if failed.CompareAndSwap(false, true) {
								errs <- err
							}
							return
						}
						produced.Add(1)
						bytesOut.Add(int64(len(r.Value) + len(r.Key)))
					})
				}
			}
			if err := cl.Flush(ctx); err != nil {
				errs <- err
			}
		}(p)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	el := time.Since(start)
	t.Logf("produced %d records, %.1f MB in %v (%.0f records/s, %.1f MB/s)", produced.Load(), float64(bytesOut.Load())/1e6, el.Round(time.Millisecond),
		float64(produced.Load())/el.Seconds(), float64(bytesOut.Load())/1e6/el.Seconds())
	if produced.Load() != rtRecords {
		t.Fatalf("produced %d records, want %d", produced.Load(), rtRecords)
	}

	rtCheckCodecs(t, ctx, b)
	rtConsumeAll(t, ctx, b)
	b.restart()
	rtConsumeAll(t, ctx, b)
	rtCheckCodecs(t, ctx, b)
}

// rtConsumeAll reads every partition from the start and checks each record:
// offset == sequence, key and value regenerated byte for byte.
func rtConsumeAll(t *testing.T, ctx context.Context, b *broker) {
	t.Helper()
	start := time.Now()
	parts := map[string]map[int32]kgo.Offset{}
	for ti := 0; ti < rtTopics; ti++ {
		parts[rtTopic(ti)] = map[int32]kgo.Offset{}
		for pi := 0; pi < rtPartitions; pi++ {
			parts[rtTopic(ti)][int32(pi)] = kgo.NewOffset().AtStart()
		}
	}
	cl := b.client(kgo.ConsumePartitions(parts), kgo.FetchMaxPartitionBytes(4<<20))
	next := map[string][]int64{}
	for ti := 0; ti < rtTopics; ti++ {
		next[rtTopic(ti)] = make([]int64, rtPartitions)
	}
	var got, nbytes int64
	deadline := time.Now().Add(5 * time.Minute)
	for got < rtRecords {
		if time.Now().After(deadline) {
			t.Fatalf("consumed %d of %d records before the deadline", got, rtRecords)
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		for _, fe := range fs.Errors() {
			if fe.Err != context.DeadlineExceeded {
				t.Fatalf("fetch %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
			}
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			if bad != nil {
				return
			}
			var ti int
			fmt.Sscanf(r.Topic, "roundtrip-%d", &ti)
			want := next[r.Topic][r.Partition]
			if r.Offset != want {
				bad = fmt.Errorf("%s/%d: got offset %d, want %d (gap or reorder)", r.Topic, r.Partition, r.Offset, want)
				return
			}
			seq := int(r.Offset)
			if !bytes.Equal(r.Key, rtKey(seq)) || !bytes.Equal(r.Value, rtValue(ti, int(r.Partition), seq)) {
				bad = fmt.Errorf("%s/%d offset %d: key/value differ from what was produced (value len %d, want %d)", r.Topic, r.Partition, r.Offset, len(r.Value), rtSize(seq))
				return
			}
			next[r.Topic][r.Partition] = want + 1
			got++
			nbytes += int64(len(r.Value) + len(r.Key))
		})
		if bad != nil {
			t.Fatal(bad)
		}
	}
	for topic, ps := range next {
		for p, n := range ps {
			if n != rtPerPart {
				t.Fatalf("%s/%d: read %d records, want %d", topic, p, n, rtPerPart)
			}
		}
	}
	el := time.Since(start)
	t.Logf("consumed %d records, %.1f MB in %v (%.0f records/s, %.1f MB/s)", got, float64(nbytes)/1e6, el.Round(time.Millisecond), float64(got)/el.Seconds(), float64(nbytes)/1e6/el.Seconds())
}

// rtCheckCodecs fetches the first batch of every partition raw and checks it
// is stored with the codec its producer used: batches are kept as sent.
func rtCheckCodecs(t *testing.T, ctx context.Context, b *broker) {
	t.Helper()
	// Pin the versions at Kafka 3.0's (Fetch v12, topics by name): kgo
	// otherwise raises the request to the broker's maximum.
	cl := b.client(kgo.MaxVersions(kversion.V3_0_0()))
	for ti := 0; ti < rtTopics; ti++ {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 11
		req.MaxWaitMillis = 100
		req.MaxBytes = 64 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = rtTopic(ti)
		for pi := 0; pi < rtPartitions; pi++ {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = int32(pi)
			rp.PartitionMaxBytes = 4 << 20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, rtp := range resp.Topics {
			for _, rp := range rtp.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("raw fetch %s/%d: error code %d", rtp.Topic, rp.Partition, rp.ErrorCode)
				}
				// kgo sends a batch uncompressed when compression would not
				// shrink it, so require the producer's codec on at least one
				// batch and no other codec on any.
				want := rtCodecs[rtProducer(ti, int(rp.Partition))]
				var withCodec int
				for rest := rp.RecordBatches; len(rest) > 0; {
					var batch kmsg.RecordBatch
					if err := batch.ReadFrom(rest); err != nil {
						if len(rest) < segment.HeaderSize || int(batch.Length)+segment.LogOverhead > len(rest) {
							break // a partial batch at the end of the response is allowed
						}
						t.Fatalf("raw fetch %s/%d: %v", rtp.Topic, rp.Partition, err)
					}
					switch batch.Attributes & segment.AttrCompressionMask {
					case want.attr:
						withCodec++
					case 0:
					default:
						t.Fatalf("%s/%d stored with codec bits %d, producer used %s", rtp.Topic, rp.Partition, batch.Attributes&segment.AttrCompressionMask, want.name)
					}
					rest = rest[segment.LogOverhead+int(batch.Length):]
				}
				if withCodec == 0 {
					t.Fatalf("%s/%d: no batch stored with the producer's codec %s", rtp.Topic, rp.Partition, want.name)
				}
			}
		}
	}
}
