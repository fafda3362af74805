package replication

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"testing/iotest"
	"time"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/replication/raftstore"
	"github.com/strata-io/strata/retention"
	"github.com/strata-io/strata/segment"
	"github.com/strata-io/strata/sharepart"
)

// shareDeltas returns n deltas that exercise every kind of operation:
// groups created, records acquired, acknowledged, released, a group reset
// and one deleted.
func shareDeltas(n int, from int) [][]byte {
	var out [][]byte
	for i := from; i < from+n; i++ {
		var d sharepart.Delta
		g := fmt.Sprintf("g%d", i%3)
		base := int64(i * 10)
		switch i % 5 {
		case 0:
			d.Init(g, base)
			d.Set(g, -1, sharepart.Range{First: base, Last: base + 9, State: sharepart.Acquired, Count: 1, Member: fmt.Sprintf("m%d", i), Deadline: 1_700_000_000_000 + int64(i)})
		case 1:
			d.Init(g, 0)
			d.Set(g, -1,
				sharepart.Range{First: base - 10, Last: base - 6, State: sharepart.Acknowledged, Count: 1},
				sharepart.Range{First: base - 5, Last: base - 1, State: sharepart.Available, Count: 1})
		case 2:
			d.Init(g, 0)
			d.Set(g, base, sharepart.Range{First: base, Last: base + 3, State: sharepart.Archived, Count: 5})
		case 3:
			d.Reset(g, base+100)
		case 4:
			d.Delete(fmt.Sprintf("g%d", (i+1)%3))
			d.Init("keep", 7)
			d.Set("keep", -1, sharepart.Range{First: int64(7 + i), Last: int64(7 + i), State: sharepart.Acquired, Count: int16(i % 7), Member: "k", Deadline: int64(i)})
		}
		out = append(out, d.Encode())
	}
	return out
}

// expectRegistry applies deltas to a fresh registry: what every replica
// must hold.
func expectRegistry(t *testing.T, deltas [][]byte) []byte {
	t.Helper()
	r := sharepart.NewRegistry()
	for _, d := range deltas {
		if err := r.Apply(d); err != nil {
			t.Fatal(err)
		}
	}
	return r.Snapshot()
}

// shareLeader waits for b's ShareLeader of topic-p.
func shareLeader(t *testing.T, b *Broker, topic string, p int32) (*sharepart.Registry, int32) {
	t.Helper()
	var reg *sharepart.Registry
	var epoch int32
	var err error
	if !testwait.Until(20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		reg, epoch, err = b.ShareLeader(ctx, topic, p)
		return err == nil
	}) {
		t.Fatalf("ShareLeader %s-%d: %v", topic, p, err)
	}
	return reg, epoch
}

