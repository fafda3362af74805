package txncoord

import (
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// fakeIDs hands out producer IDs from 1000 on.
type fakeIDs struct{ next int64 }

func (f *fakeIDs) alloc() (int64, error) { f.next++; return 999 + f.next, nil }

type clock struct{ t time.Time }

func (c *clock) now() time.Time            { return c.t }
func (c *clock) advance(d time.Duration)   { c.t = c.t.Add(d) }
func newClock() *clock                     { return &clock{t: time.UnixMilli(1_700_000_000_000)} }
func codeName(c int16) string              { return kerr.ErrorForCode(c).Error() }
func (mc *machine) state(id string) string { return StateName(mc.txns[id].state) }

// replayAll reloads a machine from the records written so far, the way a
// new coordinator does after a failover.
func replayAll(t *testing.T, recs []record) *machine {
	t.Helper()
	mc := newMachine()
	for _, r := range recs {
		id, m, err := decodeRecord(r.Key, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		mc.replay(id, m)
	}
	return mc
}

func TestStateMachineLifecycle(t *testing.T) {
	mc, ids, clk := newMachine(), &fakeIDs{}, newClock()
	var log []record
	run := func(e *effects) { log = append(log, e.records...) }

	var e effects
	pid, epoch, code := mc.initProducerID(initRequest{id: "a", timeoutMs: 60000, pid: -1, epoch: -1, newCodes: true}, clk.now(), 15*time.Minute, ids.alloc, &e)
	run(&e)
	if code != 0 || pid != 1000 || epoch != 0 || mc.state("a") != "Empty" {
		t.Fatalf("init: %d/%d %s", pid, epoch, codeName(code))
	}
	// Too long a timeout.
	e = effects{}
	if _, _, code := mc.initProducerID(initRequest{id: "b", timeoutMs: 16 * 60000, pid: -1, epoch: -1}, clk.now(), 15*time.Minute, ids.alloc, &e); code != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("long timeout: %s", codeName(code))
	}
	// Start: AddPartitions.
	e = effects{}
	if code := mc.addPartitions("a", pid, epoch, []tp{{"t", 0}, {"t", 1}}, clk.now(), true, &e); code != 0 || len(e.records) != 1 {
		t.Fatalf("add: %s %d records", codeName(code), len(e.records))
	}
	run(&e)
	// Adding again writes nothing.
	e = effects{}
	if code := mc.addPartitions("a", pid, epoch, []tp{{"t", 1}}, clk.now(), true, &e); code != 0 || len(e.records) != 0 {
		t.Fatalf("re-add: %s %d records", codeName(code), len(e.records))
	}
	if code := mc.verify("a", pid, epoch, "t", 1); code != 0 {
		t.Fatalf("verify added: %s", codeName(code))
	}
	if code := mc.verify("a", pid, epoch, "t", 2); code != kerr.InvalidTxnState.Code {
		t.Fatalf("verify not added: %s", codeName(code))
	}
	// Wrong epoch / producer.
	if code := mc.addPartitions("a", pid, epoch+1, []tp{{"t", 2}}, clk.now(), true, &effects{}); code != kerr.ProducerFenced.Code {
		t.Fatalf("wrong epoch: %s", codeName(code))
	}
	if code := mc.addPartitions("a", pid+1, epoch, []tp{{"t", 2}}, clk.now(), true, &effects{}); code != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("wrong pid: %s", codeName(code))
	}
	// Commit: PrepareCommit and markers for both partitions.
	e = effects{}
	code, wait := mc.endTxn("a", pid, epoch, true, clk.now(), true, &e)
	run(&e)
	if code != 0 || !wait || mc.state("a") != "PrepareCommit" || len(e.markers) != 1 {
		t.Fatalf("end: %s wait=%v state %s markers %d", codeName(code), wait, mc.state("a"), len(e.markers))
	}
	j := e.markers[0]
	if !j.commit || j.pid != pid || j.epoch != epoch || !reflect.DeepEqual(j.partitions, []tp{{"t", 0}, {"t", 1}}) {
		t.Fatalf("marker job %+v", j)
	}
	// While preparing: CONCURRENT_TRANSACTIONS for InitProducerId and adds.
	if _, _, code := mc.initProducerID(initRequest{id: "a", timeoutMs: 60000, pid: -1, epoch: -1}, clk.now(), time.Hour, ids.alloc, &effects{}); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("init while preparing: %s", codeName(code))
	}
	if code := mc.addPartitions("a", pid, epoch, []tp{{"t", 2}}, clk.now(), true, &effects{}); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("add while preparing: %s", codeName(code))
	}
	// A failover now: the new coordinator resends the markers.
	if p := replayAll(t, log).pending(); len(p) != 1 || !p[0].commit {
		t.Fatalf("pending after reload: %+v", p)
	}
	e = effects{}
	if !mc.markersWritten(j, clk.now(), &e) || mc.state("a") != "CompleteCommit" {
		t.Fatalf("complete: %s", mc.state("a"))
	}
	run(&e)
	// Retried commit succeeds, abort does not.
	if code, _ := mc.endTxn("a", pid, epoch, true, clk.now(), true, &effects{}); code != 0 {
		t.Fatalf("retried commit: %s", codeName(code))
	}
	if code, _ := mc.endTxn("a", pid, epoch, false, clk.now(), true, &effects{}); code != kerr.InvalidTxnState.Code {
		t.Fatalf("abort after commit: %s", codeName(code))
	}
	if got := replayAll(t, log); got.state("a") != "CompleteCommit" || got.txns["a"].epoch != epoch {
		t.Fatalf("reloaded: %+v", got.txns["a"])
	}
}

