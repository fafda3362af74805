package log

import (
	"slices"
	"sync"
)

// maxWaitKeys bounds the distinct offsets with their own channel; past
// it, waiters share one channel closed on every advance (they then wake
// early and re-check, which is allowed for long polls).
const maxWaitKeys = 1024

// closedCh is returned when the wait is already over.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// waiters hands out channels closed when the high watermark passes an
// offset. Nothing is registered per caller: all waiters for an offset
// share one channel, so a waiter that gives up leaves nothing behind but
// that shared channel, removed when the high watermark passes it.
type waiters struct {
	mu       sync.Mutex
	hw       int64                   // protected by mu; a copy of the partition's high watermark
	closed   bool                    // protected by mu
	byOffset map[int64]chan struct{} // protected by mu; keys >= hw
	overflow chan struct{}           // protected by mu; nil when unused
	notifies []notifyEntry           // protected by mu; offsets >= hw
}

// notifyEntry is one registered Notify: a send on ch once the high
// watermark passes off.
type notifyEntry struct {
	off int64
	ch  chan<- struct{}
}

// notify registers ch (buffered) for a non-blocking send once the high
// watermark passes offset, and reports true; false, registering nothing,
// when it already has (or the waiters are closed).
func (w *waiters) notify(offset int64, ch chan<- struct{}) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.hw > offset {
		return false
	}
	w.notifies = append(w.notifies, notifyEntry{off: offset, ch: ch})
	return true
}

// unnotify removes ch's registrations (those not yet fired).
func (w *waiters) unnotify(ch chan<- struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notifies = slices.DeleteFunc(w.notifies, func(e notifyEntry) bool { return e.ch == ch })
}

// fireLocked sends (without blocking) to the registrations below hw, or
// to all when all is set, and drops them.
func (w *waiters) fireLocked(hw int64, all bool) {
	w.notifies = slices.DeleteFunc(w.notifies, func(e notifyEntry) bool {
		if !all && e.off >= hw {
			return false
		}
		select {
		case e.ch <- struct{}{}:
		default:
		}
		return true
	})
}

func (w *waiters) wait(offset int64) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.hw > offset {
		return closedCh
	}
	if ch, ok := w.byOffset[offset]; ok {
		return ch
	}
	if len(w.byOffset) >= maxWaitKeys {
		if w.overflow == nil {
			w.overflow = make(chan struct{})
		}
		return w.overflow
	}
	if w.byOffset == nil {
		w.byOffset = map[int64]chan struct{}{}
	}
	ch := make(chan struct{})
	w.byOffset[offset] = ch
	return ch
}

// advance records a new high watermark and wakes those waiting below it.
func (w *waiters) advance(hw int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if hw <= w.hw {
		return // a racing Commit already advanced further
	}
	w.hw = hw
	for off, ch := range w.byOffset {
		if off < hw {
			close(ch)
			delete(w.byOffset, off)
		}
	}
	if w.overflow != nil {
		close(w.overflow)
		w.overflow = nil
	}
	w.fireLocked(hw, false)
}

// close wakes everyone for good (partition closed or deleted).
func (w *waiters) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	for off, ch := range w.byOffset {
		close(ch)
		delete(w.byOffset, off)
	}
	if w.overflow != nil {
		close(w.overflow)
		w.overflow = nil
	}
	w.fireLocked(0, true)
}
