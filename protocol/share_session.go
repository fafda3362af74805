package protocol

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Share sessions (KIP-932): a member's set of partitions on this broker,
// kept between ShareFetch requests so that each names only what changed.
// A session is keyed by group and member; ShareSessionEpoch 0 opens one
// (replacing the member's previous session), each later request carries
// the next epoch (1, 2, ... wrapping to 1), and -1 closes it, releasing
// the member's acquired records of its partitions.
//
// Errors: SHARE_SESSION_NOT_FOUND for an epoch > 0 or -1 with no session,
// INVALID_SHARE_SESSION_EPOCH for the wrong epoch, and
// SHARE_SESSION_LIMIT_REACHED when group.share.max.share.sessions are
// open. A session whose member is gone is found by the next epoch-0
// request of that member or closed by its -1; otherwise it stays until the
// limit needs room: then the least recently used session is evicted if
// it has been idle for shareSessionIdle, else the new one is refused.

type shareSessionKey struct{ group, member string }

type shareSession struct {
	epoch int32 // the epoch the next request must carry
	parts map[shareTPKey]struct{}
	order []shareTPKey // parts in the order they were added, for fair rotation
	used  time.Time    // last use, for eviction
	// held counts the session's fetches in a row answered early because
	// the member's own locks filled a lock window (heldWait).
	held int
	// unwatch stops watching the connection that opened the session (set
	// by the caller of open; protected by shareSessions.mu).
	unwatch func() bool
}

// stopWatching drops the connection watch of a session that ended.
func (ss *shareSession) stopWatching() {
	if ss != nil && ss.unwatch != nil {
		ss.unwatch()
	}
}

// watch records the connection watch of ss.
func (s *shareSessions) watch(ss *shareSession, unwatch func() bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss.unwatch = unwatch
}

type shareTPKey struct {
	topicID   [16]byte
	partition int32
}

// shareSessionIdle is how long a session must be unused before a new one
// may evict it.
const shareSessionIdle = time.Minute

type shareSessions struct {
	mu       sync.Mutex
	max      int
	now      func() time.Time
	sessions map[shareSessionKey]*shareSession // protected by mu
}

func newShareSessions(max int, now func() time.Time) *shareSessions {
	return &shareSessions{max: max, now: now, sessions: map[shareSessionKey]*shareSession{}}
}

func nextShareEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// open starts a new session for k with parts (epoch 0). The member's old
// session, if any, is replaced. The new session is returned for closeIf.
func (s *shareSessions) open(k shareSessionKey, parts []shareTPKey) (ns *shareSession, code int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.sessions[k]; old != nil {
		old.stopWatching()
	} else if len(s.sessions) >= s.max && !s.evictLocked() {
		return nil, kerr.ShareSessionLimitReached.Code
	}
	ns = &shareSession{epoch: 1, parts: map[shareTPKey]struct{}{}}
	ns.add(parts)
	ns.used = s.now()
	s.sessions[k] = ns
	return ns, 0
}

// closeIf closes k's session if it is still ss (its connection closed:
// Kafka ties a share session to the connection that opened it) and
// returns its partitions.
func (s *shareSessions) closeIf(k shareSessionKey, ss *shareSession) []shareTPKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[k] != ss {
		return nil
	}
	delete(s.sessions, k)
	return append([]shareTPKey(nil), ss.order...)
}

// evictLocked drops the least recently used session if it is idle.
func (s *shareSessions) evictLocked() bool {
	var victim shareSessionKey
	var oldest time.Time
	found := false
	for k, v := range s.sessions {
		if !found || v.used.Before(oldest) {
			victim, oldest, found = k, v.used, true
		}
	}
	if !found || s.now().Sub(oldest) < shareSessionIdle {
		return false
	}
	s.sessions[victim].stopWatching()
	delete(s.sessions, victim)
	return true
}

func (ss *shareSession) add(parts []shareTPKey) {
	for _, p := range parts {
		if _, ok := ss.parts[p]; !ok {
			ss.parts[p] = struct{}{}
			ss.order = append(ss.order, p)
		}
	}
}

func (ss *shareSession) forget(parts []shareTPKey) {
	if len(parts) == 0 {
		return
	}
	for _, p := range parts {
		delete(ss.parts, p)
	}
	kept := ss.order[:0]
	for _, p := range ss.order {
		if _, ok := ss.parts[p]; ok {
			kept = append(kept, p)
		}
	}
	ss.order = kept
}

// next checks epoch against k's session, applies the changes, advances
// the epoch and returns the session's partitions (rotated by the epoch, so
// that no partition always comes first).
func (s *shareSessions) next(k shareSessionKey, epoch int32, add, forget []shareTPKey) ([]shareTPKey, int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[k]
	if ss == nil {
		return nil, kerr.ShareSessionNotFound.Code
	}
	if epoch != ss.epoch {
		return nil, kerr.InvalidShareSessionEpoch.Code
	}
	ss.add(add)
	ss.forget(forget)
	ss.epoch = nextShareEpoch(ss.epoch)
	ss.used = s.now()
	n := len(ss.order)
	out := make([]shareTPKey, n)
	for i := range n {
		out[i] = ss.order[(i+int(epoch))%n]
	}
	return out, 0
}

// Bounds of the early answer to a member whose own locks fill a lock
// window: the first after heldWaitMin, each next one in a row twice as
// late, up to heldWaitMax (and never later than the fetch's MaxWaitMs).
const (
	heldWaitMin = 5 * time.Millisecond
	heldWaitMax = 1 * time.Second
)

// heldWait, for a fetch of k's session that found a lock window full of
// the member's own locks (held), returns how long it may wait: heldWaitMin,
// doubled for each such fetch in a row. A fetch that was not held ends the
// streak.
func (s *shareSessions) heldWait(k shareSessionKey, held bool) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[k]
	if ss == nil {
		return heldWaitMin
	}
	if !held {
		ss.held = 0
		return 0
	}
	d := heldWaitMin << min(ss.held, 10)
	ss.held++
	return min(d, heldWaitMax)
}

// close ends k's session; its partitions are returned so the member's
// records on them can be released.
func (s *shareSessions) close(k shareSessionKey) ([]shareTPKey, int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[k]
	if ss == nil {
		return nil, kerr.ShareSessionNotFound.Code
	}
	ss.stopWatching()
	delete(s.sessions, k)
	return append([]shareTPKey(nil), ss.order...), 0
}

// check verifies that k's session exists at epoch (ShareAcknowledge) and
// advances it.
func (s *shareSessions) check(k shareSessionKey, epoch int32) int16 {
	_, code := s.next(k, epoch, nil, nil)
	return code
}

// count is the number of open sessions.
func (s *shareSessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}
