package log

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/strata-io/strata/segment"
)

func TestMarkerOfReadsCoordinatorEpoch(t *testing.T) {
	for _, ce := range []int32{0, 7, 1 << 30} {
		m := markerOf(MarkerBatch(7, 3, true, ce, 1000))
		if m.typ != controlCommit || m.coordEpoch != ce {
			t.Fatalf("marker %+v, want commit of coordinator epoch %d", m, ce)
		}
	}
	if m := markerOf(txnData(t, 1, 0, 0, 1)); m != notMarker {
		t.Fatalf("data batch read as marker %+v", m)
	}
	// Truncated or garbage control batches never panic and are no marker.
	b := MarkerBatch(7, 3, false, 5, 1000)
	for n := 0; n < len(b); n++ {
		markerOf(b[:n])
	}
}

// TestStaleCoordinatorMarkerFenced: a marker from a coordinator older than
// the one that wrote the producer's last marker is refused with
// ErrTransactionCoordinatorFenced (Kafka's TRANSACTION_COORDINATOR_FENCED)
// and changes nothing, after a restart too (replayed from the segments,
// and from a producer snapshot). The fault harness found why it matters:
// a deposed coordinator's retried commit marker landed after the new
// coordinator's, ended the producer's next transaction (KIP-890 part 2:
// both carry the bumped epoch), and read_committed returned its records
// before their commit.
func TestStaleCoordinatorMarkerFenced(t *testing.T) {
	fsys := segment.NewMemFS()
	c := newClock()
	m := testManager(t, fsys, c)
	tp := TopicPartition{Topic: "t", Partition: 0}
	p, err := m.Open(tp, Config{})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p, txnData(t, 5, 1, 0, 2))        // 0-1
	mustAppend(t, p, MarkerBatch(5, 1, true, 7, 1)) // 2: commit by coordinator epoch 7
	mustAppend(t, p, txnData(t, 5, 1, 2, 1))        // 3: the next transaction
	stale := func(p *Partition, when string) {
		t.Helper()
		before := p.Offsets()
		_, err := p.Append(MarkerBatch(5, 1, true, 6, 1), 0)
		if !errors.Is(err, ErrTransactionCoordinatorFenced) {
			t.Fatalf("%s: stale marker: %v, want ErrTransactionCoordinatorFenced", when, err)
		}
		if after := p.Offsets(); after != before {
			t.Fatalf("%s: a refused marker changed the offsets: %+v -> %+v", when, before, after)
		}
		if got := p.Offsets().LastStable; got != 3 {
			t.Fatalf("%s: LSO %d, want 3 (the next transaction stays open)", when, got)
		}
	}
	stale(p, "live")

	// Replayed from the segments.
	m.Close()
	m = testManager(t, fsys, c)
	if p, err = m.Open(tp, Config{}); err != nil {
		t.Fatal(err)
	}
	stale(p, "reopened")

	// From a producer snapshot (written at roll).
	if err := p.Roll(); err != nil {
		t.Fatal(err)
	}
	m.Close()
	m = testManager(t, fsys, c)
	if p, err = m.Open(tp, Config{}); err != nil {
		t.Fatal(err)
	}
	stale(p, "from a snapshot")

	// The same coordinator, or a newer one, ends the transaction.
	mustAppend(t, p, MarkerBatch(5, 1, false, 8, 1))
	if got := p.Offsets().LastStable; got != p.Offsets().HighWatermark {
		t.Fatalf("LSO %d after the newer coordinator's abort, high watermark %d", got, p.Offsets().HighWatermark)
	}
}

func TestSnapshotKeepsCoordinatorEpoch(t *testing.T) {
	ps := newProducerState()
	ps.m[1] = &producerEntry{epoch: 3, txnFirst: -1, coordEpoch: 9}
	ps.m[2] = &producerEntry{epoch: 0, txnFirst: 4, coordEpoch: -1}
	got, err := decodeSnapshot(encodeSnapshot(ps))
	if err != nil {
		t.Fatal(err)
	}
	if got.m[1].coordEpoch != 9 || got.m[2].coordEpoch != -1 {
		t.Fatalf("coordinator epochs %d, %d; want 9, -1", got.m[1].coordEpoch, got.m[2].coordEpoch)
	}
}

// TestSnapshotVersion2Readable: a snapshot written before coordinator
// epochs were kept (version 2) still opens, every epoch unknown (-1).
func TestSnapshotVersion2Readable(t *testing.T) {
	ps := newProducerState()
	ps.m[1] = &producerEntry{epoch: 3, lastOff: 20, txnFirst: 12, coordEpoch: 9, batches: []batchMeta{{1, 2, 10, 11, 5}}}
	b := encodeSnapshot(ps)
	// Drop the entry's coordinator epoch (after producer id, epoch,
	// lastTs, lastOff, txnFirst) and mark it version 2.
	at := snapHeaderSize + 8 + 2 + 8 + 8 + 8
	v2 := append(append([]byte(nil), b[:at]...), b[at+4:]...)
	binary.BigEndian.PutUint16(v2[4:], 2)
	binary.BigEndian.PutUint32(v2[6:], crc32.Checksum(v2[10:], castagnoli))
	got, err := decodeSnapshot(v2)
	if err != nil {
		t.Fatal(err)
	}
	e := got.m[1]
	if e.coordEpoch != -1 || e.txnFirst != 12 || e.lastOff != 20 || len(e.batches) != 1 || e.batches[0].lastOff != 11 {
		t.Fatalf("version 2 entry %+v", e)
	}
}
