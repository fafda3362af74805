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
