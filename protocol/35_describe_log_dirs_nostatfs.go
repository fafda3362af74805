//go:build !(linux || darwin)

package protocol

// diskSpace: no statfs on this platform; -1, -1 is DescribeLogDirs'
// "unknown".
func diskSpace(string) (total, usable int64) { return -1, -1 }