func TestStateMachineFencingAndTimeout(t *testing.T) {
	mc, ids, clk := newMachine(), &fakeIDs{}, newClock()
	e := effects{}
	pid, e0, _ := mc.initProducerID(initRequest{id: "a", timeoutMs: 1000, pid: -1, epoch: -1, newCodes: true}, clk.now(), time.Hour, ids.alloc, &e)
	mc.addPartitions("a", pid, e0, []tp{{"t", 0}}, clk.now(), true, &e)

	// A second instance: the ongoing transaction is aborted with a bump,
	// CONCURRENT_TRANSACTIONS until the markers are written.
	e = effects{}
	if _, _, code := mc.initProducerID(initRequest{id: "a", timeoutMs: 1000, pid: -1, epoch: -1, newCodes: true}, clk.now(), time.Hour, ids.alloc, &e); code != kerr.ConcurrentTransactions.Code {
		t.Fatalf("second instance: %s", codeName(code))
	}
	if len(e.markers) != 1 || e.markers[0].commit || e.markers[0].epoch != e0+1 || mc.state("a") != "PrepareAbort" {
		t.Fatalf("fence abort: %+v %s", e.markers, mc.state("a"))
	}
	mc.markersWritten(e.markers[0], clk.now(), &effects{})
	pid2, e2, code := mc.initProducerID(initRequest{id: "a", timeoutMs: 1000, pid: -1, epoch: -1, newCodes: true}, clk.now(), time.Hour, ids.alloc, &effects{})
	if code != 0 || pid2 != pid || e2 != e0+2 {
		t.Fatalf("second instance after abort: %d/%d %s", pid2, e2, codeName(code))
	}
	// The zombie is fenced everywhere.
	if code, _ := mc.endTxn("a", pid, e0, true, clk.now(), true, &effects{}); code != kerr.ProducerFenced.Code {
		t.Fatalf("zombie EndTxn: %s", codeName(code))
	}
	if code, _ := mc.endTxn("a", pid, e0, true, clk.now(), false, &effects{}); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie EndTxn v1: %s", codeName(code))
	}
	if _, _, code := mc.initProducerID(initRequest{id: "a", timeoutMs: 1000, pid: pid, epoch: e0, newCodes: true}, clk.now(), time.Hour, ids.alloc, &effects{}); code != kerr.ProducerFenced.Code {
		t.Fatalf("zombie InitProducerId: %s", codeName(code))
	}
	// KIP-360: the current producer bumps its own epoch, and a retry of
	// that bump gets the same answer.
	_, e3, code := mc.initProducerID(initRequest{id: "a", timeoutMs: 1000, pid: pid, epoch: e2, newCodes: true}, clk.now(), time.Hour, ids.alloc, &effects{})
	if code != 0 || e3 != e2+1 {
		t.Fatalf("KIP-360 bump: %d %s", e3, codeName(code))
	}
	if _, again, code := mc.initProducerID(initRequest{id: "a", timeoutMs: 1000, pid: pid, epoch: e2, newCodes: true}, clk.now(), time.Hour, ids.alloc, &effects{}); code != 0 || again != e3 {
		t.Fatalf("KIP-360 retry: %d %s", again, codeName(code))
	}

	// Timeout: an ongoing transaction past transaction.timeout.ms aborts
	// with an epoch bump.
	mc.addPartitions("a", pid, e3, []tp{{"t", 0}}, clk.now(), true, &effects{})
	clk.advance(999 * time.Millisecond)
	if n := mc.abortTimedOut(clk.now(), &effects{}); n != 0 {
		t.Fatal("aborted before the timeout")
	}
	clk.advance(2 * time.Millisecond)
	e = effects{}
	if n := mc.abortTimedOut(clk.now(), &e); n != 1 || e.markers[0].epoch != e3+1 || mc.state("a") != "PrepareAbort" {
		t.Fatalf("timeout abort: %d %+v", n, e.markers)
	}
	mc.markersWritten(e.markers[0], clk.now(), &effects{})
	if code, _ := mc.endTxn("a", pid, e3, true, clk.now(), true, &effects{}); code != kerr.ProducerFenced.Code {
		t.Fatalf("commit after the timeout: %s", codeName(code))
	}

	// Epoch exhaustion moves to a new producer ID.
	mc.txns["a"].epoch = 32766
	p4, e4, code := mc.initProducerID(initRequest{id: "a", timeoutMs: 1000, pid: -1, epoch: -1}, clk.now(), time.Hour, ids.alloc, &effects{})
	if code != 0 || p4 == pid || e4 != 0 {
		t.Fatalf("exhausted epoch: %d/%d %s", p4, e4, codeName(code))
	}

	// transactional.id.expiration.ms: an idle ID is forgotten with a tombstone.
	e = effects{}
	clk.advance(7*24*time.Hour + time.Millisecond)
	if n := mc.expire(clk.now(), 7*24*time.Hour, &e); n != 1 || len(e.records) != 1 || e.records[0].Value != nil {
		t.Fatalf("expire: %d %+v", n, e.records)
	}
	if len(mc.txns) != 0 {
		t.Fatal("expired ID still known")
	}
}