// One voter: deltas applied through the partition's group, interleaved
// with produced batches (side entries take no offsets), reach the
// registry; leadership, fencing and bad input are refused with the
// broker's errors; a restart rebuilds the registry from the raft log.
func TestShareStateSingleVoter(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir())
	b := startBroker(t, cfg)
	defer func() { b.Close() }()
	if _, err := b.CreateTopic(ctx, CreateTopicRequest{Name: "q", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	applied, refused := shareEntriesApplied.Load(), shareEntriesRefused.Load()
	reg, epoch := shareLeader(t, b, "q", 0)
	if epoch <= 0 {
		t.Fatalf("leader epoch %d", epoch)
	}
	// A snapshot of the empty registry keeps the format of the snapshots
	// before share state (kind 0); deltas after it replay onto it.
	if _, err := b.Produce(ctx, "q", 0, batch(1, -1, -1, -1)); err != nil {
		t.Fatal(err)
	}
	partDir := b.LocalLog("q", 0).Dir()
	if err := b.group(b.LocalLog("q", 0).TopicPartition()).snapshotNow(); err != nil {
		t.Fatal(err)
	}
	deltas := shareDeltas(12, 0)
	for i, d := range deltas {
		var err error
		if i%2 == 0 {
			err = b.ShareApplyAt(ctx, "q", 0, epoch, d)
		} else {
			err = b.ShareApply(ctx, "q", 0, d)
		}
		if err != nil {
			t.Fatalf("delta %d: %v", i, err)
		}
		res, err := b.Produce(ctx, "q", 0, batch(2, -1, -1, -1))
		if err != nil {
			t.Fatal(err)
		}
		if res.BaseOffset != int64(1+2*i) {
			t.Fatalf("batch after %d deltas at offset %d, want %d", i+1, res.BaseOffset, 1+2*i)
		}
	}
	want := expectRegistry(t, deltas)
	if got := reg.Snapshot(); !bytes.Equal(got, want) {
		t.Fatalf("registry after the deltas differs from their application")
	}
	if r2, err := b.ShareRegistry("q", 0); err != nil || r2 != reg {
		t.Fatalf("ShareRegistry: %p %v, ShareLeader's %p", r2, err, reg)
	}

	// Refusals: unknown partitions, a stale epoch, a delta that does not
	// decode (the registry is unchanged by each).
	if _, err := b.ShareRegistry("nope", 0); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", err)
	}
	if err := b.ShareApply(ctx, "q", 1, deltas[0]); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown partition: %v", err)
	}
	if _, _, err := b.ShareLeader(ctx, "q", -1); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Fatalf("partition -1: %v", err)
	}
	if err := b.ShareApplyAt(ctx, "q", 0, epoch+1, deltas[0]); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("epoch %d at %d: %v", epoch+1, epoch, err)
	}
	if err := b.ShareApply(ctx, "q", 0, []byte{0xff, 1, 2}); !errors.Is(err, sharepart.ErrCorrupt) {
		t.Fatalf("corrupt delta: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.ShareApply(cctx, "q", 0, deltas[0]); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if got := reg.Snapshot(); !bytes.Equal(got, want) {
		t.Fatal("a refused delta changed the registry")
	}
	if n, r := shareEntriesApplied.Load()-applied, shareEntriesRefused.Load()-refused; n < int64(len(deltas)) || r < 1 {
		t.Fatalf("metrics: %d entries applied, %d refused; want %d, 1", n, r, len(deltas))
	}
	if off := b.LocalLog("q", 0).Offsets(); off.HighWatermark != int64(1+2*len(deltas)) {
		t.Fatalf("offsets %+v after %d batches", off, 1+len(deltas))
	}

	// A restart replays the side entries into a new registry.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if kind := newestSnapshotKind(t, partDir); kind != snapKindLocal {
		t.Fatalf("snapshot of an empty registry of kind %d", kind)
	}
	b = startBroker(t, cfg)
	reg, _ = shareLeader(t, b, "q", 0)
	if got := reg.Snapshot(); !bytes.Equal(got, want) {
		t.Fatal("registry after a restart differs")
	}
	if off := b.LocalLog("q", 0).Offsets(); off.HighWatermark != int64(1+2*len(deltas)) {
		t.Fatalf("offsets %+v after a restart", off)
	}

	// A snapshot carries the registry; the deltas after it replay on top.
	g := b.group(b.LocalLog("q", 0).TopicPartition())
	if err := g.snapshotNow(); err != nil {
		t.Fatal(err)
	}
	more := shareDeltas(7, len(deltas))
	for _, d := range more {
		if err := b.ShareApply(ctx, "q", 0, d); err != nil {
			t.Fatal(err)
		}
	}
	deltas = append(deltas, more...)
	want = expectRegistry(t, deltas)
	if got := reg.Snapshot(); !bytes.Equal(got, want) {
		t.Fatal("registry after more deltas differs")
	}
	for round := 0; round < 2; round++ {
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if kind := newestSnapshotKind(t, partDir); kind != snapKindLocal|snapKindShare {
			t.Fatalf("round %d: snapshot of a registry with state of kind %d", round, kind)
		}
		b = startBroker(t, cfg)
		reg, _ = shareLeader(t, b, "q", 0)
		if got := reg.Snapshot(); !bytes.Equal(got, want) {
			t.Fatalf("round %d: registry after a restart from a snapshot differs", round)
		}
		// The second round restarts from a snapshot taken with nothing
		// after it.
		if err := b.group(b.LocalLog("q", 0).TopicPartition()).snapshotNow(); err != nil {
			t.Fatal(err)
		}
	}
	if off := b.LocalLog("q", 0).Offsets(); off.HighWatermark != int64(1+2*12) {
		t.Fatalf("offsets %+v after restarts from snapshots", off)
	}
}

// newestSnapshotKind returns the kind byte of the newest snapshot stored in
// a partition's directory (its broker closed).
func newestSnapshotKind(t *testing.T, partDir string) byte {
	t.Helper()
	s, err := raftstore.OpenSnapshotStore(segment.OSFS{}, filepath.Join(partDir, partitionRaftDir, "snapshots"), 2)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := s.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("no snapshot: %v", err)
	}
	_, rc, err := s.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var kind [1]byte
	if _, err := io.ReadFull(rc, kind[:]); err != nil {
		t.Fatal(err)
	}
	return kind[0]
}

