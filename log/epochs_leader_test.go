package log

import (
	"testing"

	"github.com/strata-io/strata/segment"
)

// A leader's current epoch counts as starting at the log end until a batch
// of it is written, as in Kafka's leader-epoch cache.
func TestEndOffsetForLeaderEpoch(t *testing.T) {
	m := testManager(t, segment.NewMemFS(), newClock())
	defer m.Close()
	p, err := m.Open(tp0, Config{})
	if err != nil {
		t.Fatal(err)
	}
	type q struct{ epoch, current int32 }
	check := func(want map[q][2]int64) {
		t.Helper()
		for r, w := range want {
			if e, o := p.EndOffsetForLeaderEpoch(r.epoch, r.current); int64(e) != w[0] || o != w[1] {
				t.Errorf("epoch %d (current %d): got %d %d, want %d %d", r.epoch, r.current, e, o, w[0], w[1])
			}
		}
	}
	// Empty log.
	check(map[q][2]int64{
		{0, 0}: {0, 0}, {1, 0}: {-1, -1}, {-1, 0}: {-1, -1}, {0, -1}: {-1, -1},
		{0, 2}: {0, 0}, {2, 2}: {2, 0},
	})
	// epoch 1: offsets 0-3, epoch 3: 4-7.
	for _, ep := range []int32{1, 1, 3, 3} {
		res, err := p.Append(makeBatch(t, spec{n: 2}), ep)
		if err != nil {
			t.Fatal(err)
		}
		p.Commit(res.LastOffset + 1)
	}
	check(map[q][2]int64{
		// current is the last written epoch: as EndOffsetForEpoch.
		{0, 3}: {0, 0}, {1, 3}: {1, 4}, {2, 3}: {1, 4}, {3, 3}: {3, 8}, {4, 3}: {-1, -1},
		// A newer current epoch with nothing written yet starts at 8.
		{3, 5}: {3, 8}, {4, 5}: {3, 8}, {5, 5}: {5, 8}, {6, 5}: {-1, -1}, {2, 5}: {1, 4},
		// An older current epoch than the log's (a stale caller) adds nothing.
		{3, 1}: {3, 8}, {5, 1}: {-1, -1},
	})
}