func TestRecordRoundTrip(t *testing.T) {
	m := newMeta("x")
	m.pid, m.epoch, m.timeoutMs, m.state, m.startMs, m.lastUpdateMs = 5, 7, 60000, stateOngoing, 10, 20
	m.add("b", 2)
	m.add("a", 1)
	m.add("a", 0)
	r := m.record()
	id, got, err := decodeRecord(r.Key, r.Value)
	if err != nil || id != "x" {
		t.Fatal(id, err)
	}
	got.lastPid, got.lastEpoch = m.lastPid, m.lastEpoch
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip %+v, want %+v", got, m)
	}
	if id, got, err := decodeRecord(r.Key, nil); err != nil || id != "x" || got != nil {
		t.Fatal("tombstone", id, got, err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	m := newMeta("x")
	m.pid, m.epoch, m.timeoutMs, m.state = 5, 7, 60000, stateOngoing
	m.add("t", 1)
	r := m.record()
	f.Add(r.Key, r.Value)
	f.Add(r.Key, []byte{})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		id, got, err := decodeRecord(key, value)
		if err != nil || got == nil {
			return
		}
		if got.count() > maxTxnPartitions || got.state < stateEmpty || got.state > statePrepareFence {
			t.Fatalf("accepted %+v", got)
		}
		// What decodes re-encodes to something that decodes the same.
		r2 := got.record()
		id2, got2, err := decodeRecord(r2.Key, r2.Value)
		if err != nil || id2 != id || !reflect.DeepEqual(got2.list(), got.list()) {
			t.Fatalf("re-decode: %v", err)
		}
	})
}

func FuzzDecodeBatches(f *testing.F) {
	m := newMeta("x")
	m.add("t", 1)
	f.Add(buildBatch([]record{m.record()}, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeBatches(b, 0, func(int64, []byte, []byte) {})
	})
}

