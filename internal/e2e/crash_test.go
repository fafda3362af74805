package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testwait"
)

type ackedRecord struct {
	partition int32
	offset    int64
	value     string
}

// TestCrashMidProduce SIGKILLs the broker in the middle of an acks=all
// produce stream, restarts it, and checks that every acknowledged record is
// there, in order, at its acknowledged offset, and that the partitions take
// new writes -- several rounds on the same data directory.
func TestCrashMidProduce(t *testing.T) {
	rng := rand.New(rand.NewSource(testwait.Seed(t)))

	const topic, partitions, rounds = "crash", 4, 4
	b := startBroker(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adm := kadm.NewClient(b.client())
	if resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}

	var mu sync.Mutex
	var acked []ackedRecord
	for round := 0; round < rounds; round++ {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(b.addr),
			kgo.DefaultProduceTopic(topic),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordDeliveryTimeout(3*time.Second),
			kgo.ProducerLinger(time.Duration(rng.Intn(3))*time.Millisecond),
		)
		if err != nil {
			t.Fatal(err)
		}
		// rctx unblocks a Produce waiting for buffer space once the broker
		// is gone (kgo blocks Produce while MaxBufferedRecords are pending).
		rctx, rcancel := context.WithCancel(ctx)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("round%d-%d", round, n)
				cl.Produce(rctx, &kgo.Record{Key: []byte(fmt.Sprint(n % 97)), Value: []byte(v)}, func(r *kgo.Record, err error) {
					if err != nil {
						return
					}
					mu.Lock()
					acked = append(acked, ackedRecord{r.Partition, r.Offset, string(r.Value)})
					mu.Unlock()
				})
			}
		}()
		time.Sleep(time.Duration(300+rng.Intn(700)) * time.Millisecond)
		b.kill() // mid-stream: requests are in flight
		close(stop)
		rcancel()
		<-done
		cl.Close() // fails whatever was not acknowledged
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		t.Logf("round %d: %d records acknowledged so far", round, n)
		b.start()
		checkAcked(t, ctx, b, topic, partitions, acked)
	}

	// The partitions still take writes after the last crash.
	cl := b.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	for p := int32(0); p < partitions; p++ {
		r := &kgo.Record{Partition: p, Value: []byte("after")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce after crashes to partition %d: %v", p, err)
		}
	}
}

// checkAcked reads every partition from the start and checks offsets are
// dense and every acknowledged record sits at its acknowledged offset.
func checkAcked(t *testing.T, ctx context.Context, b *broker, topic string, partitions int32, acked []ackedRecord) {
	t.Helper()
	adm := kadm.NewClient(b.client())
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	parts := map[int32]kgo.Offset{}
	want := map[int32]int64{}
	var total int64
	for p := int32(0); p < partitions; p++ {
		o, ok := ends.Lookup(topic, p)
		if !ok || o.Err != nil {
			t.Fatalf("end offset of %d: %v", p, o.Err)
		}
		want[p] = o.Offset
		total += o.Offset
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl := b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	stored := map[int32][]string{}
	var got int64
	deadline := time.Now().Add(time.Minute)
	for got < total && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if int64(len(stored[r.Partition])) != r.Offset {
				t.Fatalf("partition %d: record at offset %d after %d records (gap or reorder)", r.Partition, r.Offset, len(stored[r.Partition]))
			}
			stored[r.Partition] = append(stored[r.Partition], string(r.Value))
			got++
		})
	}
	if got != total {
		t.Fatalf("read %d records, end offsets say %d", got, total)
	}
	for _, a := range acked {
		vs := stored[a.partition]
		if a.offset >= int64(len(vs)) {
			t.Fatalf("acknowledged record %q at %d/%d is lost (partition holds %d records)", a.value, a.partition, a.offset, len(vs))
		}
		if vs[a.offset] != a.value {
			t.Fatalf("acknowledged record %q at %d/%d reads back as %q", a.value, a.partition, a.offset, vs[a.offset])
		}
	}
	seen := map[string]bool{}
	for p, vs := range stored {
		for o, v := range vs {
			if seen[v] {
				t.Fatalf("record %q stored twice (again at %d/%d)", v, p, o)
			}
			seen[v] = true
		}
	}
}
