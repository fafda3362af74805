//go:build linux || darwin

package replication

import (
	"math"
	"syscall"
)

// statfsUsable returns the bytes of the file system holding dir that an
// unprivileged writer may still use (available blocks).
func statfsUsable(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	bs := uint64(st.Bsize)
	if bs != 0 && uint64(st.Bavail) > math.MaxInt64/bs {
		return math.MaxInt64, nil
	}
	return int64(uint64(st.Bavail) * bs), nil
}
