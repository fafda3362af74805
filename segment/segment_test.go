package segment

import (
	"bytes"
	"testing"
)

// appendN appends n batches of recs records each to s, starting at s's
// next offset, returning the batches as written.
func appendN(t testing.TB, s *Segment, n, recs, valueLen int, ts int64) [][]byte {
	t.Helper()
	var out [][]byte
	for i := 0; i < n; i++ {
		b := buildBatch(recs, valueLen, ts+int64(i))
		SetBaseOffset(b, s.NextOffset())
		if err := s.Append(b, []BatchInfo{{Pos: 0, Len: len(b), LastOffset: s.NextOffset() + int64(recs) - 1, MaxTimestamp: ts + int64(i)}}); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func readAll(t testing.TB, s *Segment) []byte {
	t.Helper()
	b := make([]byte, s.Size())
	if _, err := s.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSegmentAppendFindReopen(t *testing.T) {
	fsys := NewMemFS()
	fsys.MkdirAll("/d")
	opts := Options{IndexBytes: 1024, IndexInterval: 100}
	s, err := Create(fsys, "/d", 100, opts)
	if err != nil {
		t.Fatal(err)
	}
	batches := appendN(t, s, 50, 2, 30, 1000)
	if s.NextOffset() != 200 {
		t.Fatalf("next %d", s.NextOffset())
	}
	if s.oix.n == 0 || s.tix.n == 0 {
		t.Fatalf("no index entries: %d %d", s.oix.n, s.tix.n)
	}
	want := bytes.Join(batches, nil)
	for off := int64(100); off < 200; off++ {
		pos, h, found, err := s.Find(off, s.Size())
		if err != nil || !found || h.BaseOffset > off || h.LastOffset() < off {
			t.Fatalf("find %d: %d %+v %v %v", off, pos, h, found, err)
		}
	}
	if _, _, found, _ := s.Find(200, s.Size()); found {
		t.Fatal("found past end")
	}
	pos, h, found, err := s.FindTimestamp(1020, s.Size())
	if err != nil || !found || h.MaxTimestamp != 1020 || h.BaseOffset != 140 {
		t.Fatalf("find ts: %d %+v %v %v", pos, h, found, err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, active := range []bool{true, false} {
		s2, info, err := Open(fsys, "/d", 100, opts, active)
		if err != nil {
			t.Fatal(err)
		}
		if info.TruncatedBytes != 0 || s2.NextOffset() != 200 || !bytes.Equal(readAll(t, s2), want) {
			t.Fatalf("reopen active=%v: %+v next %d", active, info, s2.NextOffset())
		}
		if ts, off := s2.MaxTimestamp(); ts != 1049 || off != 199 {
			t.Fatalf("max ts %d %d", ts, off)
		}
		if active {
			appendN(t, s2, 1, 1, 1, 2000)
			if _, err := s2.TruncateTo(200); err != nil || s2.NextOffset() != 200 {
				t.Fatalf("truncate: %v %d", err, s2.NextOffset())
			}
		}
		if err := s2.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
