package replication

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication/internal/raftharness"
	"github.com/strata-io/strata/replication/raftconf"
	"github.com/strata-io/strata/replication/raftstore"
	"github.com/strata-io/strata/segment"
)

// partitionCluster runs one partition group on three nodes, each over a
// real log.Partition (segments on disk, t.TempDir) through partitionStore.
type partitionCluster struct {
	h      *raftharness.Harness
	parts  []*log.Partition
	stores []*partitionStore
}

func newPartitionCluster(t *testing.T) *partitionCluster { return newPartitionClusterN(t, 3) }

func newPartitionClusterN(t *testing.T, nodes int) *partitionCluster {
	t.Helper()
	return newPartitionClusterT(t, nodes, raftconf.Timing{}, 4096)
}

// newPartitionClusterT runs nodes replicas with the given raft timing and
// segment.bytes.
func newPartitionClusterT(t *testing.T, nodes int, timing raftconf.Timing, segmentBytes int64) *partitionCluster {
	t.Helper()
	pc := &partitionCluster{parts: make([]*log.Partition, nodes), stores: make([]*partitionStore, nodes)}
	fsms := make([]*partitionFSM, nodes)
	dirs := make([]string, nodes)
	for i := range dirs {
		dirs[i] = t.TempDir()
		m, err := log.OpenManager(log.ManagerOptions{Dir: dirs[i], Logger: quietLogger(), UseHighWatermarkCheckpoint: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		if pc.parts[i], err = m.Open(log.TopicPartition{Topic: "t", Partition: 0}, log.Config{SegmentBytes: segmentBytes}); err != nil {
			t.Fatal(err)
		}
	}
	pc.h = raftharness.Start(t, raftharness.Config{
		Nodes:  nodes,
		Timing: timing,
		FSM: func(node, group int) raft.FSM {
			fsms[node] = &partitionFSM{}
			return fsms[node]
		},
		Stores: func(node, group int) (raft.LogStore, raft.StableStore, raft.SnapshotStore, error) {
			fsys, dir := segment.OSFS{}, filepath.Join(dirs[node], "__raft", "t-0")
			if err := fsys.MkdirAll(dir); err != nil {
				return nil, nil, nil, err
			}
			store, err := openPartitionStore(fsys, dir, pc.parts[node], 0, 0, quietLogger())
			if err != nil {
				return nil, nil, nil, err
			}
			stable, err := raftstore.OpenStableFile(fsys, dir)
			if err != nil {
				return nil, nil, nil, err
			}
			snaps, err := raftstore.OpenSnapshotStore(fsys, filepath.Join(dir, "snapshots"), 2)
			if err != nil {
				return nil, nil, nil, err
			}
			pc.stores[node] = store
			fsms[node].store = store
			return store, stable, snaps, nil
		},
	})
	return pc
}

// produce proposes one batch on the leader among the nodes given (all when
// none), as Broker.Produce will, and returns the FSM's answer.
func (pc *partitionCluster) produce(t *testing.T, b []byte, among ...int) (log.AppendResult, error) {
	t.Helper()
	leader, err := pc.h.Leader(0, 10*time.Second, among...)
	if err != nil {
		t.Fatal(err)
	}
	f := pc.h.Raft(leader, 0).ApplyLog(raft.Log{Data: append([]byte(nil), b...), Extensions: []byte{extUnstamped}}, 2*time.Second)
	if err := f.Error(); err != nil {
		return log.AppendResult{}, err
	}
	r := f.Response().(partitionResult)
	return r.res, r.err
}

// waitConverged waits until the listed nodes hold byte-identical logs,
// all committed, ending at want (when want >= 0).
func (pc *partitionCluster) waitConverged(t *testing.T, want int64, nodes ...int) {
	t.Helper()
	var why string
	if !testwait.Until(10*time.Second, func() bool {
		var first []byte
		ok := true
		why = ""
		for k, i := range nodes {
			o := pc.parts[i].Offsets()
			if o.HighWatermark != o.LogEnd || (want >= 0 && o.LogEnd != want) {
				ok, why = false, fmt.Sprintf("node %d offsets %+v, want end %d", i, o, want)
				break
			}
			rr, err := pc.parts[i].Read(0, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				first = rr.Records
			} else if !bytes.Equal(rr.Records, first) {
				ok, why = false, fmt.Sprintf("node %d's segments differ from node %d's", i, nodes[0])
				break
			}
		}
		return ok
	}) {
		t.Fatal(why)
	}
}

// Raft's log is the partition's segments: batches are written once, at
// the leader's offsets, identically on every replica; the commit index is
// the high watermark; an isolated leader's uncommitted tail is truncated
// when it rejoins (Raft §5.3, Kafka's leader-epoch truncation, KIP-101).
func TestPartitionGroupReplicatesSegments(t *testing.T) {
	pc := newPartitionCluster(t)
	var next int64
	for i := 0; i < 20; i++ {
		res, err := pc.produce(t, batch(3, -1, -1, -1))
		if err != nil {
			t.Fatal(err)
		}
		if res.BaseOffset != next || res.LastOffset != next+2 {
			t.Fatalf("batch %d at %d..%d, want %d", i, res.BaseOffset, res.LastOffset, next)
		}
		next += 3
	}
	pc.waitConverged(t, next, 0, 1, 2)

	old, _ := pc.h.Leader(0, 5*time.Second)
	epochAt := func(off int64) int32 {
		b, err := pc.parts[0].BatchAt(off)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := segment.ParseHeader(b)
		return h.LeaderEpoch
	}
	oldEpoch := epochAt(0)
	pc.h.Disconnect(old)
	// Appended to the old leader's segment (it leads until its lease
	// runs out), never committed.
	var futures []raft.ApplyFuture
	for i := 0; i < 3; i++ {
		futures = append(futures, pc.h.Raft(old, 0).ApplyLog(raft.Log{Data: batch(1, -1, -1, -1), Extensions: []byte{extUnstamped}}, time.Second))
	}
	for _, f := range futures {
		if f.Error() == nil {
			t.Fatal("an isolated leader committed a batch")
		}
	}
	if o := pc.parts[old].Offsets(); o.LogEnd <= o.HighWatermark {
		t.Fatalf("isolated leader has no uncommitted tail: %+v", o)
	}
	var rest []int
	for i := 0; i < 3; i++ {
		if i != old {
			rest = append(rest, i)
		}
	}
	for i := 0; i < 5; i++ {
		res, err := pc.produce(t, batch(2, -1, -1, -1), rest...)
		if err != nil {
			t.Fatal(err)
		}
		if res.BaseOffset != next {
			t.Fatalf("new leader wrote at %d, want %d", res.BaseOffset, next)
		}
		next += 2
	}
	pc.h.Heal()
	pc.waitConverged(t, next, 0, 1, 2)
	// The term is the leader epoch stamped into each batch.
	if e := epochAt(next - 2); e <= oldEpoch {
		t.Fatalf("leader epoch did not grow with the new term: %d after %d", e, oldEpoch)
	}
	if e, end := pc.parts[old].EndOffsetForEpoch(oldEpoch); e != oldEpoch || end != 60 {
		t.Fatalf("old leader's epoch cache: epoch %d ends at %d, want %d at 60", e, end, oldEpoch)
	}
}

// Producer sequence checks run once, on the leader; a refused or duplicate
// batch takes a raft index (so every replica applies the same thing) but
// no offset.
func TestPartitionGroupIdempotenceOnTheLeader(t *testing.T) {
	pc := newPartitionCluster(t)
	first, err := pc.produce(t, batch(2, 7, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	dup, err := pc.produce(t, batch(2, 7, 0, 0))
	if err != nil || !dup.Duplicate || dup.BaseOffset != first.BaseOffset || dup.LastOffset != first.LastOffset {
		t.Fatalf("retried batch: %+v %v", dup, err)
	}
	if _, err := pc.produce(t, batch(1, 7, 0, 5)); !errors.Is(err, log.ErrOutOfOrderSequence) {
		t.Fatalf("sequence gap: %v", err)
	}
	next, err := pc.produce(t, batch(1, 7, 0, 2))
	if err != nil || next.BaseOffset != 2 {
		t.Fatalf("next in sequence: %+v %v", next, err)
	}
	pc.waitConverged(t, 3, 0, 1, 2)
	for i := range pc.parts {
		if ps := pc.parts[i].Producers(); len(ps) != 1 || ps[0].LastSequence != 2 {
			t.Fatalf("node %d producer state %+v", i, ps)
		}
	}
}

// The raft index -> offset map is derived, never stored: a restarted
// replica rebuilds it from the segments and the side log, and raft sees
// the same entries (Raft §5.3 log matching across restarts).
func TestPartitionStoreRebuildsItsIndexAtRestart(t *testing.T) {
	pc := newPartitionClusterN(t, 1)
	for i := 0; i < 10; i++ {
		if _, err := pc.produce(t, batch(2, 9, 0, int32(2*i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pc.produce(t, batch(1, 9, 0, 99)); !errors.Is(err, log.ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	before := pc.stores[0]
	first, _ := before.FirstIndex()
	last, _ := before.LastIndex()
	var want []raft.Log
	for i := first; i <= last; i++ {
		var e raft.Log
		if err := before.GetLog(i, &e); err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	if err := pc.h.Restart(0); err != nil {
		t.Fatal(err)
	}
	after := pc.stores[0]
	if after == before {
		t.Fatal("store not reopened")
	}
	f2, _ := after.FirstIndex()
	l2, _ := after.LastIndex()
	if f2 != first || l2 < last {
		t.Fatalf("index range %d..%d after restart, was %d..%d", f2, l2, first, last)
	}
	for i, w := range want {
		var e raft.Log
		if err := after.GetLog(first+uint64(i), &e); err != nil {
			t.Fatal(err)
		}
		if e.Index != w.Index || e.Term != w.Term || e.Type != w.Type || !bytes.Equal(e.Data, w.Data) {
			t.Fatalf("entry %d differs after restart: %+v vs %+v", w.Index, e, w)
		}
	}
	res, err := pc.produce(t, batch(1, 9, 0, 20))
	if err != nil || res.BaseOffset != 20 {
		t.Fatalf("produce after restart: %+v %v", res, err)
	}
	pc.waitConverged(t, 21, 0)
}
