package log

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestIdlePartitionFDs: an idle partition holds one file descriptor (its
// active segment's .log); the indexes keep only their mappings. A broker's
// replica count is otherwise capped by RLIMIT_NOFILE (docs/SCALING.md).
func TestIdlePartitionFDs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts /proc/self/fd")
	}
	const partitions = 200
	dir := t.TempDir()
	m, err := OpenManager(ManagerOptions{Dir: dir, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	batch := makeBatch(t, spec{n: 8, valueLen: 1000, ts: 1})
	for n := int32(0); n < partitions; n++ {
		p, err := m.Open(TopicPartition{Topic: "t", Partition: n}, Config{})
		if err != nil {
			t.Fatal(err)
		}
		// Enough to write index entries (index.interval.bytes 4096).
		for k := 0; k < 3; k++ {
			if _, err := p.Append(batch, 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	fds := 0
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			fds++
		}
	}
	// One per partition, and a few for the manager's own files.
	if max := partitions + 8; fds > max {
		t.Fatalf("%d partitions hold %d descriptors, want at most %d (one each)", partitions, fds, max)
	}
	t.Logf("%d partitions: %d descriptors under the log dir", partitions, fds)
}
