package log

import (
	"testing"

	"github.com/strata-io/strata/segment"
)

func TestLeaderEpochCache(t *testing.T) {
	fsys := segment.NewMemFS()
	c := newClock()
	m := testManager(t, fsys, c)
	p, _ := m.Open(tp0, Config{})
	if e, o := p.EndOffsetForEpoch(0); e != -1 || o != -1 {
		t.Fatalf("empty: %d %d", e, o)
	}
	// epoch 1: offsets 0-3, epoch 3: 4-7, epoch 4: 8-
	for _, ep := range []int32{1, 1, 3, 3, 4} {
		res, err := p.Append(makeBatch(t, spec{n: 2}), ep)
		if err != nil {
			t.Fatal(err)
		}
		p.Commit(res.LastOffset + 1)
	}
	check := func(p *Partition, want map[int32][2]int64) {
		t.Helper()
		for req, w := range want {
			if e, o := p.EndOffsetForEpoch(req); int64(e) != w[0] || o != w[1] {
				t.Errorf("epoch %d: got %d %d, want %d %d", req, e, o, w[0], w[1])
			}
		}
	}
	want := map[int32][2]int64{0: {0, 0}, 1: {1, 4}, 2: {1, 4}, 3: {3, 8}, 4: {4, 10}, 5: {-1, -1}}
	check(p, want)
	m.Close()
	m = testManager(t, fsys, c)
	p = m.Get(tp0)
	check(p, want)
	// Truncating the uncommitted epoch-5 tail drops its entry.
	res, _ := p.Append(makeBatch(t, spec{n: 2}), 5)
	if e, o := p.EndOffsetForEpoch(5); e != 5 || o != 12 {
		t.Fatalf("epoch 5: %d %d", e, o)
	}
	if err := p.TruncateTo(res.BaseOffset); err != nil {
		t.Fatal(err)
	}
	check(p, want)
	m.crash()
	// A lost cache file is rebuilt from the batches.
	fsys.Remove("/data/" + tp0.String() + "/" + epochCheckpointFile)
	m = testManager(t, fsys, c)
	defer m.Close()
	check(m.Get(tp0), want)
}
