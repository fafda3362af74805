package protocol

import (
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRecoverPartition: a panic in a produce fan-out goroutine fails its
// partition with UNKNOWN_SERVER_ERROR and is counted; the other partitions
// and the process go on.
func TestRecoverPartition(t *testing.T) {
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	codes := make([]int16, 3)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.recoverPartition(&codes[i], "produce", "t", int32(i))
			if i == 1 {
				var m map[string]int
				m["x"]++ // panics
			}
		}()
	}
	wg.Wait()
	if codes[0] != 0 || codes[1] != kerr.UnknownServerError.Code || codes[2] != 0 {
		t.Fatalf("codes %v", codes)
	}
	if n := s.panics.Load(); n != 1 {
		t.Fatalf("panics %d, want 1", n)
	}
}
