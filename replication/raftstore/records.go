package raftstore

import (
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/strata-io/strata/segment"
)

// The record framing of the raft log file, the same as the broker's
// metadata.log (replication/metadata_log.go tells the layout): on disk,
// never to change without a new record version.
const (
	// HeaderBytes is a record's length u32 and crc32c u32.
	HeaderBytes = 8
	// MaxRecordBytes bounds one record (a 50,000-partition CreateTopic is
	// ~2 MiB of JSON).
	MaxRecordBytes = 16 << 20
)

var (
	// ErrStorage wraps I/O failures of raft's storage and of the broker's
	// metadata log. After a failed write or fsync the file refuses further
	// writes (its state is unknown) until the broker restarts and replays
	// it.
	ErrStorage = errors.New("replication: metadata log storage error")

	crcTable = crc32.MakeTable(crc32.Castagnoli)
)

// SyncDir fsyncs a directory so that a file created or renamed in it
// survives a crash.
func SyncDir(fsys segment.FS, dir string) error {
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("%w: sync dir %s: %v", ErrStorage, dir, err)
	}
	return nil
}
