package log

import (
	"errors"
	"syscall"
	"testing"

	"github.com/strata-io/strata/segment"
)

// An append that meets ENOSPC fails alone: nothing of it is in the log,
// the partition does not stick, and appends work again once space
// returns; a crash then finds every acknowledged batch.
func TestAppendOnFullDiskRecovers(t *testing.T) {
	fsys := segment.NewMemFS()
	c := newClock()
	m := testManager(t, fsys, c)
	p, _ := m.Open(tp0, Config{FlushIntervalMessages: 1})
	res, err := p.Append(makeBatch(t, spec{n: 2, valueLen: 10}), 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Commit(res.LastOffset + 1)
	fsys.SetFull(true)
	for i := 0; i < 2; i++ {
		if _, err := p.Append(makeBatch(t, spec{n: 2, valueLen: 10}), 0); !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append on a full disk: %v", err)
		}
	}
	if o := p.Offsets(); o.LogEnd != 2 {
		t.Fatalf("offsets moved: %+v", o)
	}
	if r, err := p.Read(0, 1000); err != nil || len(r.Records) == 0 {
		t.Fatalf("read on a full disk: %v", err)
	}
	fsys.SetFull(false)
	res, err = p.Append(makeBatch(t, spec{n: 2, valueLen: 10}), 0)
	if err != nil || res.BaseOffset != 2 {
		t.Fatalf("append once space returned: %+v %v", res, err)
	}
	p.Commit(res.LastOffset + 1)
	m.Close()
	fsys.ResetToSyncedState()
	m = testManager(t, fsys, c)
	defer m.Close()
	p = m.Get(tp0)
	if o := p.Offsets(); o.LogEnd != 4 {
		t.Fatalf("after a crash: %+v, want log end 4", o)
	}
}
