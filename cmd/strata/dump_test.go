package main

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testBatch builds one uncompressed v2 batch of n empty records.
func testBatch(base int64, n int, producerID int64) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		body := []byte{0, 0, byte(i << 1), 1, 0, 0}
		recs = append(recs, byte(len(body)<<1))
		recs = append(recs, body...)
	}
	b := make([]byte, 61+len(recs))
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(base))
	be.PutUint32(b[8:], uint32(len(b)-12))
	b[16] = 2
	be.PutUint32(b[23:], uint32(n-1))
	be.PutUint64(b[27:], 1700000000000)
	be.PutUint64(b[35:], 1700000000005)
	be.PutUint64(b[43:], uint64(producerID))
	be.PutUint16(b[51:], 0)
	be.PutUint32(b[53:], 0)
	be.PutUint32(b[57:], uint32(n))
	copy(b[61:], recs)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
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
