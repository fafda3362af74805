package segment

import (
	"errors"
	"io"
	"syscall"
)

// SendTo writes n bytes of the segment's log file, from pos, to the
// socket behind rc with sendfile(2): the bytes go from the page cache to
// the socket without a copy through user space. ok is false when the file
// is not an operating-system file (MemFS): nothing was written and the
// caller copies instead. Safe while holding a reference (Acquire).
func (s *Segment) SendTo(rc syscall.RawConn, pos, n int64) (written int64, ok bool, err error) {
	of, isOS := s.log.(*osFile)
	if !isOS {
		return 0, false, nil
	}
	src, err := of.f.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var srcFD int
	if err := src.Control(func(fd uintptr) { srcFD = int(fd) }); err != nil {
		return 0, false, nil
	}
	off := pos
	var werr error
	err = rc.Write(func(dst uintptr) bool {
		for written < n {
			chunk := min(n-written, 1<<30)
			m, e := syscall.Sendfile(int(dst), srcFD, &off, int(chunk))
			if m > 0 {
				written += int64(m)
			}
			switch {
			case errors.Is(e, syscall.EAGAIN):
				return false // wait until the socket is writable
			case errors.Is(e, syscall.EINTR):
				continue
			case e != nil:
				werr = e
				return true
			case m == 0:
				werr = io.ErrUnexpectedEOF // the file is shorter than asked
				return true
			}
		}
		return true
	})
	if err == nil {
		err = werr
	}
	return written, true, err
}
