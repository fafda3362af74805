package log

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/strata-io/strata/segment"
)

// TestFaultSweep injects one failure at every position of every kind of
// filesystem operation into a workload (appends, flushes, rolls,
// truncations), stops at the first error as a crashing process would,
// drops everything not synced, reopens, and checks: the recovered log is a
// byte-identical prefix of what was acknowledged, everything covered by a
// successful Flush is there, and the partition takes writes again.
func TestFaultSweep(t *testing.T) {
	ops := []segment.Op{segment.OpWrite, segment.OpSync, segment.OpCreate, segment.OpTruncate,
		segment.OpRename, segment.OpSyncDir, segment.OpMap, segment.OpRemove, segment.OpOpen}
	cfg := Config{SegmentBytes: 1500, IndexIntervalBytes: 100, SegmentIndexBytes: 512}
	hits := map[segment.Op]int{}
	defer func() { t.Logf("runs that hit their fault, by op: %v", hits) }()
	for _, op := range ops {
		for k := 0; k < 14; k++ {
			t.Run(fmt.Sprintf("%s-%d", op, k), func(t *testing.T) {
				fsys := segment.NewMemFS()
				c := newClock()
				m := testManager(t, fsys, c)
				p, err := m.Open(tp0, cfg)
				if err != nil {
					t.Fatal(err)
				}
				fsys.FailAfter(op, k)
				var acked [][]byte
				durable := 0 // acked batches covered by a successful Flush
				failed := false
				for i := 0; i < 40 && !failed; i++ {
					b := makeBatch(t, spec{n: 2, valueLen: 40, ts: int64(i)})
					res, err := p.Append(b, 1)
					if err != nil {
						if !errors.Is(err, ErrStorage) {
							t.Fatalf("append: %v", err)
						}
						failed = true
						break
					}
					p.Commit(res.LastOffset + 1)
					acked = append(acked, b)
					switch {
					case i%5 == 4:
						if err := p.Flush(); err != nil {
							failed = true
						} else {
							durable = len(acked)
						}
					case i%11 == 10:
						// Truncate the last batch away (uncommitted in a
						// replicated log; here commit happened, so only
						// exercise the path on a fresh uncommitted one).
						extra := makeBatch(t, spec{n: 1, valueLen: 5})
						res, err := p.Append(extra, 1)
						if err != nil {
							failed = true
							break
						}
						if err := p.TruncateTo(res.BaseOffset); err != nil {
							failed = true
						}
					case i%13 == 12:
						if err := p.Roll(); err != nil {
							failed = true
						}
					}
				}
				if failed {
					hits[op]++
				}
				m.crash()
				fsys.ResetToSyncedState()
				m = testManager(t, fsys, c)
				defer m.Close()
				p = m.Get(tp0)
				if p == nil {
					if durable > 0 {
						t.Fatal("partition with durable data lost")
					}
					if p, err = m.Open(tp0, cfg); err != nil {
						t.Fatal(err)
					}
				}
				got := readAllCommitted(t, p)
				all := bytes.Join(acked, nil)
				if len(got) > len(all) || !bytes.Equal(got, all[:len(got)]) {
					t.Fatalf("recovered %d bytes are not a prefix of the %d acknowledged", len(got), len(all))
				}
				if want := len(bytes.Join(acked[:durable], nil)); len(got) < want {
					t.Fatalf("recovered %d bytes, %d were flushed", len(got), want)
				}
				if _, err := p.Append(makeBatch(t, spec{n: 1, valueLen: 5}), 2); err != nil {
					t.Fatalf("append after recovery: %v", err)
				}
			})
		}
	}
}
