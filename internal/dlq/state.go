package dlq

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// done is the set of one dead-letter partition's offsets a redrive is
// finished with, for one reason: every offset below low, and the ranges
// [a, b) above it (holes are letters left behind: refused by the redrive
// limit, or older than a --since). It is stored as a committed offset
// (low) of the reason's cursor group and, in the commit's metadata, the
// ranges ("a-b a-b").
type done struct {
	low    int64
	ranges [][2]int64 // sorted, disjoint, not touching, each a > low
}

const metaPrefix = "strata-dlq-redrive/1"

// maxMetadata keeps the encoded ranges under offset.metadata.max.bytes'
// default (4096).
const maxMetadata = 4000

func (d done) has(o int64) bool {
	if o < d.low {
		return true
	}
	i := sort.Search(len(d.ranges), func(i int) bool { return d.ranges[i][1] > o })
	return i < len(d.ranges) && d.ranges[i][0] <= o
}

// add marks [a, b) done.
func (d *done) add(a, b int64) {
	if b <= a || b <= d.low {
		return
	}
	a = max(a, d.low)
	rs := append(d.ranges, [2]int64{a, b})
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	out := rs[:0:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	for len(out) > 0 && out[0][0] <= d.low {
		d.low = max(d.low, out[0][1])
		out = out[1:]
	}
	d.ranges = out
}

func (d done) clone() done {
	return done{low: d.low, ranges: append([][2]int64(nil), d.ranges...)}
}

func (d done) equal(e done) bool {
	if d.low != e.low || len(d.ranges) != len(e.ranges) {
		return false
	}
	for i := range d.ranges {
		if d.ranges[i] != e.ranges[i] {
			return false
		}
	}
	return true
}

// metadata encodes the ranges for the commit's metadata.
func (d done) metadata() (string, error) {
	var b strings.Builder
	b.WriteString(metaPrefix)
	for _, r := range d.ranges {
		fmt.Fprintf(&b, " %d-%d", r[0], r[1])
	}
	if b.Len() > maxMetadata {
		return "", fmt.Errorf("%d ranges of letters left behind: too many to record (redrive without --since or raise --limit)", len(d.ranges))
	}
	return b.String(), nil
}

// parseDone reads a committed cursor (offset < 0: none).
func parseDone(offset int64, meta string) (done, error) {
	d := done{low: max(offset, 0)}
	if meta == "" {
		return d, nil
	}
	f := strings.Fields(meta)
	if len(f) == 0 || f[0] != metaPrefix {
		return d, fmt.Errorf("cursor metadata %q is not a redrive cursor", meta)
	}
	for _, s := range f[1:] {
		a, b, ok := strings.Cut(s, "-")
		x, err1 := strconv.ParseInt(a, 10, 64)
		y, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil || x < 0 || y <= x {
			return d, fmt.Errorf("cursor metadata %q: bad range %q", meta, s)
		}
		d.add(x, y)
	}
	return d, nil
}