// The FSM applies an entry only at the epoch it was computed at, the same
// on every replica.
func TestShareStateFenced(t *testing.T) {
	reg := sharepart.NewRegistry()
	f := &partitionFSM{share: reg}
	var d sharepart.Delta
	d.Init("g", 3)
	entry := func(epoch int32) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(epoch))
		return append(b, d.Encode()...)
	}
	if r := f.applyShareState(5, entry(4)).(partitionResult); !errors.Is(r.err, ErrNotLeader) {
		t.Fatalf("epoch 4 at term 5: %v", r.err)
	}
	if s, _ := reg.Group("g"); s != nil {
		t.Fatal("a fenced delta was applied")
	}
	if r := f.applyShareState(5, []byte{0, 0}).(partitionResult); r.err == nil {
		t.Fatal("short entry applied")
	}
	if r := f.applyShareState(5, entry(5)).(partitionResult); r.err != nil {
		t.Fatal(r.err)
	}
	if r := f.applyShareState(9, entry(noShareFence)).(partitionResult); r.err != nil {
		t.Fatal(r.err)
	}
	if s, _ := reg.Group("g"); s == nil || s.Start != 3 {
		t.Fatalf("state %+v", s)
	}
}

// Snapshot headers with and without a share section round-trip, read a
// byte at a time too; a header written before share state (kind 0 or 1)
// reads as having none; corrupt headers are errors, never a panic or a
// large allocation.
func TestSnapshotShareSection(t *testing.T) {
	reg := sharepart.NewRegistry()
	for _, d := range shareDeltas(9, 0) {
		if err := reg.Apply(d); err != nil {
			t.Fatal(err)
		}
	}
	share := reg.Snapshot()
	for _, h := range []snapPosition{
		{kind: snapKindLocal, end: 40, start: 3},
		{kind: snapKindTransfer, end: 40, start: 3, first: 5},
		{kind: snapKindLocal, end: 40, start: 3, share: share},
		{kind: snapKindTransfer, end: 40, start: 3, first: 5, share: share},
		{kind: snapKindLocal, end: 0, start: 0, share: []byte{}},
	} {
		enc := h.encode()
		if want := byte(h.kind); h.share == nil && enc[0] != want {
			t.Fatalf("%+v: kind byte %d: a snapshot without share state must keep the old format", h, enc[0])
		}
		for _, one := range []bool{false, true} {
			var r io.Reader = bytes.NewReader(append(enc, 0xee)) // a batch byte after the header
			if one {
				r = iotest.OneByteReader(r)
			}
			got, err := readSnapPosition(r)
			if err != nil {
				t.Fatalf("%+v: %v", h, err)
			}
			if got.kind != h.kind || got.end != h.end || got.start != h.start || got.first != h.first ||
				(got.share == nil) != (h.share == nil) || !bytes.Equal(got.share, h.share) {
				t.Fatalf("read %+v, wrote %+v", got, h)
			}
		}
		// The sink parses the header however raft splits the stream.
		for _, step := range []int{1, 3, len(enc)} {
			k := &partitionSink{}
			for i := 0; i < len(enc); i += step {
				if h.kind == snapKindTransfer && i+step >= len(enc) {
					break // the last bytes would begin an install
				}
				if _, err := k.Write(enc[i:min(i+step, len(enc))]); err != nil {
					t.Fatalf("%+v step %d: %v", h, step, err)
				}
			}
			if h.kind == snapKindLocal && (k.hdr == nil || !bytes.Equal(k.hdr.share, h.share) || k.hdr.end != h.end) {
				t.Fatalf("sink parsed %+v from %+v", k.hdr, h)
			}
		}
	}
	// The old format, byte for byte: kind 0, end, start.
	old := append([]byte{0}, binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 12), 2)...)
	if got, err := readSnapPosition(bytes.NewReader(old)); err != nil || got.share != nil || got.end != 12 || got.start != 2 {
		t.Fatalf("old header: %+v %v", got, err)
	}
	full := snapPosition{kind: snapKindLocal, end: 40, start: 3, share: share}.encode()
	for _, bad := range [][]byte{
		{7},
		full[:len(full)-1],
		append([]byte{snapKindShare}, append(old[1:], 0xff, 0xff, 0xff, 0xff)...), // 4 GiB section
		append([]byte{snapKindShare}, append(old[1:], 0, 0, 0, 3, 9, 9, 9)...),    // not a registry: Restore's to refuse
	} {
		h, err := readSnapPosition(bytes.NewReader(bad))
		if err == nil {
			if rerr := sharepart.NewRegistry().Restore(h.share); rerr == nil {
				t.Fatalf("%x read as %+v", bad, h)
			}
		}
	}
}

