//go:build linux

package segment

import (
	"fmt"
	"os"
	"syscall"
)

// unixMapping is a MAP_SHARED mapping: its dirty pages are written back by
// fsync of the file, so Sync on the file covers index writes.
type unixMapping struct{ b []byte }

func mmapFile(f *os.File, size int) (Mapping, error) {
	if size == 0 {
		return &unixMapping{}, nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("segment: mmap %s: %w", f.Name(), err)
	}
	// Index pages are touched at random (binary searches, one append
	// point), never streamed. Without this hint the first fault on the
	// mapping reads around it by the device's read-ahead (8 MiB on the
	// test machine): zero-filling megabytes of page cache for a sparse,
	// preallocated index, several ms per new segment.
	if err := syscall.Madvise(b, syscall.MADV_RANDOM); err != nil {
		syscall.Munmap(b)
		return nil, fmt.Errorf("segment: madvise %s: %w", f.Name(), err)
	}
	return &unixMapping{b: b}, nil
}

func (m *unixMapping) Bytes() []byte { return m.b }

func (m *unixMapping) Close() error {
	if m.b == nil {
		return nil
	}
	b := m.b
	m.b = nil
	return syscall.Munmap(b)
}
