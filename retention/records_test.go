package retention

import (
	"bytes"
	"testing"

	"github.com/strata-io/strata/segment"
)

// FuzzBatchRecords: opening any bytes as a stored batch never panics and
// never allocates past the bounds; when it succeeds, a batch rebuilt from
// any subset of its records validates as a stored (thinned) batch and
// opens again to the same records.
func FuzzBatchRecords(f *testing.F) {
	for codec := int8(0); codec <= 4; codec++ {
		f.Add(makeBatch(f, testNow, codec, rec{key: []byte("a"), value: []byte("1")}, rec{key: []byte("b")}, rec{value: []byte("keyless")}), uint8(5))
	}
	f.Fuzz(func(t *testing.T, b []byte, keepMask uint8) {
		h, recs, err := segment.OpenBatch(b)
		if err != nil {
			return
		}
		var kept []segment.Record
		for i, r := range recs {
			if keepMask&(1<<(i%8)) != 0 {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 || h.LastOffsetDelta < 0 || int64(len(recs)) > int64(h.LastOffsetDelta)+1 {
			return
		}
		nb, err := rebuildBatch(h, kept)
		if err != nil {
			t.Fatalf("rebuild: %v", err)
		}
		if _, err := segment.ValidateStoredBatch(nb); err != nil {
			t.Fatalf("rebuilt batch does not validate: %v", err)
		}
		_, again, err := segment.OpenBatch(nb)
		if err != nil || len(again) != len(kept) {
			t.Fatalf("rebuilt batch reopens to %d records (%v), want %d", len(again), err, len(kept))
		}
		for i := range kept {
			if !bytes.Equal(again[i].Raw, kept[i].Raw) {
				t.Fatalf("record %d changed", i)
			}
		}
	})
}
