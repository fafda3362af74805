package log

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/strata-io/strata/segment"
)

// txnData builds a transactional data batch of n records.
func txnData(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	b := makeBatch(t, spec{n: n, valueLen: 8, ts: 1_700_000_000_000, pid: pid, epoch: epoch, seq: seq})
	binary.BigEndian.PutUint16(b[segment.OffAttributes:], binary.BigEndian.Uint16(b[segment.OffAttributes:])|segment.AttrTransactional)
	segment.SetCRC(b)
	return b
}

func mustAppend(t testing.TB, p *Partition, b []byte) AppendResult {
	t.Helper()
	res, err := p.Append(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Commit(res.LastOffset + 1)
	return res
}

func TestMarkerBatchValidAndTyped(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := MarkerBatch(7, 3, commit, 5, 1000)
		h, err := segment.ValidateBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		if !h.IsControl() || !h.IsTransactional() || h.ProducerID != 7 || h.ProducerEpoch != 3 {
			t.Fatalf("header %+v", h)
		}
		want := int16(controlAbort)
		if commit {
			want = controlCommit
		}
		if got := ControlType(b); got != want {
			t.Fatalf("control type %d, want %d", got, want)
		}
	}
	if ControlType(txnData(t, 1, 0, 0, 1)) != -1 {
		t.Fatal("data batch has a control type")
	}
}

// TestLastStableOffsetAndAbortedIndex: the LSO stops at the first open
// transaction; read_committed reads stop there and carry the aborted
// transactions; read_uncommitted reads everything.
func TestLastStableOffsetAndAbortedIndex(t *testing.T) {
	fsys := segment.NewMemFS()
	c := newClock()
	m := testManager(t, fsys, c)
	tp := TopicPartition{Topic: "t", Partition: 0}
	p, err := m.Open(tp, Config{})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p, txnData(t, 1, 0, 0, 3))                       // A: 0-2
	mustAppend(t, p, txnData(t, 2, 0, 0, 2))                       // B: 3-4
	mustAppend(t, p, makeBatch(t, spec{n: 1, valueLen: 1, ts: 1})) // plain: 5
	if got := p.Offsets().LastStable; got != 0 {
		t.Fatalf("LSO %d, want 0", got)
	}
	rr, err := p.ReadCommitted(0, 1<<20)
	if err != nil || len(rr.Records) != 0 {
		t.Fatalf("read_committed below an open txn: %d bytes, %v", len(rr.Records), err)
	}
	mustAppend(t, p, MarkerBatch(1, 0, false, 0, 1)) // abort A: 6
	if got := p.Offsets().LastStable; got != 3 {
		t.Fatalf("LSO %d, want 3", got)
	}
	rr, err = p.ReadCommitted(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if hs := batchesOf(t, rr.Records); len(hs) != 1 || hs[0].BaseOffset != 0 {
		t.Fatalf("read_committed batches %+v", hs)
	}
	want := []AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 6, LastStableOffset: 3}}
	if !reflect.DeepEqual(rr.Aborted, want) {
		t.Fatalf("aborted %+v", rr.Aborted)
	}
	mustAppend(t, p, MarkerBatch(2, 0, true, 0, 1)) // commit B: 7
	o := p.Offsets()
	if o.LastStable != 8 || o.HighWatermark != 8 {
		t.Fatalf("offsets %+v", o)
	}
	rr, _ = p.ReadCommitted(0, 1<<20)
	if hs := batchesOf(t, rr.Records); len(hs) != 5 {
		t.Fatalf("read_committed after commit: %d batches", len(hs))
	}
	if !reflect.DeepEqual(rr.Aborted, want) {
		t.Fatalf("aborted %+v", rr.Aborted)
	}
	if got := p.AbortedTransactions(7, 8); len(got) != 0 {
		t.Fatalf("aborted after the abort marker: %+v", got)
	}
	ur, _ := p.Read(0, 1<<20)
	if len(ur.Records) != len(rr.Records) {
		t.Fatal("read_uncommitted differs once everything is decided")
	}

	// A marker appended but not committed holds the LSO back.
	res, err := p.Append(txnData(t, 3, 0, 0, 1), 0) // C: 8
	if err != nil {
		t.Fatal(err)
	}
	p.Commit(res.LastOffset + 1)
	res, err = p.Append(MarkerBatch(3, 0, true, 0, 1), 0) // 9, uncommitted
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Offsets().LastStable; got != 8 {
		t.Fatalf("LSO with an uncommitted marker %d, want 8", got)
	}
	p.Commit(res.LastOffset + 1)
	if got := p.Offsets().LastStable; got != 10 {
		t.Fatalf("LSO %d, want 10", got)
	}
}