// shareLeaderOf finds the running broker that leads topic-p's group and
// returns it with its registry and epoch.
func (q *testQuorum) shareLeaderOf(topic string, p int32) (int, *sharepart.Registry, int32) {
	q.t.Helper()
	var last error
	li, reg, epoch := -1, (*sharepart.Registry)(nil), int32(-1)
	if !testwait.Until(30*time.Second, func() bool {
		for i, br := range q.brokers {
			if br == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r, e, err := br.ShareLeader(ctx, topic, p)
			cancel()
			if err == nil {
				li, reg, epoch = i, r, e
				return true
			}
			last = err
		}
		return false
	}) {
		q.t.Fatalf("no share leader of %s-%d: %v", topic, p, last)
	}
	return li, reg, epoch
}

// shareApplyTo applies deltas through whichever broker leads topic-p,
// each followed by a batch when produce is set.
func (q *testQuorum) shareApplyTo(topic string, p int32, deltas [][]byte, produce bool) {
	q.t.Helper()
	for k, d := range deltas {
		deadline := time.Now().Add(30 * time.Second)
		for {
			li, _, epoch := q.shareLeaderOf(topic, p)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := q.brokers[li].ShareApplyAt(ctx, topic, p, epoch, d)
			cancel()
			if err == nil {
				break
			}
			if !errors.Is(err, ErrNotLeader) || time.Now().After(deadline) {
				q.t.Fatalf("delta %d: %v", k, err)
			}
			// Not applied anywhere (fenced or refused before the
			// proposal, or leadership lost before the commit, when the
			// entry may be committed still: deltas set absolute values,
			// applying one twice gives the same state).
		}
		if produce {
			q.produceTo(topic, p, batch(1, -1, -1, -1))
		}
	}
}

// waitShareRegistries waits until every running broker's replica of
// topic-p's share state is want.
func (q *testQuorum) waitShareRegistries(topic string, p int32, want []byte) {
	q.t.Helper()
	// Followers learn of the last commit with the leader's next
	// AppendEntries: on an idle group after CommitTimeout (raftconf/config.go).
	if !testwait.Until(45*time.Second, func() bool {
		for _, br := range q.brokers {
			if br == nil {
				continue
			}
			reg, err := br.ShareRegistry(topic, p)
			if err != nil || !bytes.Equal(reg.Snapshot(), want) {
				return false
			}
		}
		return true
	}) {
		for i, br := range q.brokers {
			if br != nil {
				reg, err := br.ShareRegistry(topic, p)
				if err == nil {
					q.t.Logf("broker %d: groups %v", i+1, reg.Groups())
				} else {
					q.t.Logf("broker %d: %v", i+1, err)
				}
			}
		}
		q.t.Fatalf("share state of %s-%d never converged on every replica", topic, p)
	}
}

func newShareQuorum(t *testing.T, topic string, cfgs map[string]string) *testQuorum {
	t.Helper()
	if testing.Short() {
		t.Skip("a 3-broker cluster: not in -short")
	}
	q := newTestQuorum(t)
	q.controller()
	// The last registration may still be on its way.
	testwait.For(t, 30*time.Second, func() bool { return len(q.brokers[0].Brokers()) == 3 }, "three brokers registered")
	if _, err := q.brokers[0].CreateTopic(context.Background(), CreateTopicRequest{Name: topic, NumPartitions: 1, ReplicationFactor: 3, Configs: cfgs}); err != nil {
		t.Fatal(err)
	}
	// CreateTopic returns once the controller committed the topic; each
	// broker opens its replica when its metadata applies that entry.
	for i, br := range q.brokers {
		testwait.For(t, 30*time.Second, func() bool {
			_, err := br.ShareRegistry(topic, 0)
			return err == nil
		}, "broker %d never opened %s-0", i+1, topic)
	}
	return q
}

