package log

import (
	"bytes"
	"errors"
	"testing"

	"github.com/strata-io/strata/segment"
)

// A follower that appends the leader's stamped batches with AppendReplica
// holds byte-identical segments, producer state and epochs, and accepts
// batches the leader accepted even where its own checks would differ.
func TestAppendReplicaMirrorsTheLeader(t *testing.T) {
	c := newClock()
	lm, fm := testManager(t, segment.NewMemFS(), c), testManager(t, segment.NewMemFS(), c)
	defer lm.Close()
	defer fm.Close()
	cfg := Config{SegmentBytes: 2048, IndexIntervalBytes: 256, MessageTimestampType: "LogAppendTime"}
	leader, _ := lm.Open(tp0, cfg)
	follower, _ := fm.Open(tp0, cfg)
	for i := 0; i < 60; i++ {
		b := makeBatch(t, spec{n: 2, valueLen: 30, ts: 5, pid: 42, epoch: 0, seq: int32(2 * i)})
		res, err := leader.Append(b, int32(1+i/20))
		if err != nil {
			t.Fatal(err)
		}
		stored, err := leader.BatchAt(res.BaseOffset)
		if err != nil {
			t.Fatal(err)
		}
		c.add(1000) // the follower's clock differs: nothing may be re-stamped
		fres, err := follower.AppendReplica(stored)
		if err != nil {
			t.Fatal(err)
		}
		if fres.BaseOffset != res.BaseOffset || fres.LastOffset != res.LastOffset {
			t.Fatalf("replica offsets %+v, leader %+v", fres, res)
		}
	}
	leader.Commit(120)
	follower.Commit(120)
	lr, _ := leader.Read(0, 1<<20)
	fr, _ := follower.Read(0, 1<<20)
	for off := int64(0); off < 120; off += 2 {
		lb, err1 := leader.BatchAt(off)
		fb, err2 := follower.BatchAt(off)
		if err1 != nil || err2 != nil || !bytes.Equal(lb, fb) {
			t.Fatalf("batch at %d differs (%v %v)", off, err1, err2)
		}
	}
	if len(lr.Records) == 0 || len(fr.Records) != len(lr.Records) {
		t.Fatalf("reads differ: %d vs %d bytes", len(lr.Records), len(fr.Records))
	}
	if e, o := follower.EndOffsetForEpoch(2); e != 2 || o != 80 {
		t.Fatalf("follower epoch cache: epoch 2 ends at %d (%d)", o, e)
	}
	if lp, fp := leader.Producers(), follower.Producers(); len(fp) != 1 || fp[0] != lp[0] {
		t.Fatalf("producer state %+v vs %+v", fp, lp)
	}
	// The next sequence is accepted by both; a batch not at the log end,
	// or one cut short, is refused.
	next := makeBatch(t, spec{n: 1, valueLen: 1, pid: 42, seq: 120})
	res, err := leader.Append(next, 3)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := leader.BatchAt(res.BaseOffset)
	segment.SetBaseOffset(stored, 7)
	if _, err := follower.AppendReplica(stored); !errors.Is(err, ErrNotAtLogEnd) {
		t.Fatalf("misplaced batch: %v", err)
	}
	segment.SetBaseOffset(stored, 120)
	if _, err := follower.AppendReplica(stored[:len(stored)-1]); err == nil {
		t.Fatal("a cut batch was accepted")
	}
	if _, err := follower.AppendReplica(stored); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.BatchAt(121); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("BatchAt past the end: %v", err)
	}
	if _, err := leader.BatchAt(1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("BatchAt inside a batch: %v", err)
	}
}
