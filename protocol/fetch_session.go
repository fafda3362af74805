package protocol

import (
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Incremental fetch sessions (KIP-227).
//
// A client that sends SessionEpoch 0 asks for a session: the broker
// remembers the partitions of that (full) fetch under a new session ID and
// expects epoch 1 next. An incremental fetch (epoch > 0) names only the
// partitions whose fetch offset or limits changed (Topics) and those to drop
// (ForgottenTopics); the broker reads every partition of the session and
// answers only those with something new: records, an error, or a changed
// high watermark, last stable offset or log start offset. Epoch -1 ends a
// session (and is a sessionless full fetch).
//
// Limits: at most maxFetchSessions sessions per broker (Kafka's
// max.incremental.fetch.session.cache.slots default); creating one more
// evicts the least recently used. A session holds at most
// maxSessionPartitions partitions, and all sessions together at most
// maxCachedPartitions: a full fetch above the first is served without a
// session, a new session evicts old ones to fit the second, and an
// incremental fetch that would pass either ends the session with
// FETCH_SESSION_ID_NOT_FOUND, so the client starts over.
//
// Locking: fetchSessions.mu guards the map; each session's mu is held for
// the whole of one fetch in it (a client sends one fetch per session at a
// time; a second one waits, then fails the epoch check). Lock order: a
// session's mu before fetchSessions.mu (get releases fetchSessions.mu
// before taking the session's).

const (
	maxFetchSessions     = 1000
	maxSessionPartitions = 50000
	// maxCachedPartitions bounds the partitions of all sessions together
	// (about 100 bytes each).
	maxCachedPartitions = 1_000_000
)

type sessionKey struct {
	topic     string
	topicID   [16]byte
	partition int32
}

// sessionPart is one partition of a session: what the client last asked
// for and what the broker last answered.
type sessionPart struct {
	fetchTarget
	// Last values sent (to decide whether an incremental response
	// includes the partition); sent is false until the first answer.
	sent                      bool
	sentHW, sentLSO, sentLogS int64
}

type fetchSession struct {
	id int32

	mu       sync.Mutex // held for the whole of one fetch in the session
	epoch    int32      // epoch of the last answered fetch; the next must be epoch+1 (wrapping to 1); protected by mu
	parts    map[sessionKey]*sessionPart
	order    []sessionKey // insertion order; protected by mu
	lastUsed time.Time    // protected by fetchSessions.mu
	size     int          // partitions counted in fetchSessions.total; protected by fetchSessions.mu
}

type fetchSessions struct {
	mu       sync.Mutex
	nextID   int32
	sessions map[int32]*fetchSession // protected by mu
	// total is the sum of the registered sessions' sizes. Invariant:
	// total <= maxCachedPartitions. Protected by mu.
	total int
}

func (fs *fetchSessions) remove(id int32) {
	fs.mu.Lock()
	fs.removeLocked(id)
	fs.mu.Unlock()
}

func (fs *fetchSessions) removeLocked(id int32) {
	if sess, ok := fs.sessions[id]; ok {
		fs.total -= sess.size
		delete(fs.sessions, id)
	}
}

// resize records that sess now holds n partitions. It returns false (and
// leaves the count alone) when that would pass maxCachedPartitions.
func (fs *fetchSessions) resize(sess *fetchSession, n int) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.sessions[sess.id] != sess {
		return true // evicted meanwhile: not counted
	}
	if fs.total-sess.size+n > maxCachedPartitions {
		return false
	}
	fs.total += n - sess.size
	sess.size = n
	return true
}

// create registers a new session holding targets and returns it locked, or
// nil when targets are too many.
func (fs *fetchSessions) create(targets []fetchTarget, now time.Time) *fetchSession {
	if len(targets) > maxSessionPartitions {
		return nil
	}
	sess := &fetchSession{epoch: 0, parts: make(map[sessionKey]*sessionPart, len(targets))}
	for _, t := range targets {
		sess.upsert(t)
	}
	sess.mu.Lock()

	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.sessions == nil {
		fs.sessions = make(map[int32]*fetchSession)
	}
	// Evict least recently used sessions until this one fits; bounded by
	// the number of sessions.
	for len(fs.sessions) > 0 && (len(fs.sessions) >= maxFetchSessions || fs.total+len(sess.parts) > maxCachedPartitions) {
		var lru *fetchSession
		for _, s := range fs.sessions {
			if lru == nil || s.lastUsed.Before(lru.lastUsed) {
				lru = s
			}
		}
		fs.removeLocked(lru.id)
	}
	for { // IDs are positive and unused; bounded: fewer than maxFetchSessions are taken
		fs.nextID++
		if fs.nextID <= 0 {
			fs.nextID = 1
		}
		if _, taken := fs.sessions[fs.nextID]; !taken {
			break
		}
	}
	sess.id = fs.nextID
	sess.lastUsed = now
	sess.size = len(sess.parts)
	fs.total += sess.size
	fs.sessions[sess.id] = sess
	return sess
}