// Three replicas: the leader's deltas reach every replica's registry;
// followers refuse to apply; a new leader after the old one stops has
// every committed delta, fences deltas computed at the old epoch, and the
// old leader catches up when it returns.
func TestShareStateReplicated(t *testing.T) {
	q := newShareQuorum(t, "sq", nil)
	ctx := context.Background()
	li, _, epoch := q.shareLeaderOf("sq", 0)
	for i, br := range q.brokers {
		if i == li {
			continue
		}
		if err := br.ShareApply(ctx, "sq", 0, shareDeltas(1, 0)[0]); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("follower %d: %v", i+1, err)
		}
		if _, _, err := br.ShareLeader(ctx, "sq", 0); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("follower %d ShareLeader: %v", i+1, err)
		}
	}
	deltas := shareDeltas(15, 0)
	q.shareApplyTo("sq", 0, deltas, true)
	want := expectRegistry(t, deltas)
	q.waitShareRegistries("sq", 0, want)

	// Lose the leader: the next has every delta.
	q.brokers[li].Close()
	q.brokers[li] = nil
	nl, reg, nepoch := q.shareLeaderOf("sq", 0)
	if nl == li || nepoch <= epoch {
		t.Fatalf("new share leader %d at epoch %d (old %d at %d)", nl+1, nepoch, li+1, epoch)
	}
	if got := reg.Snapshot(); !bytes.Equal(got, want) {
		t.Fatal("the new leader's registry lacks committed deltas")
	}
	if err := q.brokers[nl].ShareApplyAt(ctx, "sq", 0, epoch, deltas[0]); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a delta of the old epoch: %v", err)
	}
	more := shareDeltas(10, len(deltas))
	q.shareApplyTo("sq", 0, more, false)
	deltas = append(deltas, more...)
	want = expectRegistry(t, deltas)
	if err := q.start(li); err != nil {
		t.Fatal(err)
	}
	q.waitShareRegistries("sq", 0, want)

	// Lose the leader without a handoff: its group is cut off (as by a
	// crash). The others elect a leader that has every delta committed.
	cut, _, _ := q.shareLeaderOf("sq", 0)
	iso := q.brokers[cut]
	iso.group(log.TopicPartition{Topic: "sq", Partition: 0}).trans.Close()
	q.brokers[cut] = nil
	nl, reg, _ = q.shareLeaderOf("sq", 0)
	if got := reg.Snapshot(); !bytes.Equal(got, want) {
		t.Fatalf("the leader after broker %d was cut off lacks committed deltas", cut+1)
	}
	more = shareDeltas(5, len(deltas))
	q.shareApplyTo("sq", 0, more, true)
	deltas = append(deltas, more...)
	want = expectRegistry(t, deltas)
	iso.Close()
	if err := q.start(cut); err != nil {
		t.Fatal(err)
	}
	q.waitShareRegistries("sq", 0, want)
}

// A follower that was down while the others' retention removed what it
// lacks gets the share state with the snapshot install.
func TestShareStateSnapshotInstall(t *testing.T) {
	q := newShareQuorum(t, "sret", map[string]string{"segment.bytes": "1024", "retention.bytes": "2048"})
	clean := func() {
		for _, br := range q.brokers {
			if br != nil {
				c := retention.NewCleaner(retention.CleanerOptions{Logs: br.logs, Logger: discardLogger()})
				c.RunOnce()
				c.Close()
			}
		}
	}
	deltas := shareDeltas(5, 0)
	q.shareApplyTo("sret", 0, deltas, true)
	li, _, _ := q.shareLeaderOf("sret", 0)
	f := (li + 1) % 3
	q.brokers[f].Close()
	q.brokers[f] = nil
	more := shareDeltas(20, len(deltas))
	q.shareApplyTo("sret", 0, more, true)
	deltas = append(deltas, more...)
	for k := 0; k < 40; k++ { // enough for retention to remove what f lacks
		q.produceTo("sret", 0, batch(3, -1, -1, -1))
	}
	clean()
	for i, br := range q.brokers {
		if br == nil {
			continue
		}
		if err := br.group(log.TopicPartition{Topic: "sret", Partition: 0}).snapshotNow(); err != nil {
			t.Fatalf("broker %d: %v", i+1, err)
		}
	}
	clean()
	for i, br := range q.brokers {
		if br != nil {
			lp := br.logs.Get(log.TopicPartition{Topic: "sret", Partition: 0})
			t.Logf("broker %d: %+v, %d segments", i+1, lp.Offsets(), len(lp.Segments()))
		}
	}
	installs := snapshotInstalls.Load()
	if err := q.start(f); err != nil {
		t.Fatal(err)
	}
	// After the snapshot, more deltas: the follower applies them on top of
	// the installed state.
	more = shareDeltas(3, len(deltas))
	q.shareApplyTo("sret", 0, more, true)
	deltas = append(deltas, more...)
	q.waitSameReplicasFrom("sret", 0)
	q.waitShareRegistries("sret", 0, expectRegistry(t, deltas))
	if snapshotInstalls.Load() == installs {
		t.Fatal("the returning follower caught up without a snapshot install")
	}
}
