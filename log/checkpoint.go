package log

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-io/strata/segment"
)

// Checkpoint files per data directory, in Kafka's text format:
//
//	0                      <- version
//	2                      <- number of entries
//	orders 0 1234          <- topic partition offset
//	orders 1 99
const (
	hwCheckpointFile       = "replication-offset-checkpoint"
	logStartCheckpointFile = "log-start-offset-checkpoint"
	// cleanerCheckpointFile holds each compacted partition's first dirty
	// offset (Kafka's cleaner-offset-checkpoint); a hint: a lost or stale
	// value only makes the cleaner compact again what was clean.
	cleanerCheckpointFile  = "cleaner-offset-checkpoint"
	recoveryCheckpointFile = "recovery-point-offset-checkpoint"
	// maxCheckpointBytes bounds what we read back.
	maxCheckpointBytes = 64 << 20
)

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// readCheckpoint parses a checkpoint file; a missing file is empty and a
// malformed one is reported (the caller logs and ignores it).
func readCheckpoint(fsys segment.FS, path string) (map[TopicPartition]int64, error) {
	out := map[TopicPartition]int64{}
	size, err := fsys.Stat(path)
	if isNotExist(err) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	if size > maxCheckpointBytes {
		return out, fmt.Errorf("log: checkpoint %s: %d bytes is too large", path, size)
	}
	f, err := fsys.Open(path)
	if err != nil {
		return out, err
	}
	defer f.Close()
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		return out, err
	}
	sc := bufio.NewScanner(bytes.NewReader(buf))
	line := 0
	want := -1
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		switch line {
		case 0:
			if text != "0" {
				return out, fmt.Errorf("log: checkpoint %s: version %q", path, text)
			}
		case 1:
			n, err := strconv.Atoi(text)
			if err != nil || n < 0 {
				return out, fmt.Errorf("log: checkpoint %s: count %q", path, text)
			}
			want = n
		default:
			fields := strings.Fields(text)
			if len(fields) != 3 {
				return out, fmt.Errorf("log: checkpoint %s: line %d malformed", path, line+1)
			}
			part, err1 := strconv.ParseInt(fields[1], 10, 32)
			off, err2 := strconv.ParseInt(fields[2], 10, 64)
			if err1 != nil || err2 != nil || part < 0 || off < 0 {
				return out, fmt.Errorf("log: checkpoint %s: line %d malformed", path, line+1)
			}
			out[TopicPartition{fields[0], int32(part)}] = off
		}
		line++
	}
	if want >= 0 && len(out) != want {
		return out, fmt.Errorf("log: checkpoint %s: %d entries, header says %d", path, len(out), want)
	}
	return out, sc.Err()
}

// writeCheckpoint replaces a checkpoint atomically: write a temporary
// file, fsync it, rename it over the old one, fsync the directory.
func writeCheckpoint(fsys segment.FS, dir, name string, m map[TopicPartition]int64) error {
	tps := make([]TopicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(tps))
	for _, tp := range tps {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, m[tp])
	}
	path := filepath.Join(dir, name)
	if err := segment.ReplaceFile(fsys, path, b.Bytes()); err != nil {
		return fmt.Errorf("%w: checkpoint %s: %v", ErrStorage, path, err)
	}
	return nil
}
