//go:build !linux

package segment

import "syscall"

// SendTo is sendfile(2) on Linux; elsewhere the caller copies.
func (s *Segment) SendTo(rc syscall.RawConn, pos, n int64) (written int64, ok bool, err error) {
	return 0, false, nil
}
