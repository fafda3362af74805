//go:build linux

package segment

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// unixMapping is a MAP_SHARED mapping: its dirty pages are the file's
// page cache, written back by fsync of the file or by msync of the
// mapping. The mapping holds its own reference to the open file (the
// kernel's, not a descriptor), so it stays valid after the descriptor is
// closed: an index keeps no descriptor open (one per index and segment
// would cap a broker's replicas by RLIMIT_NOFILE).
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

func (m *unixMapping) Detached() bool { return true }

// Sync is msync(MS_SYNC) of the whole mapping. For a MAP_SHARED mapping
// this is as durable as fsync of the file for those bytes: the mapped
// pages are the file's page cache, and Linux's msync(MS_SYNC) writes the
// dirty ones back and then calls the file system's fsync for the mapped
// range (vfs_fsync_range, datasync) on the file the mapping holds, which
// also commits the metadata needed to read them back (the file's size,
// set by the truncate that preallocated it). A write-back error is
// reported here as it would be by fsync on the descriptor.
func (m *unixMapping) Sync() error {
	if len(m.b) == 0 {
		return nil
	}
	_, _, errno := syscall.Syscall(syscall.SYS_MSYNC, uintptr(unsafe.Pointer(&m.b[0])), uintptr(len(m.b)), syscall.MS_SYNC)
	if errno != 0 {
		return fmt.Errorf("segment: msync: %w", errno)
	}
	return nil
}

func (m *unixMapping) Close() error {
	if m.b == nil {
		return nil
	}
	b := m.b
	m.b = nil
	return syscall.Munmap(b)
}
