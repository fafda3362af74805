package dlq

import (
	"reflect"
	"testing"
)

// TestDone: the set of finished offsets merges ranges into its low
// watermark, keeps holes, and survives its commit encoding.
func TestDone(t *testing.T) {
	var d done
	d.add(5, 8)
	d.add(10, 12)
	if d.low != 0 || !reflect.DeepEqual(d.ranges, [][2]int64{{5, 8}, {10, 12}}) {
		t.Fatalf("%+v", d)
	}
	for o, want := range map[int64]bool{0: false, 4: false, 5: true, 7: true, 8: false, 9: false, 10: true, 11: true, 12: false} {
		if d.has(o) != want {
			t.Errorf("has(%d) = %v", o, !want)
		}
	}
	meta, err := d.metadata()
	if err != nil {
		t.Fatal(err)
	}
	e, err := parseDone(d.low, meta)
	if err != nil || !e.equal(d) {
		t.Fatalf("round trip %q: %+v %v", meta, e, err)
	}
	d.add(0, 5) // joins [5,8)
	if d.low != 8 || len(d.ranges) != 1 {
		t.Fatalf("%+v", d)
	}
	d.add(8, 10) // joins [10,12)
	if d.low != 12 || len(d.ranges) != 0 {
		t.Fatalf("%+v", d)
	}
	d.add(3, 6) // below low: nothing
	if d.low != 12 {
		t.Fatalf("%+v", d)
	}
	if e, err := parseDone(-1, ""); err != nil || e.low != 0 {
		t.Fatalf("no commit: %+v %v", e, err)
	}
	for _, bad := range []string{"foreign", metaPrefix + " 5-3", metaPrefix + " x-y", metaPrefix + " 7"} {
		if _, err := parseDone(0, bad); err == nil {
			t.Errorf("parseDone(%q) accepted", bad)
		}
	}
	var many done
	for i := int64(0); i < 1000; i++ {
		many.add(10*i+1, 10*i+2)
	}
	if _, err := many.metadata(); err == nil {
		t.Error("1000 ranges encoded past the metadata limit")
	}
}
