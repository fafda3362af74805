//go:build unix

package main

import "syscall"

// openFileLimit is the process's open-file limit (RLIMIT_NOFILE's soft
// value, which Go's runtime raised to the hard one at start); 0 when it
// cannot be read or is unlimited.
func openFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur == ^uint64(0) {
		return 0
	}
	return uint64(r.Cur)
}
