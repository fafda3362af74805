package segment

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite segment/testdata golden files (inspect the diff before committing!)")

// writeLogFile puts raw bytes as segment base's .log in /d of a MemFS.
func writeLogFile(t testing.TB, fsys *MemFS, base int64, ext string, b []byte) {
	t.Helper()
	fsys.MkdirAll("/d")
	f, err := fsys.Create(filepath.Join("/d", FileName(base, ext)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Append(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// checkAllValid asserts that every byte kept in s is a sequence of valid,
// offset-ordered batches ending exactly at Size and NextOffset.
func checkAllValid(t testing.TB, s *Segment) {
	t.Helper()
	data := make([]byte, s.Size())
	if _, err := s.ReadAt(data, 0); err != nil && len(data) > 0 {
		t.Fatal(err)
	}
	spans, err := SplitBatches(data, 0)
	if err != nil {
		t.Fatalf("kept bytes do not split: %v", err)
	}
	next := s.Base()
	for _, sp := range spans {
		h, err := ValidateBatch(data[sp[0]:sp[1]])
		if err != nil {
			t.Fatalf("kept an invalid batch at %d: %v", sp[0], err)
		}
		if h.BaseOffset < next {
			t.Fatalf("kept a batch at offset %d after %d", h.BaseOffset, next)
		}
		next = h.LastOffset() + 1
	}
	if next != s.NextOffset() {
		t.Fatalf("next offset %d, batches end at %d", s.NextOffset(), next)
	}
}

// validLog returns n consecutive batches starting at base.
func validLog(n int, base int64) []byte {
	var out []byte
	off := base
	for i := 0; i < n; i++ {
		b := buildBatch(1+i%3, 10+i, 1000+int64(i))
		SetBaseOffset(b, off)
		off += int64(1 + i%3)
		out = append(out, b...)
	}
	return out
}

// tornCases are the golden torn-tail files: name -> contents.
func tornCases() map[string][]byte {
	good := validLog(4, 0)
	next := buildBatch(2, 40, 5000)
	SetBaseOffset(next, 7)
	cases := map[string][]byte{}
	cases["half_batch"] = append(append([]byte(nil), good...), next[:len(next)/2]...)
	bad := append([]byte(nil), next...)
	bad[len(bad)-3] ^= 0xff
	cases["bad_crc"] = append(append([]byte(nil), good...), bad...)
	cases["zero_tail"] = append(append([]byte(nil), good...), make([]byte, 300)...)
	huge := append([]byte(nil), next...)
	huge[OffBatchLength] = 0x7f
	cases["huge_length"] = append(append([]byte(nil), good...), huge...)
	back := append([]byte(nil), next...)
	SetBaseOffset(back, 2)
	cases["offset_backwards"] = append(append([]byte(nil), good...), back...)
	short := append([]byte(nil), good...)
	cases["short_header"] = append(short, next[:20]...)
	cases["whole"] = append(append([]byte(nil), good...), next...)
	return cases
}

// TestGoldenTornTails recovers each testdata/torn_*.log and compares the
// kept size and next offset with testdata/torn.golden.
func TestGoldenTornTails(t *testing.T) {
	if *updateGolden {
		var lines []string
		for name, b := range tornCases() {
			if err := os.WriteFile(filepath.Join("testdata", "torn_"+name+".log"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_ = lines
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "torn_*.log"))
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	var out strings.Builder
	for _, fn := range files {
		b, err := os.ReadFile(fn)
		if err != nil {
			t.Fatal(err)
		}
		fsys := NewMemFS()
		writeLogFile(t, fsys, 0, LogExt, b)
		s, info, err := Open(fsys, "/d", 0, Options{IndexBytes: 1024, IndexInterval: 64}, true)
		if err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		checkAllValid(t, s)
		fmt.Fprintf(&out, "%s size=%d kept=%d truncated=%d next=%d\n", filepath.Base(fn), len(b), s.Size(), info.TruncatedBytes, s.NextOffset())
		s.Close()
	}
	golden := filepath.Join("testdata", "torn.golden")
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != out.String() {
		t.Fatalf("recovery differs from %s (run with -update-golden only if you understand why):\ngot:\n%swant:\n%s", golden, out.String(), want)
	}
}

func TestRecoverRebuildsMissingOrCorruptIndex(t *testing.T) {
	fsys := NewMemFS()
	fsys.MkdirAll("/d")
	opts := Options{IndexBytes: 4096, IndexInterval: 50}
	s, _ := Create(fsys, "/d", 0, opts)
	appendN(t, s, 40, 2, 20, 100)
	s.Sync()
	wantIdx := append([]byte(nil), s.oix.b[:s.oix.n*8]...)
	wantNext := s.NextOffset()
	s.Close()
	// Missing index.
	for _, active := range []bool{true, false} {
		fsys.Remove("/d/" + FileName(0, IndexExt))
		s, info, err := Open(fsys, "/d", 0, opts, active)
		if err != nil || !info.Rebuilt || s.NextOffset() != wantNext {
			t.Fatalf("active=%v: %+v %v next %d", active, info, err, s.NextOffset())
		}
		if !bytes.Equal(s.oix.b[:s.oix.n*8], wantIdx) {
			t.Fatalf("active=%v: rebuilt index differs", active)
		}
		s.Close()
	}
	// Corrupt index: entries out of order.
	f, _ := fsys.Open("/d/" + FileName(0, IndexExt))
	f.WriteAt([]byte{0, 0, 0, 1, 0, 0, 0, 1}, 8)
	f.Sync()
	f.Close()
	s, info, err := Open(fsys, "/d", 0, opts, true)
	if err != nil || !info.Rebuilt || !bytes.Equal(s.oix.b[:s.oix.n*8], wantIdx) {
		t.Fatalf("corrupt index: %+v %v", info, err)
	}
	checkAllValid(t, s)
	s.Close()
}

func FuzzRecover(f *testing.F) {
	for _, b := range tornCases() {
		f.Add(b, true)
	}
	f.Add(validLog(10, 0), false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, b []byte, active bool) {
		fsys := NewMemFS()
		writeLogFile(t, fsys, 0, LogExt, b)
		s, _, err := Open(fsys, "/d", 0, Options{IndexBytes: 256, IndexInterval: 32}, active)
		if err != nil {
			return
		}
		checkAllValid(t, s)
		// The recovered segment is usable.
		for off := int64(0); off < s.NextOffset() && off < 50; off++ {
			s.Find(off, s.Size())
		}
		s.FindTimestamp(1002, s.Size())
		s.Close()
	})
}

// FuzzScan opens an active segment whose .log, .index and .timeindex are
// arbitrary bytes. Recovery trusts the log before the last index entry
// that points at a matching batch header (see doc.go), so the property is:
// no panic, lookups stay in range, and a log made only of valid batches
// loses nothing whatever the indexes say.
func FuzzScan(f *testing.F) {
	good := validLog(12, 0)
	fsys := NewMemFS()
	fsys.MkdirAll("/d")
	s, _ := Create(fsys, "/d", 0, Options{IndexBytes: 256, IndexInterval: 32})
	for i := 0; i < 12; i++ {
		appendN(f, s, 1, 1+i%3, 10+i, 1000)
	}
	oix := append([]byte(nil), s.oix.b[:s.oix.n*8]...)
	tix := append([]byte(nil), s.tix.b[:s.tix.n*12]...)
	f.Add(readAll(f, s), oix, tix)
	f.Add(good, []byte{0, 0, 0, 5, 0, 0, 0, 9}, []byte{})
	f.Add(good, []byte{}, []byte{0, 0, 0, 0, 0, 0, 3, 0xe9, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, logb, oixb, tixb []byte) {
		fsys := NewMemFS()
		writeLogFile(t, fsys, 0, LogExt, logb)
		writeLogFile(t, fsys, 0, IndexExt, oixb)
		writeLogFile(t, fsys, 0, TimeIndexExt, tixb)
		s, _, err := Open(fsys, "/d", 0, Options{IndexBytes: 256, IndexInterval: 32}, true)
		if err != nil {
			return
		}
		if allValid(logb) && s.Size() != int64(len(logb)) {
			t.Fatalf("a valid log lost bytes: kept %d of %d", s.Size(), len(logb))
		}
		for off := int64(-1); off < s.NextOffset()+2 && off < 60; off++ {
			pos, h, found, err := s.Find(off, s.Size())
			if err == nil && found && (h.LastOffset() < off || pos >= s.Size()) {
				t.Fatalf("find %d: %d %+v", off, pos, h)
			}
		}
		for _, ts := range []int64{-1, 0, 1000, 1005, 1 << 40} {
			if pos, _, found, err := s.FindTimestamp(ts, s.Size()); err == nil && found && pos >= s.Size() {
				t.Fatalf("find ts %d: %d", ts, pos)
			}
		}
		s.ScanHeaders(0, s.Size(), func(int64, *Header) bool { return true })
		s.Close()
	})
}

// allValid reports a log made only of valid batches in offset order.
func allValid(b []byte) bool {
	spans, err := SplitBatches(b, 0)
	if err != nil {
		return false
	}
	next := int64(0)
	for _, sp := range spans {
		h, err := ValidateBatch(b[sp[0]:sp[1]])
		if err != nil || h.BaseOffset < next || h.LastOffset()-0 > 1<<32-1 {
			return false
		}
		next = h.LastOffset() + 1
	}
	return true
}

// TestRecoveryPointChecksPastIndex: with a recovery point, batches after it
// are checked even when an index entry lies beyond them.
func TestRecoveryPointChecksPastIndex(t *testing.T) {
	fsys := NewMemFS()
	fsys.MkdirAll("/d")
	opts := Options{IndexBytes: 4096, IndexInterval: 50}
	s, _ := Create(fsys, "/d", 0, opts)
	appendN(t, s, 40, 1, 20, 100)
	if s.oix.n < 3 {
		t.Fatalf("%d index entries", s.oix.n)
	}
	_, lastPos := s.oix.offsetEntry(s.oix.n - 1)
	victim, _, _, _ := s.Find(10, s.Size())
	if victim >= int64(lastPos) {
		t.Fatalf("batch 10 at %d is not before the last entry at %d", victim, lastPos)
	}
	s.Sync()
	s.Close()
	// Corrupt a batch well before the last index entry.
	f, _ := fsys.Open("/d/" + FileName(0, LogExt))
	f.WriteAt([]byte{0xff}, victim+HeaderSize+3)
	f.Close()
	s, _, err := OpenFrom(fsys, "/d", 0, opts, true, -1)
	if err != nil || s.NextOffset() != 40 {
		t.Fatalf("without a recovery point: %v next %d", err, s.NextOffset())
	}
	s.Close()
	s, info, err := OpenFrom(fsys, "/d", 0, opts, true, 0)
	if err != nil || info.TruncatedBytes == 0 || s.NextOffset() >= 40 {
		t.Fatalf("with recovery point 0: %+v %v next %d", info, err, s.NextOffset())
	}
	checkAllValid(t, s)
	s.Close()
}

// TestCleanReopenLeavesIndexSparse: reopening an active segment whose
// index has no entry yet (less than index.interval.bytes written) must not
// write its preallocated indexes: clearing them whole dirtied 10 MiB each,
// which the open's fsync wrote out for every such partition at every
// restart (a broker with 111 partitions took 15-17 s to start).
func TestCleanReopenLeavesIndexSparse(t *testing.T) {
	dir := t.TempDir()
	fsys := OSFS{}
	opts := Options{IndexBytes: 8 << 20}
	s, err := Create(fsys, dir, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	b := validLog(1, 0)
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(b, []BatchInfo{{Len: len(b), LastOffset: h.LastOffset(), MaxTimestamp: h.MaxTimestamp}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.close(false); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		s, info, err := OpenFrom(fsys, dir, 0, opts, true, 0)
		if err != nil {
			t.Fatal(err)
		}
		if info.Rebuilt || s.NextOffset() != h.LastOffset()+1 {
			t.Fatalf("reopen %d: rebuilt %v, next offset %d", round, info.Rebuilt, s.NextOffset())
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := s.close(false); err != nil {
			t.Fatal(err)
		}
		for _, ext := range []string{".index", ".timeindex"} {
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(dir, FileName(0, ext)), &st); err != nil {
				t.Fatal(err)
			}
			if used := st.Blocks * 512; used > 1<<20 {
				t.Fatalf("reopen %d: %s holds %d bytes on disk of its %d preallocated: the reopen wrote it", round, ext, used, st.Size)
			}
		}
	}
}
