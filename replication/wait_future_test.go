package replication

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// blockedFuture is an entry left in a stopped raft's apply queue: its
// Error never returns.
type blockedFuture struct{ block chan struct{} }

func (f blockedFuture) Error() error { <-f.block; return nil }

// A proposal whose future raft never answers ends when the broker closes.
func TestWaitFutureEndsAtClose(t *testing.T) {
	b := &metadataQuorum{node: &node{stop: make(chan struct{})}}
	f := blockedFuture{block: make(chan struct{})}
	defer close(f.block)
	time.AfterFunc(50*time.Millisecond, func() { close(b.stop) })
	done := make(chan error, 1)
	go func() { done <- b.waitFuture(f) }()
	select {
	case err := <-done:
		if !errors.Is(err, raft.ErrRaftShutdown) {
			t.Fatalf("waitFuture: %v, want ErrRaftShutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waitFuture waited past Close")
	}
	// An answered future is returned as is.
	b2 := &metadataQuorum{node: &node{stop: make(chan struct{})}}
	ok := blockedFuture{block: make(chan struct{})}
	close(ok.block)
	if err := b2.waitFuture(ok); err != nil {
		t.Fatalf("answered future: %v", err)
	}
}
