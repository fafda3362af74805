package log

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/strata-io/strata/segment"
)

// The leader-epoch cache maps each leader epoch to the first offset
// written in it, as Kafka's leader-epoch-checkpoint does; it answers
// OffsetForLeaderEpoch (KIP-101/KIP-320) so clients and followers can
// detect a diverged log. It is derived from the batches' leader epochs and
// persisted per partition (text file, written atomically on each new
// epoch):
//
//	0            <- version
//	2            <- entries
//	0 0          <- epoch startOffset
//	3 1500
const (
	epochCheckpointFile = "leader-epoch-checkpoint"
	// maxEpochEntries bounds the cache; the oldest entries go first.
	maxEpochEntries = 1 << 14
	maxEpochFile    = 1 << 20
)

// epochEntry is one leader epoch and the first offset written in it.
type epochEntry struct {
	epoch int32
	start int64
}

// noteEpochLocked records that offsets from start on were written in
// epoch. Returns true when the cache changed.
func (p *Partition) noteEpochLocked(epoch int32, start int64) bool {
	if epoch < 0 {
		return false
	}
	if n := len(p.epochs); n > 0 && p.epochs[n-1].epoch >= epoch {
		return false
	}
	p.epochs = append(p.epochs, epochEntry{epoch, start})
	if len(p.epochs) > maxEpochEntries {
		p.epochs = append(p.epochs[:0], p.epochs[len(p.epochs)-maxEpochEntries:]...)
	}
	return true
}

// truncateEpochsLocked drops epochs starting at or after end.
func (p *Partition) truncateEpochsLocked(end int64) bool {
	n := len(p.epochs)
	for n > 0 && p.epochs[n-1].start >= end {
		n--
	}
	changed := n != len(p.epochs)
	p.epochs = p.epochs[:n]
	return changed
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch <=
// epoch known to this log and the offset where it ends (the start of the
// next epoch, or the log end for the latest). (-1, -1) when epoch is
// above every known epoch or the cache is empty.
func (p *Partition) EndOffsetForEpoch(epoch int32) (leaderEpoch int32, endOffset int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	n := len(p.epochs)
	if epoch < 0 || n == 0 {
		return -1, -1
	}
	if p.epochs[n-1].epoch == epoch {
		return epoch, p.leo
	}
	i := 0
	for i < n && p.epochs[i].epoch <= epoch {
		i++
	}
	if i == n {
		return -1, -1
	}
	if i == 0 {
		return epoch, p.epochs[0].start
	}
	return p.epochs[i-1].epoch, p.epochs[i].start
}

// writeEpochsLocked persists the cache (tmp, fsync, rename, dir fsync).
func (p *Partition) writeEpochsLocked() error {
	var b strings.Builder
	fmt.Fprintf(&b, "0\n%d\n", len(p.epochs))
	for _, e := range p.epochs {
		fmt.Fprintf(&b, "%d %d\n", e.epoch, e.start)
	}
	return segment.ReplaceFile(p.fs, filepath.Join(p.dir, epochCheckpointFile), []byte(b.String()))
}

// readEpochs loads the cache file; ok is false when it is missing or
// malformed (the caller then derives the cache from every batch).
func readEpochs(fsys segment.FS, dir string) ([]epochEntry, bool) {
	path := filepath.Join(dir, epochCheckpointFile)
	size, err := fsys.Stat(path)
	if err != nil || size > maxEpochFile {
		return nil, false
	}
	f, err := fsys.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	buf := make([]byte, size)
	if n, _ := f.ReadAt(buf, 0); int64(n) != size {
		return nil, false
	}
	lines := strings.Split(strings.TrimSpace(string(buf)), "\n")
	if len(lines) < 2 || strings.TrimSpace(lines[0]) != "0" {
		return nil, false
	}
	count, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || count != len(lines)-2 || count > maxEpochEntries {
		if !(count == 0 && len(lines) == 2) {
			return nil, false
		}
	}
	out := make([]epochEntry, 0, count)
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil, false
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		s, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || s < 0 {
			return nil, false
		}
		if n := len(out); n > 0 && (out[n-1].epoch >= int32(e) || out[n-1].start > s) {
			return nil, false
		}
		out = append(out, epochEntry{int32(e), s})
	}
	return out, true
}
