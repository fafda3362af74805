//go:build linux || darwin

package protocol

import (
	"math"
	"syscall"
)

// diskSpace returns the total and usable bytes of the file system holding
// path (DescribeLogDirs v4+), as Java's FileStore getTotalSpace and
// getUsableSpace: all blocks, and the blocks available to an unprivileged
// user. -1, -1 when statfs fails.
func diskSpace(path string) (total, usable int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return -1, -1
	}
	bs := uint64(st.Bsize)
	return clampBytes(uint64(st.Blocks), bs), clampBytes(uint64(st.Bavail), bs)
}

// clampBytes is blocks*size, capped at MaxInt64 as Kafka caps file
// systems too large for a long.
func clampBytes(blocks, size uint64) int64 {
	if size != 0 && blocks > math.MaxInt64/size {
		return math.MaxInt64
	}
	return int64(blocks * size)
}
