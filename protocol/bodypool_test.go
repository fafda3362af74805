package protocol

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestPoolClass(t *testing.T) {
	for _, tc := range []struct{ n, class int }{
		{0, -1}, {1, minPoolClass}, {1 << minPoolClass, minPoolClass}, {1<<minPoolClass + 1, minPoolClass + 1},
		{1 << 20, 20}, {1<<20 + 1, 21}, {1 << maxPoolClass, maxPoolClass}, {1<<maxPoolClass + 1, -1},
	} {
		if got := poolClass(tc.n); got != tc.class {
			t.Errorf("poolClass(%d) = %d, want %d", tc.n, got, tc.class)
		}
	}
}

// readPooledBody returns exactly the body's bytes for sizes on each side
// of the class and staging limits, even from a dirtied pool, and reports a
// short body as io.ErrUnexpectedEOF.
func TestReadPooledBody(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 100, 4096, exactAllocBytes - 1, exactAllocBytes, exactAllocBytes + 1, 9 << 20, 1<<maxPoolClass + 3} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(rng.Uint32())
		}
		for round := range 2 { // the second round reuses (dirty) pooled buffers
			r := bufio.NewReaderSize(bytes.NewReader(append(body, 0xEE)), 64<<10)
			got, h, err := readPooledBody(r, n, nil)
			if err != nil {
				t.Fatalf("n=%d round %d: %v", n, round, err)
			}
			if !bytes.Equal(got, body) {
				t.Fatalf("n=%d round %d: body differs", n, round)
			}
			if next, _ := r.ReadByte(); next != 0xEE {
				t.Fatalf("n=%d: read past the body", n)
			}
			for i := range got {
				got[i] = 0x5A // dirty it for the next round
			}
			putBody(h)
		}
		r := bufio.NewReader(bytes.NewReader(body[:n-1]))
		if _, _, err := readPooledBody(r, n, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("n=%d short body: err = %v, want unexpected EOF", n, err)
		}
	}
}

// Produce bodies live in pooled buffers that are reused as soon as the
// response is written: every record read back must be exactly what was
// sent, across pipelined requests of many sizes (some over 1 MiB) on a
// few connections.
func TestProducePooledBodiesIntact(t *testing.T) {
	c := newCluster(t, nil)
	const topic, parts, n = "pooled", 4, 2000
	c.createTopic(topic, parts)
	ctx := testCtx(t)
	prod := c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(n))
	value := func(i int) []byte {
		size := 10 + (i*7919)%3000
		if i%20 == 0 {
			size = 200 << 10 // several per batch: request bodies over 1 MiB
		}
		return bytes.Repeat([]byte(fmt.Sprintf("%06d.", i)), size/7+1)[:size]
	}
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: value(i), Partition: int32(i % parts)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := make(map[int]bool, n)
	for len(seen) < n && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatal(errs)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var i int
			if _, err := fmt.Sscan(string(r.Key), &i); err != nil {
				t.Fatalf("key %q: %v", r.Key, err)
			}
			if !bytes.Equal(r.Value, value(i)) {
				t.Fatalf("record %d: value differs (%d bytes, want %d)", i, len(r.Value), len(value(i)))
			}
			seen[i] = true
		})
	}
	if len(seen) != n {
		t.Fatalf("read %d distinct records, want %d", len(seen), n)
	}
}
