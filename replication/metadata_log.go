package replication

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/strata-io/strata/replication/raftstore"
	"github.com/strata-io/strata/segment"
)

// The metadata log: an append-only file of metadata commands, one record
// per command, fsync'd before the command is applied. Replayed at start.
//
//	+------------+------------+---------+----------------------+
//	| length u32 | crc32c u32 | version | command (JSON)       |
//	+------------+------------+---------+----------------------+
//	  big endian   over version   1 byte   length-1 bytes
//	               and command
//
// length counts the version byte and the command. A record whose length is
// zero or above maxMetadataRecordBytes, that runs past the end of the file,
// or whose CRC does not match ends the log: everything from it on is a torn
// write and is truncated away at open (with a log line saying how much).
// The layout and constants are on disk and must not change without a new
// record version.

const (
	metadataLogName        = "metadata.log"
	metadataRecordVersion  = 1
	metadataHeaderBytes    = raftstore.HeaderBytes
	maxMetadataRecordBytes = raftstore.MaxRecordBytes // a 50,000-partition CreateTopic is ~2 MiB of JSON
)

var (
	// ErrMetadataStorage wraps I/O failures of the metadata log and of
	// raft's storage (raftstore.ErrStorage). After a failed write or fsync
	// the log refuses further writes (the file's state is unknown) until
	// the broker restarts and replays it.
	ErrMetadataStorage = raftstore.ErrStorage

	crcTable = crc32.MakeTable(crc32.Castagnoli)
)

// metadataLog is the open metadata log. Not safe for concurrent use: the
// broker's writer lock serializes Append and Close.
type metadataLog struct {
	fs   segment.FS
	f    segment.File
	path string
	size int64 // bytes of whole records; the next record goes here
	werr error // sticky write error
}

// openMetadataLog opens (creating) dir/metadata.log, reads every whole
// record, truncates a torn tail, and returns the commands in order.
func openMetadataLog(fsys segment.FS, dir string, logger *slog.Logger) (*metadataLog, []Command, error) {
	path := filepath.Join(dir, metadataLogName)
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = fsys.Create(path)
		if err == nil {
			err = fsys.SyncDir(dir)
			if err != nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: open %s: %v", ErrMetadataStorage, path, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%w: size of %s: %v", ErrMetadataStorage, path, err)
	}
	cmds, good, why := readMetadataRecords(f, size)
	if good < size {
		logger.Warn("metadata log: truncating torn or corrupt tail", "path", path,
			"position", good, "dropped_bytes", size-good, "reason", why)
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%w: truncate %s: %v", ErrMetadataStorage, path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%w: sync %s: %v", ErrMetadataStorage, path, err)
		}
	}
	return &metadataLog{fs: fsys, f: f, path: path, size: good}, cmds, nil
}

// readMetadataRecords decodes records from r (size bytes long) and returns
// the commands, the length of the valid prefix and, when that is short of
// size, why the next record was rejected.
func readMetadataRecords(r io.ReaderAt, size int64) (cmds []Command, good int64, why string) {
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 64<<10)
	var hdr [metadataHeaderBytes]byte
	for good < size {
		if size-good < metadataHeaderBytes {
			return cmds, good, "partial header"
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return cmds, good, "read header: " + err.Error()
		}
		n := int64(binary.BigEndian.Uint32(hdr[0:4]))
		if n < 2 || n > maxMetadataRecordBytes {
			return cmds, good, fmt.Sprintf("record length %d out of range", n)
		}
		if size-good-metadataHeaderBytes < n {
			return cmds, good, fmt.Sprintf("record of %d bytes runs past the end", n)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return cmds, good, "read record: " + err.Error()
		}
		if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(hdr[4:8]) {
			return cmds, good, "crc mismatch"
		}
		if body[0] != metadataRecordVersion {
			return cmds, good, fmt.Sprintf("unknown record version %d", body[0])
		}
		var c Command
		if err := json.Unmarshal(body[1:], &c); err != nil {
			return cmds, good, "decode command: " + err.Error()
		}
		cmds = append(cmds, c)
		good += metadataHeaderBytes + n
	}
	return cmds, good, ""
}

// encodeMetadataRecord frames c as one record.
func encodeMetadataRecord(c Command) ([]byte, error) {
	js, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("replication: encode %s: %w", c.Type, err)
	}
	n := 1 + len(js)
	if n > maxMetadataRecordBytes {
		return nil, fmt.Errorf("replication: %s command is %d bytes, more than %d", c.Type, n, maxMetadataRecordBytes)
	}
	buf := make([]byte, metadataHeaderBytes+n)
	binary.BigEndian.PutUint32(buf[0:4], uint32(n))
	buf[8] = metadataRecordVersion
	copy(buf[9:], js)
	binary.BigEndian.PutUint32(buf[4:8], crc32.Checksum(buf[8:], crcTable))
	return buf, nil
}

// Append writes c and fsyncs it. When Append returns nil the command
// survives a crash.
func (l *metadataLog) Append(c Command) error {
	if l.werr != nil {
		return l.werr
	}
	rec, err := encodeMetadataRecord(c)
	if err != nil {
		return err
	}
	if _, err := l.f.WriteAt(rec, l.size); err != nil {
		l.werr = fmt.Errorf("%w: write %s: %v", ErrMetadataStorage, l.path, err)
		return l.werr
	}
	if err := l.f.Sync(); err != nil {
		l.werr = fmt.Errorf("%w: fsync %s: %v", ErrMetadataStorage, l.path, err)
		return l.werr
	}
	l.size += int64(len(rec))
	return nil
}

func (l *metadataLog) Close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if l.werr == nil {
		l.werr = fmt.Errorf("%w: closed", ErrMetadataStorage)
	}
	if err != nil {
		return fmt.Errorf("%w: close %s: %v", ErrMetadataStorage, l.path, err)
	}
	return nil
}
