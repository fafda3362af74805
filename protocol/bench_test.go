package protocol

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const benchRecordBytes = 1024

// BenchmarkProduce: kgo produces 1 KiB records to one partition through a
// real socket; acks=all (committed), idempotent, no compression.
func BenchmarkProduce(b *testing.B) {
	c := newCluster(b, nil)
	c.createTopic("bench", 1)
	cl := c.client(kgo.DefaultProduceTopic("bench"), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(1<<20))
	value := make([]byte, benchRecordBytes)
	ctx := context.Background()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchRecordBytes)
	b.ResetTimer()
	start := time.Now()
	errs := make(chan error, 1)
	for range b.N {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// BenchmarkFetch: kgo consumes 1 KiB records from one partition through a
// real socket (produced beforehand, outside the timer).
func BenchmarkFetch(b *testing.B) {
	c := newCluster(b, nil)
	c.createTopic("bench", 1)
	prod := c.client(kgo.DefaultProduceTopic("bench"), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(1<<20))
	value := make([]byte, benchRecordBytes)
	ctx := context.Background()
	for range b.N {
		prod.Produce(ctx, &kgo.Record{Value: value}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	cons := c.client(kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))
	b.SetBytes(benchRecordBytes)
	b.ResetTimer()
	start := time.Now()
	got := 0
	deadline, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for got < b.N {
		fs := cons.PollFetches(deadline)
		if deadline.Err() != nil {
			b.Fatalf("consumed %d of %d", got, b.N)
		}
		fs.EachError(func(_ string, _ int32, err error) { b.Fatal(err) })
		got += fs.NumRecords()
	}
	b.ReportMetric(float64(got)/time.Since(start).Seconds(), "records/s")
}