// TestTxnStateRecovery: the LSO, open transactions and aborted index are
// rebuilt after a restart and after a crash that lost the .txnindex files,
// from snapshots, index files and markers.
func TestTxnStateRecovery(t *testing.T) {
	fsys := segment.NewMemFS()
	c := newClock()
	m := testManager(t, fsys, c)
	tp := TopicPartition{Topic: "t", Partition: 0}
	p, err := m.Open(tp, Config{})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p, txnData(t, 1, 0, 0, 2))         // A 0-1
	mustAppend(t, p, MarkerBatch(1, 0, false, 0, 1)) // abort A: 2
	mustAppend(t, p, txnData(t, 2, 0, 0, 2))         // B 3-4, open across the roll
	if err := p.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p, txnData(t, 3, 0, 0, 1))         // C 5
	mustAppend(t, p, MarkerBatch(3, 0, false, 0, 1)) // abort C: 6
	wantAborted := p.AbortedTransactions(0, 100)
	wantOff := p.Offsets()
	if len(wantAborted) != 2 || wantOff.LastStable != 3 {
		t.Fatalf("before restart: aborted %+v offsets %+v", wantAborted, wantOff)
	}
	check := func(label string, p *Partition) {
		t.Helper()
		if got := p.AbortedTransactions(0, 100); !reflect.DeepEqual(got, wantAborted) {
			t.Fatalf("%s: aborted %+v, want %+v", label, got, wantAborted)
		}
		if got := p.Offsets(); got != wantOff {
			t.Fatalf("%s: offsets %+v, want %+v", label, got, wantOff)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = testManager(t, fsys, c)
	p, err = m.Open(tp, Config{})
	if err != nil {
		t.Fatal(err)
	}
	check("clean restart", p)

	// A crash that lost every .txnindex and snapshot: all rebuilt from the log.
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	ents, _ := fsys.ReadDir("/data/t-0")
	for _, e := range ents {
		if n := e.Name; len(n) > 9 && (n[len(n)-9:] == ".txnindex" || n[len(n)-9:] == ".snapshot") {
			fsys.Remove("/data/t-0/" + n)
		}
	}
	fsys.SyncDir("/data/t-0")
	fsys.ResetToSyncedState()
	m = testManager(t, fsys, c)
	p, err = m.Open(tp, Config{})
	if err != nil {
		t.Fatal(err)
	}
	check("crash without index files", p)

	// The open transaction still ends as its marker says.
	mustAppend(t, p, MarkerBatch(2, 0, true, 0, 1))
	if o := p.Offsets(); o.LastStable != o.HighWatermark {
		t.Fatalf("after commit %+v", o)
	}
	// Truncation above the high watermark re-derives the index.
	res, err := p.Append(txnData(t, 4, 0, 0, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Commit(res.LastOffset + 1)
	res, err = p.Append(MarkerBatch(4, 0, false, 0, 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.AbortedTransactions(0, 100)); n != 3 {
		t.Fatalf("aborted before truncate %d", n)
	}
	if err := p.TruncateTo(res.BaseOffset); err != nil {
		t.Fatal(err)
	}
	if n := len(p.AbortedTransactions(0, 100)); n != 2 {
		t.Fatalf("aborted after truncate %d", n)
	}
	if got := p.Offsets().LastStable; got != res.BaseOffset-1 {
		t.Fatalf("LSO after truncating the marker %d, want %d", got, res.BaseOffset-1)
	}
	m.Close()
}

func TestTxnIndexRoundTrip(t *testing.T) {
	in := []AbortedTxn{{1, 0, 5, 3}, {9, 10, 20, 21}}
	b := EncodeTxnIndex(in)
	if len(b) != 2*txnIndexEntrySize {
		t.Fatalf("%d bytes", len(b))
	}
	out, err := DecodeTxnIndex(append(b, 0, 0, 1)) // a torn tail is ignored
	if err != nil || !reflect.DeepEqual(out, in) {
		t.Fatalf("%+v %v", out, err)
	}
}

func FuzzDecodeTxnIndex(f *testing.F) {
	f.Add(EncodeTxnIndex([]AbortedTxn{{1, 0, 5, 3}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		ents, err := DecodeTxnIndex(b)
		if err == nil && len(ents) != len(b)/txnIndexEntrySize {
			t.Fatalf("%d entries from %d bytes", len(ents), len(b))
		}
		if err == nil && !reflect.DeepEqual(EncodeTxnIndex(ents), b[:len(ents)*txnIndexEntrySize]) {
			t.Fatal("re-encoding differs")
		}
	})
}

func FuzzControlType(f *testing.F) {
	f.Add(MarkerBatch(1, 0, true, 0, 0))
	f.Add(MarkerBatch(1, 0, false, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		if ct := ControlType(b); ct < -1 || ct > 1 {
			t.Fatalf("type %d", ct)
		}
	})
}

// TestExpireProducers: producer.id.expiration.ms forgets idle producers
// but never one with an open transaction.
func TestExpireProducers(t *testing.T) {
	c := newClock()
	m := testManager(t, segment.NewMemFS(), c)
	p, err := m.Open(TopicPartition{Topic: "t", Partition: 0}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p, makeBatch(t, spec{n: 1, valueLen: 1, ts: 1000, pid: 1, epoch: 0, seq: 0})) // idle, old
	mustAppend(t, p, txnData(t, 2, 0, 0, 1))                                                    // open txn, old timestamp
	if n := p.ExpireProducers(1_700_000_600_000, 60_000); n != 1 {
		t.Fatalf("expired %d producers, want 1", n)
	}
	ps := p.Producers()
	if len(ps) != 1 || ps[0].ProducerID != 2 || ps[0].TxnStartOffset != 1 {
		t.Fatalf("left %+v", ps)
	}
	// The forgotten producer must start over at sequence 0.
	if _, err := p.Append(makeBatch(t, spec{n: 1, valueLen: 1, ts: 1000, pid: 1, epoch: 0, seq: 1}), 0); err == nil {
		t.Fatal("an expired producer continued its sequence")
	}
	m.Close()
}

// TestResetToClearsTxnState: a reset (a Raft snapshot install) forgets
// open transactions and the aborted index, files included; the leader's
// batches appended after it rebuild them.
func TestResetToClearsTxnState(t *testing.T) {
	fsys := segment.NewMemFS()
	m := testManager(t, fsys, newClock())
	p, err := m.Open(TopicPartition{Topic: "t", Partition: 0}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, p, txnData(t, 1, 0, 0, 2))
	mustAppend(t, p, MarkerBatch(1, 0, false, 0, 1))
	mustAppend(t, p, txnData(t, 2, 0, 0, 1)) // open
	if err := p.ResetTo(100); err != nil {
		t.Fatal(err)
	}
	if o := p.Offsets(); o.LastStable != 100 || len(p.AbortedTransactions(0, 1<<40)) != 0 {
		t.Fatalf("after reset: %+v %+v", o, p.AbortedTransactions(0, 1<<40))
	}
	ents, _ := fsys.ReadDir("/data/t-0")
	for _, e := range ents {
		if len(e.Name) > 9 && e.Name[len(e.Name)-9:] == ".txnindex" {
			t.Fatalf("%s left behind", e.Name)
		}
	}
	m.Close()
}

// TestTxnStateOnFollower: a follower appending the leader's batches with
// AppendReplica derives the same open transactions, LSO and aborted index
// (it can become leader at any time), and keeps them across a restart.
func TestTxnStateOnFollower(t *testing.T) {
	c := newClock()
	ffs := segment.NewMemFS()
	lm, fm := testManager(t, segment.NewMemFS(), c), testManager(t, ffs, c)
	defer lm.Close()
	cfg := Config{SegmentBytes: 600}
	leader, _ := lm.Open(tp0, cfg)
	follower, _ := fm.Open(tp0, cfg)
	ship := func(b []byte) {
		t.Helper()
		res, err := leader.Append(b, 3)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := leader.BatchAt(res.BaseOffset)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendReplica(stored); err != nil {
			t.Fatal(err)
		}
		leader.Commit(res.LastOffset + 1)
		follower.Commit(res.LastOffset + 1)
	}
	ep2, seq2 := int16(0), int32(0)
	for i := 0; i < 6; i++ {
		ship(txnData(t, 1, 0, int32(2*i), 2)) // producer 1: aborted at the end
		ship(txnData(t, 2, ep2, seq2, 1))     // producer 2: committed, then a new one
		seq2++
		if i == 2 {
			ship(MarkerBatch(2, 0, true, 0, 1))
			ep2, seq2 = 1, 0 // the next transaction at a new epoch (KIP-890 part 2)
		}
	}
	ship(MarkerBatch(1, 0, false, 0, 1))
	check := func(label string, f *Partition) {
		t.Helper()
		if lo, fo := leader.Offsets(), f.Offsets(); lo != fo {
			t.Fatalf("%s: offsets %+v vs leader %+v", label, fo, lo)
		}
		la, fa := leader.AbortedTransactions(0, 1<<40), f.AbortedTransactions(0, 1<<40)
		if !reflect.DeepEqual(la, fa) || len(la) != 1 {
			t.Fatalf("%s: aborted %+v vs leader %+v", label, fa, la)
		}
		if lp, fp := leader.Producers(), f.Producers(); !reflect.DeepEqual(lp, fp) {
			t.Fatalf("%s: producers %+v vs leader %+v", label, fp, lp)
		}
	}
	check("follower", follower)
	if o := follower.Offsets(); o.LastStable >= o.HighWatermark {
		t.Fatalf("producer 2's open transaction does not hold the LSO: %+v", o)
	}
	if err := fm.Close(); err != nil {
		t.Fatal(err)
	}
	fm = testManager(t, ffs, c)
	defer fm.Close()
	follower, _ = fm.Open(tp0, cfg)
	check("follower after restart", follower)
}
