package protocol

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// TestMemBudget: queued.max.request.bytes makes a reader wait while the
// bytes held would exceed it, lets one request through when nothing is
// held, and lets a waiter go when its connection closes.
func TestMemBudget(t *testing.T) {
	b := newMemBudget(100)
	never := make(chan struct{})
	if !b.acquire(150, never) {
		t.Fatal("a request larger than the budget is refused with nothing held")
	}
	got := make(chan bool, 1)
	go func() { got <- b.acquire(10, never) }()
	testwait.For(t, 10*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.waiters == 1
	}, "the second acquire never waited")
	select {
	case <-got:
		t.Fatal("acquired past the budget")
	default:
	}
	b.release(150)
	if !<-got {
		t.Fatal("waiter not let through after release")
	}
	if !b.acquire(90, never) {
		t.Fatal("within budget refused")
	}
	done := make(chan struct{})
	go func() { got <- b.acquire(10, done) }()
	close(done)
	if <-got {
		t.Fatal("a closed connection's wait succeeded")
	}
	if n := b.inUse(); n != 100 {
		t.Fatalf("in use %d, want 100", n)
	}
	if !newMemBudget(-1).acquire(1<<40, never) {
		t.Fatal("unbounded budget refused")
	}
}

// produceBody encodes a Produce of topics topics with parts empty
// partitions each.
func produceBody(version int16, topics, parts int) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = -1
	for i := 0; i < topics; i++ {
		t := kmsg.NewProduceRequestTopic()
		t.Topic = "t"
		for p := 0; p < parts; p++ {
			pt := kmsg.NewProduceRequestTopicPartition()
			pt.Partition = int32(p)
			pt.Records = []byte{1, 2, 3}
			t.Partitions = append(t.Partitions, pt)
		}
		req.Topics = append(req.Topics, t)
	}
	return req.AppendTo(nil)
}

// TestCheckProduceCounts: issue 19's Produce naming millions of empty
// topics is refused before kmsg allocates a struct per topic; ordinary
// ones pass, at every request version's encoding.
func TestCheckProduceCounts(t *testing.T) {
	for _, v := range []int16{2, 3, 8, 9, 12, 13} {
		if err := checkProduceCounts(produceBody(v, 3, 4), v, 12); err != nil {
			t.Errorf("v%d: 12 partitions refused at limit 12: %v", v, err)
		}
		if err := checkProduceCounts(produceBody(v, 3, 4), v, 11); !errors.Is(err, ErrTooManyElements) {
			t.Errorf("v%d: 12 partitions at limit 11: %v", v, err)
		}
		if err := checkProduceCounts(produceBody(v, 5000, 0), v, 1000); !errors.Is(err, ErrTooManyElements) {
			t.Errorf("v%d: 5000 empty topics at limit 1000: %v", v, err)
		}
	}
}

// TestReadBodyGrowsFromBytesReceived: a frame that announces 100 MiB and
// sends 10 bytes is charged (and allocated) exactAllocBytes, not 100 MiB,
// for both the pooled (Produce) and plain read paths.
func TestReadBodyGrowsFromBytesReceived(t *testing.T) {
	for _, pooled := range []bool{false, true} {
		var charged int
		charge := func(n int) bool { charged += n; return true }
		r := bufio.NewReader(bytes.NewReader(make([]byte, 10)))
		var err error
		if pooled {
			_, _, err = readPooledBody(r, 100<<20, charge)
		} else {
			_, err = readBody(r, 100<<20, charge)
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("pooled=%v: %v", pooled, err)
		}
		if charged != exactAllocBytes {
			t.Errorf("pooled=%v: charged %d bytes for 10 received, want %d", pooled, charged, exactAllocBytes)
		}
		// A whole 3 MiB body is charged exactly its size.
		charged = 0
		r = bufio.NewReader(bytes.NewReader(make([]byte, 3<<20)))
		if pooled {
			_, _, err = readPooledBody(r, 3<<20, charge)
		} else {
			_, err = readBody(r, 3<<20, charge)
		}
		if err != nil || charged != 3<<20 {
			t.Errorf("pooled=%v: 3 MiB body: charged %d, err %v", pooled, charged, err)
		}
	}
}
