package txncoord

import (
	"math"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// This file is the transaction state machine of one __transaction_state
// partition: pure (no clock, no I/O). Each method takes the request and
// now, changes the in-memory state, and returns the records to write (the
// caller writes them before replying, and unloads if that fails, so
// memory is never ahead of the log) and the markers to send.
//
//	              AddPartitions                EndTxn(commit)
//	  Empty ────────────────────> Ongoing ─────────────────────> PrepareCommit
//	  Complete* ──────────────────^   │  EndTxn(abort), timeout,           │ markers written
//	                                  │  InitProducerId (fence)            v
//	                                  └──────────────> PrepareAbort   CompleteCommit
//	                                                        │ markers written
//	                                                        v
//	                                                   CompleteAbort
//
// Epochs: InitProducerId bumps the epoch (a new producer ID when the
// epoch would overflow), which fences every older instance of the
// transactional ID; a timeout or a fencing abort bumps it too, so the
// zombie's next request is PRODUCER_FENCED.

// txnMeta is one transactional ID's state.
type txnMeta struct {
	id    string
	pid   int64
	epoch int16
	// lastPid/lastEpoch are the producer ID and epoch before the last
	// InitProducerId bump, so that a client retrying an InitProducerId
	// whose answer it lost (KIP-360) gets the same answer, not a fence.
	// Not persisted (-1 after a load).
	lastPid   int64
	lastEpoch int16
	// nextPid is the producer ID a KIP-890 part 2 transaction moves to
	// once its markers are written, when its epoch bump exhausted the
	// epochs (-1 none); persisted as NextProducerID.
	nextPid int64
	// tv2 records that the last transaction ended with EndTxn v5+
	// (transaction.version 2: an epoch bump per transaction); persisted
	// as ClientTransactionVersion.
	tv2       bool
	timeoutMs int32
	state     int8
	// partitions of the open (or completing) transaction.
	partitions   map[string]map[int32]struct{}
	startMs      int64 // when the transaction started (-1 none)
	lastUpdateMs int64
}

func newMeta(id string) *txnMeta {
	return &txnMeta{id: id, pid: -1, epoch: -1, lastPid: -1, lastEpoch: -1, nextPid: -1, startMs: -1, partitions: map[string]map[int32]struct{}{}}
}

func (m *txnMeta) add(topic string, p int32) bool {
	ps := m.partitions[topic]
	if ps == nil {
		ps = map[int32]struct{}{}
		m.partitions[topic] = ps
	}
	if _, ok := ps[p]; ok {
		return false
	}
	ps[p] = struct{}{}
	return true
}

func (m *txnMeta) has(topic string, p int32) bool {
	_, ok := m.partitions[topic][p]
	return ok
}

func (m *txnMeta) count() int {
	n := 0
	for _, ps := range m.partitions {
		n += len(ps)
	}
	return n
}

func (m *txnMeta) sortedTopics() []string {
	ts := make([]string, 0, len(m.partitions))
	for t := range m.partitions {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

// list returns the partitions, sorted.
func (m *txnMeta) list() []tp {
	var out []tp
	for _, t := range m.sortedTopics() {
		ps := make([]int32, 0, len(m.partitions[t]))
		for p := range m.partitions[t] {
			ps = append(ps, p)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		for _, p := range ps {
			out = append(out, tp{t, p})
		}
	}
	return out
}

func (m *txnMeta) record() record { return record{Key: encodeKey(m.id), Value: encodeValue(m)} }

// markerJob is one transaction's markers to write: the producer ID and
// epoch they carry, the outcome, and every partition of the transaction.
type markerJob struct {
	id         string
	pid        int64
	epoch      int16
	commit     bool
	partitions []tp
}

// effects are what one event asks of the shard.
type effects struct {
	records []record
	markers []markerJob
}

func (e *effects) write(m *txnMeta) { e.records = append(e.records, m.record()) }

// machine holds the transactions of one coordinator partition.
type machine struct {
	txns map[string]*txnMeta
}

func newMachine() *machine { return &machine{txns: map[string]*txnMeta{}} }

// replay applies one stored record (nil meta = tombstone).
func (mc *machine) replay(id string, m *txnMeta) {
	if m == nil || m.state == stateDead {
		delete(mc.txns, id)
		return
	}
	mc.txns[id] = m
}

// fenced is the code for a request from an older epoch: PRODUCER_FENCED,
// or INVALID_PRODUCER_EPOCH for clients too old to know it (KIP-588).
func fenced(newCode bool) int16 {
	if newCode {
		return kerr.ProducerFenced.Code
	}
	return kerr.InvalidProducerEpoch.Code
}

// initRequest is InitProducerId for a transactional ID.
type initRequest struct {
	id        string
	timeoutMs int32
	pid       int64 // -1 when the client has none (KIP-360 sends its current one)
	epoch     int16
	newCodes  bool // v4+: PRODUCER_FENCED
}

// bumpEpoch moves m to its next epoch, or to a new producer ID at epoch 0
// when the epoch is exhausted (allocate gives one).
func (m *txnMeta) bumpEpoch(allocate func() (int64, error)) error {
	if m.pid >= 0 && m.epoch < math.MaxInt16-1 {
		m.epoch++
		return nil
	}
	id, err := allocate()
	if err != nil {
		return err
	}
	m.pid, m.epoch = id, 0
	return nil
}

// initProducerID answers InitProducerId for a transactional ID: the
// producer ID and epoch, or an error code. allocate hands out a new
// producer ID (the broker's, durable).
func (mc *machine) initProducerID(r initRequest, now time.Time, maxTimeout time.Duration, allocate func() (int64, error), e *effects) (int64, int16, int16) {
	if r.timeoutMs <= 0 || time.Duration(r.timeoutMs)*time.Millisecond > maxTimeout {
		return -1, -1, kerr.InvalidTransactionTimeout.Code
	}
	nowMs := now.UnixMilli()
	m := mc.txns[r.id]
	if m == nil {
		m = newMeta(r.id)
		if err := m.bumpEpoch(allocate); err != nil {
			return -1, -1, kerr.CoordinatorNotAvailable.Code
		}
		m.timeoutMs, m.state, m.lastUpdateMs = r.timeoutMs, stateEmpty, nowMs
		mc.txns[r.id] = m
		e.write(m)
		return m.pid, m.epoch, 0
	}
	if r.pid >= 0 {
		switch {
		case r.pid == m.pid && r.epoch == m.epoch:
		case r.pid == m.lastPid && r.epoch == m.lastEpoch && (m.state == stateEmpty || m.state == stateCompleteCommit || m.state == stateCompleteAbort):
			// A retry of the bump we already made: same answer.
			return m.pid, m.epoch, 0
		default:
			return -1, -1, fenced(r.newCodes)
		}
	}
	switch m.state {
	case statePrepareCommit, statePrepareAbort, statePrepareFence:
		return -1, -1, kerr.ConcurrentTransactions.Code
	case stateOngoing:
		// A new instance of the producer: fence the old one (epoch
		// bump) and abort its transaction; the client retries.
		mc.abort(m, now, e)
		return -1, -1, kerr.ConcurrentTransactions.Code
	}
	lastPid, lastEpoch := m.pid, m.epoch
	if err := m.bumpEpoch(allocate); err != nil {
		return -1, -1, kerr.CoordinatorNotAvailable.Code
	}
	// Only a bump the producer asked for with its current ID and epoch
	// (KIP-360) can be retried; a new instance's bump fences every
	// earlier epoch (Kafka's lastProducerEpoch rule).
	m.lastPid, m.lastEpoch = -1, -1
	if r.pid >= 0 {
		m.lastPid, m.lastEpoch = lastPid, lastEpoch
	}
	m.timeoutMs, m.state, m.lastUpdateMs, m.startMs = r.timeoutMs, stateEmpty, nowMs, -1
	m.partitions = map[string]map[int32]struct{}{}
	e.write(m)
	return m.pid, m.epoch, 0
}

// abort bumps the epoch of an ongoing transaction (fencing its producer)
// and starts its abort: PrepareAbort is written and the markers go out
// with the new epoch.
func (mc *machine) abort(m *txnMeta, now time.Time, e *effects) {
	// At the last epoch the abort keeps it: the next InitProducerId
	// moves to a new producer ID anyway.
	if m.epoch < math.MaxInt16-1 {
		m.epoch++
	}
	m.lastPid, m.lastEpoch = -1, -1
	m.state, m.lastUpdateMs = statePrepareAbort, now.UnixMilli()
	e.write(m)
	e.markers = append(e.markers, markerJob{id: m.id, pid: m.pid, epoch: m.epoch, commit: false, partitions: m.list()})
}

// check validates a request's producer ID and epoch against m.
func check(m *txnMeta, pid int64, epoch int16, newCodes bool) int16 {
	if m == nil || m.pid != pid {
		return kerr.InvalidProducerIDMapping.Code
	}
	if epoch != m.epoch {
		return fenced(newCodes)
	}
	return 0
}

// addPartitions adds partitions to the transaction (starting it): one
// code for all of them (the caller has already answered the unknown
// ones). A partition already in the ongoing transaction writes nothing.
func (mc *machine) addPartitions(id string, pid int64, epoch int16, parts []tp, now time.Time, newCodes bool, e *effects) int16 {
	m := mc.txns[id]
	if code := check(m, pid, epoch, newCodes); code != 0 {
		return code
	}
	switch m.state {
	case statePrepareCommit, statePrepareAbort, statePrepareFence:
		return kerr.ConcurrentTransactions.Code
	case stateDead:
		return kerr.InvalidProducerIDMapping.Code
	}
	if m.count()+len(parts) > maxTxnPartitions {
		return kerr.InvalidRequest.Code
	}
	if m.state != stateOngoing {
		m.partitions = map[string]map[int32]struct{}{}
	}
	changed := m.state != stateOngoing
	for _, p := range parts {
		if m.add(p.topic, p.partition) {
			changed = true
		}
	}
	if !changed {
		return 0
	}
	nowMs := now.UnixMilli()
	if m.state != stateOngoing {
		m.state, m.startMs = stateOngoing, nowMs
	}
	m.lastUpdateMs = nowMs
	e.write(m)
	return 0
}

// verify answers whether a partition is in the producer's ongoing
// transaction (KIP-890 part 1: the partition leader asks before it
// appends a transactional batch): 0 or INVALID_TXN_STATE / a fence.
func (mc *machine) verify(id string, pid int64, epoch int16, topic string, partition int32) int16 {
	m := mc.txns[id]
	if m == nil || m.pid != pid {
		return kerr.InvalidProducerIDMapping.Code
	}
	if epoch < m.epoch {
		return kerr.InvalidProducerEpoch.Code
	}
	if m.state != stateOngoing || epoch != m.epoch || !m.has(topic, partition) {
		return kerr.InvalidTxnState.Code
	}
	return 0
}

// endTxn starts committing or aborting the ongoing transaction. wait
// reports that the reply must wait for the markers (the transaction's
// outcome is visible everywhere once EndTxn is answered).
func (mc *machine) endTxn(id string, pid int64, epoch int16, commit bool, now time.Time, newCodes bool, e *effects) (code int16, wait bool) {
	m := mc.txns[id]
	if code := check(m, pid, epoch, newCodes); code != 0 {
		return code, false
	}
	switch m.state {
	case stateOngoing:
		m.state = statePrepareAbort
		if commit {
			m.state = statePrepareCommit
		}
		m.lastUpdateMs, m.tv2 = now.UnixMilli(), false
		e.write(m)
		e.markers = append(e.markers, markerJob{id: id, pid: m.pid, epoch: m.epoch, commit: commit, partitions: m.list()})
		return 0, true
	case stateCompleteCommit:
		if commit {
			return 0, false // a retry of a commit that finished
		}
	case stateCompleteAbort:
		if !commit {
			return 0, false
		}
	case statePrepareCommit:
		if commit {
			return 0, true // a retry: answered when the markers are written
		}
	case statePrepareAbort:
		if !commit {
			return 0, true
		}
	}
	return kerr.InvalidTxnState.Code, false
}

// endTxnV2 is EndTxn v5+ (KIP-890 part 2, transaction.version 2): the
// epoch is bumped by every EndTxn, the markers carry the bumped epoch
// (fencing the transaction's own late writes), and the client continues
// with the bumped epoch (or, once the epochs are exhausted, a new
// producer ID at epoch 0), read from m once the markers are written. An
// abort with no transaction open is allowed and bumps the epoch too. A
// retry of an EndTxn whose answer was lost (the previous epoch) gets the
// same outcome.
func (mc *machine) endTxnV2(id string, pid int64, epoch int16, commit bool, now time.Time, allocate func() (int64, error), e *effects) (code int16, wait bool) {
	m := mc.txns[id]
	if m == nil {
		return kerr.InvalidProducerIDMapping.Code, false
	}
	done, preparing := stateCompleteAbort, statePrepareAbort
	if commit {
		done, preparing = stateCompleteCommit, statePrepareCommit
	}
	retry := (pid == m.pid && epoch == m.epoch-1) || (m.lastPid >= 0 && pid == m.lastPid && epoch == m.lastEpoch-1)
	if retry && m.tv2 {
		switch m.state {
		case done:
			return 0, false
		case preparing:
			return 0, true
		}
	}
	if code := check(m, pid, epoch, true); code != 0 {
		return code, false
	}
	switch m.state {
	case stateOngoing:
	case stateEmpty, stateCompleteCommit, stateCompleteAbort:
		if commit {
			return kerr.InvalidTxnState.Code, false
		}
		m.partitions = map[string]map[int32]struct{}{} // an empty abort
	case statePrepareCommit, statePrepareAbort:
		if m.state == preparing {
			return kerr.ConcurrentTransactions.Code, false
		}
		return kerr.InvalidTxnState.Code, false
	default:
		return kerr.InvalidTxnState.Code, false
	}
	if m.epoch+1 >= math.MaxInt16-1 {
		next, err := allocate()
		if err != nil {
			return kerr.CoordinatorNotAvailable.Code, false
		}
		m.nextPid = next
	}
	m.epoch++
	m.state, m.tv2, m.lastUpdateMs = preparing, true, now.UnixMilli()
	m.lastPid, m.lastEpoch = -1, -1
	e.write(m)
	e.markers = append(e.markers, markerJob{id: id, pid: m.pid, epoch: m.epoch, commit: commit, partitions: m.list()})
	return 0, true
}

// markersWritten completes a transaction whose markers are all written:
// CompleteCommit or CompleteAbort, partitions cleared. False when the
// transaction moved on meanwhile (nothing to do).
func (mc *machine) markersWritten(j markerJob, now time.Time, e *effects) bool {
	m := mc.txns[j.id]
	want := statePrepareAbort
	if j.commit {
		want = statePrepareCommit
	}
	if m == nil || m.pid != j.pid || m.epoch != j.epoch || m.state != want {
		return false
	}
	m.state = stateCompleteAbort
	if j.commit {
		m.state = stateCompleteCommit
	}
	if m.nextPid >= 0 {
		// KIP-890 part 2 at the last epoch: the client goes on with a
		// new producer ID (a retry names the old one, kept in last*).
		m.lastPid, m.lastEpoch = m.pid, m.epoch
		m.pid, m.epoch, m.nextPid = m.nextPid, 0, -1
	}
	m.partitions = map[string]map[int32]struct{}{}
	m.lastUpdateMs, m.startMs = now.UnixMilli(), -1
	e.write(m)
	return true
}

// abortTimedOut aborts (with an epoch bump) every ongoing transaction
// older than its timeout.
func (mc *machine) abortTimedOut(now time.Time, e *effects) int {
	nowMs := now.UnixMilli()
	n := 0
	for _, id := range mc.sortedIDs() {
		m := mc.txns[id]
		if m.state == stateOngoing && m.startMs >= 0 && nowMs-m.startMs > int64(m.timeoutMs) {
			mc.abort(m, now, e)
			n++
		}
	}
	return n
}

// expire forgets transactional IDs with no transaction in flight whose
// last update is older than expiration (transactional.id.expiration.ms),
// writing their tombstones.
func (mc *machine) expire(now time.Time, expiration time.Duration, e *effects) int {
	nowMs := now.UnixMilli()
	n := 0
	for _, id := range mc.sortedIDs() {
		m := mc.txns[id]
		switch m.state {
		case stateEmpty, stateCompleteCommit, stateCompleteAbort:
		default:
			continue
		}
		if nowMs-m.lastUpdateMs > expiration.Milliseconds() {
			delete(mc.txns, id)
			e.records = append(e.records, record{Key: encodeKey(id)})
			n++
		}
	}
	return n
}

// pending lists the transactions waiting for markers (after a load they
// are sent again: a marker written twice is harmless).
func (mc *machine) pending() []markerJob {
	var out []markerJob
	for _, id := range mc.sortedIDs() {
		m := mc.txns[id]
		if m.state == statePrepareCommit || m.state == statePrepareAbort {
			out = append(out, markerJob{id: id, pid: m.pid, epoch: m.epoch, commit: m.state == statePrepareCommit, partitions: m.list()})
		}
	}
	return out
}

func (mc *machine) sortedIDs() []string {
	ids := make([]string, 0, len(mc.txns))
	for id := range mc.txns {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