// TestStateMachineTV2: KIP-890 part 2 EndTxn bumps the epoch each time,
// markers carry the bumped epoch, retries of an answered EndTxn get the
// same answer, an empty abort is allowed, and an exhausted epoch moves
// to a new producer ID (persisted as NextProducerID across a reload).
func TestStateMachineTV2(t *testing.T) {
	mc, ids, clk := newMachine(), &fakeIDs{}, newClock()
	var log []record
	e := effects{}
	pid, ep, _ := mc.initProducerID(initRequest{id: "a", timeoutMs: 60000, pid: -1, epoch: -1, newCodes: true}, clk.now(), time.Hour, ids.alloc, &e)
	mc.addPartitions("a", pid, ep, []tp{{"t", 0}}, clk.now(), true, &e)
	e = effects{}
	code, wait := mc.endTxnV2("a", pid, ep, true, clk.now(), ids.alloc, &e)
	if code != 0 || !wait || len(e.markers) != 1 || e.markers[0].epoch != ep+1 {
		t.Fatalf("end v2: %s %v %+v", codeName(code), wait, e.markers)
	}
	// A retry while the markers are written waits too.
	if code, wait := mc.endTxnV2("a", pid, ep, true, clk.now(), ids.alloc, &effects{}); code != 0 || !wait {
		t.Fatalf("retry while preparing: %s %v", codeName(code), wait)
	}
	mc.markersWritten(e.markers[0], clk.now(), &effects{})
	if m := mc.txns["a"]; m.epoch != ep+1 || m.state != stateCompleteCommit {
		t.Fatalf("after v2 commit: %+v", m)
	}
	// A retry after: same answer; the other outcome is refused.
	if code, wait := mc.endTxnV2("a", pid, ep, true, clk.now(), ids.alloc, &effects{}); code != 0 || wait {
		t.Fatalf("retry after: %s", codeName(code))
	}
	if code, _ := mc.endTxnV2("a", pid, ep, false, clk.now(), ids.alloc, &effects{}); code == 0 {
		t.Fatal("abort retry of a commit accepted")
	}
	// An empty abort at the current epoch bumps it.
	e = effects{}
	if code, wait := mc.endTxnV2("a", pid, ep+1, false, clk.now(), ids.alloc, &e); code != 0 || !wait || len(e.markers[0].partitions) != 0 {
		t.Fatalf("empty abort: %s %+v", codeName(code), e.markers)
	}
	mc.markersWritten(e.markers[0], clk.now(), &effects{})
	if m := mc.txns["a"]; m.epoch != ep+2 || m.state != stateCompleteAbort {
		t.Fatalf("after empty abort: %+v", m)
	}
	// Exhaustion: the markers carry the last epoch, the client moves on to
	// a new producer ID at epoch 0; a reload in between keeps NextProducerID.
	m := mc.txns["a"]
	m.epoch = 32765
	mc.addPartitions("a", pid, 32765, []tp{{"t", 1}}, clk.now(), true, &effects{})
	e = effects{}
	if code, _ := mc.endTxnV2("a", pid, 32765, true, clk.now(), ids.alloc, &e); code != 0 || e.markers[0].pid != pid || e.markers[0].epoch != 32766 {
		t.Fatalf("exhausting end: %s %+v", codeName(code), e.markers)
	}
	log = append(log, e.records...)
	re := replayAll(t, log)
	if got := re.txns["a"]; got.nextPid != m.nextPid || got.nextPid < 0 || got.state != statePrepareCommit {
		t.Fatalf("reloaded next producer id %d, want %d (%+v)", got.nextPid, m.nextPid, got)
	}
	mc.markersWritten(e.markers[0], clk.now(), &effects{})
	if m := mc.txns["a"]; m.pid == pid || m.epoch != 0 || m.lastPid != pid {
		t.Fatalf("after exhaustion: %+v", m)
	}
	if code, _ := mc.endTxnV2("a", pid, 32765, true, clk.now(), ids.alloc, &effects{}); code != 0 {
		t.Fatalf("retry across the new producer id: %s", codeName(code))
	}
}
