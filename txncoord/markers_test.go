package txncoord

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/replication"
)

// markerRecorder stands for the broker under writeMarkers: it records the
// markers written and runs a hook before each.
type markerRecorder struct {
	mu      sync.Mutex
	written []tp
	before  func(p tp) error
}

func (r *markerRecorder) coordinator(verify func() error) *Coordinator {
	c := &Coordinator{cfg: Config{}.withDefaults()}
	c.verifyLeader = func(context.Context, int32) error { return verify() }
	c.writeLocal = func(_ context.Context, topic string, partition int32, _ int64, _ int16, _ bool, _ int32) error {
		p := tp{topic, partition}
		if r.before != nil {
			if err := r.before(p); err != nil {
				return err
			}
		}
		r.mu.Lock()
		r.written = append(r.written, p)
		r.mu.Unlock()
		return nil
	}
	return c
}

// A coordinator deposed while it writes a transaction's markers writes no
// more of them: a late marker from it would end the producer's next
// transaction (KIP-890 part 2 markers carry the next transaction's
// epoch). The fault harness found such a marker landing after the next
// transaction's records (seed 3; writeMarkers' comment).
func TestMarkersStopWhenDeposed(t *testing.T) {
	job := markerJob{id: "a", pid: 1000, epoch: 5, commit: true, partitions: []tp{{"t", 0}, {"t", 1}, {"t", 2}}}

	// Deposed during the first attempt: its first write fails (leadership
	// of the partition moved) and the shard stops; the retry must not come.
	stop := make(chan struct{})
	r := &markerRecorder{}
	r.before = func(p tp) error {
		if p.partition == 0 {
			close(stop)
			return errors.New("leadership lost while committing log")
		}
		return nil
	}
	c := r.coordinator(func() error { return nil })
	done := make(chan error, 1)
	go func() { done <- c.writeMarkers(stop, 3, job, 6) }()
	select {
	case err := <-done:
		if !errors.Is(err, errStopped) {
			t.Fatalf("writeMarkers = %v, want errStopped", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("writeMarkers went on after its shard stopped")
	}
	if len(r.written) != 0 {
		t.Fatalf("a stopped coordinator wrote markers %v", r.written)
	}

	// A coordinator that can no longer confirm its leadership with a
	// quorum (paused, or cut off, and not yet told) writes nothing, and
	// writes once it confirms again.
	r = &markerRecorder{}
	var mu sync.Mutex
	leads := false
	verifies := 0
	c = r.coordinator(func() error {
		mu.Lock()
		defer mu.Unlock()
		verifies++
		if verifies == 3 {
			if len(r.written) != 0 {
				t.Errorf("markers %v written before leadership was confirmed", r.written)
			}
			leads = true
		}
		if !leads {
			return errors.New("not leader")
		}
		return nil
	})
	if err := c.writeMarkers(make(chan struct{}), 3, job, 6); err != nil {
		t.Fatal(err)
	}
	if len(r.written) != 3 || verifies != 3 {
		t.Fatalf("written %v after %d verifications, want all 3 after 3", r.written, verifies)
	}
}

// A coordinator told by the quorum that another broker leads its
// partition writes nothing and reports errDeposed, so its shard halts
// and its EndTxn waiters find the new coordinator (the long fault run saw
// a shard retry for minutes while the metadata still named it).
func TestMarkersDeposedHalts(t *testing.T) {
	job := markerJob{id: "a", pid: 1000, epoch: 5, commit: true, partitions: []tp{{"t", 0}}}
	r := &markerRecorder{}
	c := r.coordinator(func() error {
		return fmt.Errorf("%w: __transaction_state-3 is led by broker 5", replication.ErrNotLeader)
	})
	err := c.writeMarkers(make(chan struct{}), 3, job, 6)
	if !errors.Is(err, errDeposed) {
		t.Fatalf("writeMarkers = %v, want errDeposed", err)
	}
	if len(r.written) != 0 {
		t.Fatalf("a deposed coordinator wrote markers %v", r.written)
	}
}
