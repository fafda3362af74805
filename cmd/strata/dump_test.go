package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/segment"
)

// testBatch builds one uncompressed v2 batch of n empty records.
func testBatch(base int64, n int, producerID int64) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		body := []byte{0, 0, byte(i << 1), 1, 0, 0}
		recs = append(recs, byte(len(body)<<1))
		recs = append(recs, body...)
	}
	return segment.AppendBatch(nil, segment.Header{BaseOffset: base, LastOffsetDelta: int32(n - 1),
		BaseTimestamp: 1700000000000, MaxTimestamp: 1700000000005, ProducerID: producerID, NumRecords: int32(n)}, recs)
}

func TestDumpSegment(t *testing.T) {
	good := append(testBatch(0, 3, 1000), testBatch(3, 2, -1)...)
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 1
	tests := []struct {
		name   string
		data   []byte
		ok     bool
		expect []string
	}{
		{"good", good, true, []string{"baseOffset: 0 lastOffset: 2 count: 3", "producerId: 1000", "baseOffset: 3 lastOffset: 4 count: 2",
			"position: 0 ", "CreateTime: 1700000000005", "compresscodec: none", "isvalid: true"}},
		{"crc", corrupt, false, []string{"isvalid: false"}},
		{"torn", good[:len(good)-5], false, []string{"runs past the end"}},
		{"short tail", append(append([]byte(nil), good...), 1, 2, 3), false, []string{"trailing bytes"}},
		{"zeros", append(append([]byte(nil), good...), make([]byte, 100)...), false, []string{"zero bytes"}},
		{"empty", nil, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			ok, err := dumpSegment(bytes.NewReader(tt.data), int64(len(tt.data)), 0, &out)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.ok {
				t.Fatalf("ok = %v\n%s", ok, out.String())
			}
			for _, e := range tt.expect {
				if !strings.Contains(out.String(), e) {
					t.Errorf("output lacks %q:\n%s", e, out.String())
				}
			}
		})
	}
	// Through the command, with a real file.
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	os.WriteFile(path, good, 0o644)
	var out, errOut bytes.Buffer
	if code := run([]string{"debug", "dump-segment", "--max-batches", "1", path}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if n := strings.Count(out.String(), "baseOffset:"); n != 1 {
		t.Fatalf("%d batches printed with --max-batches 1", n)
	}
	if code := run([]string{"debug", "dump-segment", path + ".missing"}, nil, &out, &errOut); code != exitError {
		t.Fatalf("missing file: exit %d", code)
	}
}
