//go:build !unix

package main

// openFileLimit is 0 (unknown) where RLIMIT_NOFILE does not exist.
func openFileLimit() uint64 { return 0 }
