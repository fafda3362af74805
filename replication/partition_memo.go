package replication

import (
	"sync"
	"sync/atomic"
	"time"
)

// A leader reads each batch back for every follower: hashicorp/raft's
// replication calls GetLog for the entries it sends and once more for the
// entry before them (setPreviousLog wants only its term, but GetLog
// returns the data), and a follower reads each batch back to apply it
// (raft's processLogs; the FSM needs only the index). At RF 3 that was
// five locked preads and zeroed allocations per batch, a fifth of a
// broker's produce CPU. batchMemo keeps the few batches a partition's
// raft touched last, by index: a leader's own appends (copied once: the
// producer's buffer is reused once Produce returns), a follower's
// (its own already: transport/codec.go's owned decoding) and batches read
// back from the segments. Entries are
// read-only once put. They leave once applied but for the last
// memoKeepApplied, when their slot is reused, when the log is truncated
// under them, after memoMaxAge (sweepMemos), or are not kept at all past
// memoBudget bytes for the whole process.

const (
	// memoSlots is how many batches one partition keeps: a producer has
	// a few batches in flight per partition, raft reads each back within
	// milliseconds.
	memoSlots = 16
	// memoMaxAge is how long a batch stays: raft reads a batch back for
	// its followers within milliseconds of the append under load.
	memoMaxAge = time.Second
	// memoKeepApplied is how many applied batches stay (the rest are
	// dropped as they are applied): a memo holds what is in flight.
	memoKeepApplied = 2
	// memoBudget bounds all partitions' memos together.
	memoBudget = 64 << 20
)

// memoBytes is what all memos hold (bounded by memoBudget).
var memoBytes atomic.Int64

// batchMemo is one partition's kept batches. The zero value is empty.
type batchMemo struct {
	mu    sync.Mutex
	slots [memoSlots]memoEntry // protected by mu; index % memoSlots
	held  int                  // protected by mu; entries with data
}

type memoEntry struct {
	index uint64
	data  []byte
	at    int64 // monotonic-free wall clock, unix nanoseconds
}

// put keeps data as entry index's batch; the memo owns data from now on
// (nobody may write to it).
func (m *batchMemo) put(index uint64, data []byte) {
	if len(data) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := &m.slots[index%memoSlots]
	m.clearLocked(e)
	if memoBytes.Load()+int64(len(data)) > memoBudget {
		return
	}
	memoBytes.Add(int64(len(data)))
	*e = memoEntry{index: index, data: data, at: time.Now().UnixNano()}
	m.held++
}

// get returns entry index's batch (read-only), or nil.
func (m *batchMemo) get(index uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := &m.slots[index%memoSlots]; e.data != nil && e.index == index {
		return e.data
	}
	return nil
}

// drop forgets the entries whose index matches (a truncated tail, a
// snapshot install).
func (m *batchMemo) drop(match func(index uint64) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == 0 {
		return
	}
	for i := range m.slots {
		if e := &m.slots[i]; e.data != nil && match(e.index) {
			m.clearLocked(e)
		}
	}
}

// sweep forgets the entries put before cutoff (unix nanoseconds).
func (m *batchMemo) sweep(cutoff int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == 0 {
		return
	}
	for i := range m.slots {
		if e := &m.slots[i]; e.data != nil && e.at < cutoff {
			m.clearLocked(e)
		}
	}
}

func (m *batchMemo) clearLocked(e *memoEntry) {
	if e.data == nil {
		return
	}
	memoBytes.Add(-int64(len(e.data)))
	*e = memoEntry{}
	m.held--
}

// sweepMemos empties the memos of idle partitions every memoMaxAge until
// the broker stops.
func (r *partitionReplicas) sweepMemos() {
	defer close(r.memoDone)
	t := time.NewTicker(memoMaxAge)
	defer t.Stop()
	var stores []*partitionStore
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		stores = stores[:0]
		r.groupsMu.RLock()
		for _, g := range r.groups {
			stores = append(stores, g.store)
		}
		r.groupsMu.RUnlock()
		cutoff := time.Now().Add(-memoMaxAge).UnixNano()
		for _, s := range stores {
			s.memo.sweep(cutoff)
		}
	}
}
