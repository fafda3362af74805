package log

import (
	"testing"
)

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestWaitersBoundedAndShared(t *testing.T) {
	var w waiters
	w.hw = 10
	if !isClosed(w.wait(5)) {
		t.Fatal("offset below hw must not wait")
	}
	a, b := w.wait(10), w.wait(10)
	if a != b {
		t.Fatal("waiters on one offset must share a channel")
	}
	// Many distinct offsets: the table stays bounded.
	var far []<-chan struct{}
	for off := int64(11); off < 11+3*maxWaitKeys; off++ {
		far = append(far, w.wait(off))
	}
	if len(w.byOffset) > maxWaitKeys {
		t.Fatalf("%d keys", len(w.byOffset))
	}
	w.advance(11)
	if !isClosed(a) {
		t.Fatal("waiter at 10 not woken by hw 11")
	}
	if isClosed(far[1]) {
		t.Fatal("waiter at 12 woken by hw 11")
	}
	if !isClosed(far[len(far)-1]) {
		t.Fatal("overflow waiters must wake on any advance")
	}
	// A stale (lower) advance never moves hw back.
	w.advance(5)
	if !isClosed(w.wait(10)) {
		t.Fatal("hw moved backwards")
	}
	w.close()
	if !isClosed(far[1]) || !isClosed(w.wait(1<<40)) {
		t.Fatal("close must wake everyone")
	}
	if len(w.byOffset) != 0 {
		t.Fatal("entries left after close")
	}
}

// notify: one channel for many partitions' waits, a non-blocking send once
// the high watermark passes the offset, nothing left behind by unnotify
// or after firing, and a send to everyone at close.
func TestWaitersNotify(t *testing.T) {
	var w waiters
	w.hw = 10
	ch := make(chan struct{}, 1)
	if w.notify(9, ch) {
		t.Fatal("offset below hw must not register")
	}
	if !w.notify(10, ch) || !w.notify(12, ch) {
		t.Fatal("offsets at or above hw must register")
	}
	w.advance(11)
	if !isClosed(ch) {
		t.Fatal("no send when hw passed 10")
	}
	if len(w.notifies) != 1 || w.notifies[0].off != 12 {
		t.Fatalf("registrations after the first fired: %+v", w.notifies)
	}
	// The buffer is full: a second firing must not block.
	ch <- struct{}{}
	w.advance(13)
	if len(w.notifies) != 0 {
		t.Fatalf("registrations left after firing: %+v", w.notifies)
	}
	<-ch
	// A waiter that gives up leaves nothing behind.
	other := make(chan struct{}, 1)
	for i := 0; i < 100; i++ {
		w.notify(20, ch)
		w.notify(20, other)
		w.unnotify(ch)
	}
	if len(w.notifies) != 100 {
		t.Fatalf("%d registrations, want other's 100", len(w.notifies))
	}
	w.unnotify(other)
	if len(w.notifies) != 0 || isClosed(ch) || isClosed(other) {
		t.Fatal("unnotify left registrations or sent")
	}
	w.notify(1<<40, ch)
	w.close()
	if !isClosed(ch) || len(w.notifies) != 0 {
		t.Fatal("close must send to every registration")
	}
	if w.notify(1<<40, ch) {
		t.Fatal("registered after close")
	}
}
