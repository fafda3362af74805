package replication

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/segment"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestMetadataLogRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l, cmds, err := openMetadataLog(segment.OSFS{}, dir, discardLogger())
	if err != nil || len(cmds) != 0 {
		t.Fatal(err, cmds)
	}
	for i := 0; i < 5; i++ {
		if err := l.Append(Command{Type: CmdCreateTopic, Topic: string(rune('a' + i)), TopicID: [16]byte{byte(i + 1)}}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	if err := l.Append(Command{Type: CmdRegisterBroker}); err == nil {
		t.Fatal("append after close")
	}
	l, cmds, err = openMetadataLog(segment.OSFS{}, dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if len(cmds) != 5 || cmds[4].Topic != "e" || cmds[4].TopicID != [16]byte{5} {
		t.Fatalf("%+v", cmds)
	}
}

// A torn or corrupt tail is truncated at the last whole record, and writes
// continue from there.
func TestMetadataLogTornTail(t *testing.T) {
	rec, _ := encodeMetadataRecord(Command{Type: CmdCreateTopic, Topic: "x", TopicID: [16]byte{1}})
	flip := append([]byte(nil), rec...)
	flip[len(flip)-1] ^= 0xff
	badLen := append([]byte(nil), rec...)
	badLen[0] = 0xff
	tests := []struct {
		name string
		tail []byte
	}{
		{"partial header", rec[:5]},
		{"partial body", rec[:len(rec)-3]},
		{"crc mismatch", flip},
		{"huge length", badLen},
		{"zeros", make([]byte, 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l, _, err := openMetadataLog(segment.OSFS{}, dir, discardLogger())
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if err := l.Append(Command{Type: CmdAllocateProducerIDs, ProducerIDStart: int64(i), ProducerIDCount: 1}); err != nil {
					t.Fatal(err)
				}
			}
			good := l.size
			l.Close()
			path := filepath.Join(dir, metadataLogName)
			f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			f.Write(tt.tail)
			f.Close()
			l, cmds, err := openMetadataLog(segment.OSFS{}, dir, discardLogger())
			if err != nil {
				t.Fatal(err)
			}
			if len(cmds) != 2 {
				t.Fatalf("%d commands after torn tail", len(cmds))
			}
			if fi, _ := os.Stat(path); fi.Size() != good {
				t.Fatalf("size %d, want %d", fi.Size(), good)
			}
			if err := l.Append(Command{Type: CmdAllocateProducerIDs, ProducerIDStart: 2, ProducerIDCount: 1}); err != nil {
				t.Fatal(err)
			}
			l.Close()
			l, cmds, _ = openMetadataLog(segment.OSFS{}, dir, discardLogger())
			l.Close()
			if len(cmds) != 3 || cmds[2].ProducerIDStart != 2 {
				t.Fatalf("after rewrite: %+v", cmds)
			}
		})
	}
}

func FuzzReadMetadataRecords(f *testing.F) {
	rec, _ := encodeMetadataRecord(Command{Type: CmdCreateTopic, Topic: "x", TopicID: [16]byte{1}})
	f.Add(rec)
	f.Add(append(rec, rec[:7]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &bytesReaderAt{data}
		cmds, good, _ := readMetadataRecords(r, int64(len(data)))
		if good < 0 || good > int64(len(data)) {
			t.Fatalf("good %d of %d", good, len(data))
		}
		if good == 0 && len(cmds) != 0 {
			t.Fatal("commands without bytes")
		}
	})
}

type bytesReaderAt struct{ b []byte }

func (r *bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r.b)) {
		return 0, io.EOF
	}
	n := copy(p, r.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