// get returns session id locked, if it exists and expects epoch; otherwise
// the error code to answer with.
func (fs *fetchSessions) get(id, epoch int32, now time.Time) (*fetchSession, int16) {
	fs.mu.Lock()
	sess, ok := fs.sessions[id]
	if ok {
		sess.lastUsed = now
	}
	fs.mu.Unlock()
	if !ok {
		return nil, kerr.FetchSessionIDNotFound.Code
	}
	sess.mu.Lock()
	if nextEpoch(sess.epoch) != epoch {
		sess.mu.Unlock()
		return nil, kerr.InvalidFetchSessionEpoch.Code
	}
	return sess, 0
}

func (sess *fetchSession) upsert(t fetchTarget) {
	k := sessionKey{t.topic, t.topicID, t.partition}
	if sp, ok := sess.parts[k]; ok {
		sp.fetchTarget = t
		return
	}
	sess.parts[k] = &sessionPart{fetchTarget: t}
	sess.order = append(sess.order, k)
}

// update applies an incremental request. It returns false when the session
// would grow past maxSessionPartitions.
func (sess *fetchSession) update(req *kmsg.FetchRequest) bool {
	for _, t := range requestTargets(req) {
		sess.upsert(t)
	}
	if len(sess.parts) > maxSessionPartitions {
		return false
	}
	removed := false
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			k := sessionKey{ft.Topic, ft.TopicID, p}
			if req.Version >= 13 {
				k.topic = ""
			} else {
				k.topicID = [16]byte{}
			}
			if _, ok := sess.parts[k]; ok {
				delete(sess.parts, k)
				removed = true
			}
		}
	}
	if removed {
		kept := sess.order[:0]
		for _, k := range sess.order {
			if _, ok := sess.parts[k]; ok {
				kept = append(kept, k)
			}
		}
		sess.order = kept
	}
	return true
}

// targets lists the session's partitions in insertion order.
func (sess *fetchSession) targets() []fetchTarget {
	out := make([]fetchTarget, 0, len(sess.order))
	for _, k := range sess.order {
		out = append(out, sess.parts[k].fetchTarget)
	}
	return out
}

// answered records what was sent for parts and, for an incremental fetch,
// drops from resp the partitions with nothing new. epoch is the request's
// (0 for the full fetch that created the session).
func (sess *fetchSession) answered(resp *kmsg.FetchResponse, parts []*fetchPart, epoch int32) {
	incremental := epoch > 0
	keep := make(map[*kmsg.FetchResponseTopicPartition]bool, len(parts))
	for _, fp := range parts {
		sp := sess.parts[sessionKey{fp.target.topic, fp.target.topicID, fp.target.partition}]
		r := fp.resp
		changed := sp == nil || !sp.sent || len(r.RecordBatches) > 0 || fp.region != nil || r.ErrorCode != 0 ||
			r.HighWatermark != sp.sentHW || r.LastStableOffset != sp.sentLSO || r.LogStartOffset != sp.sentLogS
		if sp != nil {
			sp.sent, sp.sentHW, sp.sentLSO, sp.sentLogS = true, r.HighWatermark, r.LastStableOffset, r.LogStartOffset
		}
		keep[r] = changed || !incremental
	}
	if incremental {
		topics := resp.Topics[:0]
		for _, t := range resp.Topics {
			ps := t.Partitions[:0]
			for i := range t.Partitions {
				if keep[&t.Partitions[i]] {
					ps = append(ps, t.Partitions[i])
				}
			}
			if len(ps) > 0 {
				t.Partitions = ps
				topics = append(topics, t)
			}
		}
		resp.Topics = topics
	}
	sess.epoch = epoch
}

func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}
