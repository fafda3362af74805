package main

import (
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testwait"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// SIGTERM makes `strata serve` shut down cleanly with exit status 0.
func TestServeSIGTERM(t *testing.T) {
	requireStorage(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	var logs syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"serve", "--listeners", "PLAINTEXT://" + addr, "--log-dirs", t.TempDir()}, nil, io.Discard, &logs)
	}()
	// The signal handler is installed before the listener opens, so once a
	// connection succeeds the signal goes to serve, not to the test process.
	deadline := time.Now().Add(20 * time.Second)
	if !testwait.Until(20*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return true
		}
		select {
		case rc := <-code:
			t.Fatalf("serve exited with %d before it was ready:\n%s", rc, logs.String())
		default:
		}
		return false
	}) {
		t.Fatalf("serve not listening within 20s:\n%s", logs.String())
	}
	if !testwait.Until(time.Until(deadline), func() bool { return strings.Contains(logs.String(), "strata ready") }) {
		t.Fatalf("no ready line:\n%s", logs.String())
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case rc := <-code:
		if rc != 0 {
			t.Fatalf("exit %d:\n%s", rc, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit within 20s of SIGTERM:\n%s", logs.String())
	}
	for _, want := range []string{"strata ready", "listener=" + addr, "shutting down", "strata stopped"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}
