package main

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/strata-io/strata/replication"
	"github.com/strata-io/strata/segment"
)

// Fault injection for the fault harness (internal/faults): TEST ONLY.
//
// With the environment variable STRATA_FAULTS_CONTROL=FILE, serve reads
// FILE every 50 ms and injects what it says, one key=value a line:
//
//	disk=eio       every write (write, append, truncate, create, mkdir,
//	               rename) fails with EIO
//	disk=enospc    the disk is full: what needs new space (create, mkdir,
//	               rename, append, a write past a file's end, a truncate
//	               that grows a file) fails with ENOSPC, while writes
//	               inside a file's size and truncates that shrink it
//	               succeed (as on ext4, xfs, tmpfs); the broker's
//	               free-space check (strata.log.dir.min.free.bytes) reads
//	               0 usable bytes
//	disk=fsync     every fsync (files and directories) fails with EIO
//	clock=DURATION the broker's wall clock runs DURATION ahead (or behind,
//	               negative: clock=-45s): record timestamps, retention,
//	               transaction and group timeouts, share locks
//
// A missing or empty file injects nothing. It reaches the storage engine
// through its filesystem interface (segment.FS: partition logs and the
// broker's Raft logs) and the clocks the coordinators and the log manager
// take. Not a setting, and never for production: a broker started
// without the variable has neither the wrapper nor the clock.

const faultControlEnv = "STRATA_FAULTS_CONTROL"

// faultInjection is what serve passes on: nil FS and Now when off.
type faultInjection struct {
	FS  segment.FS
	Now func() time.Time
	// FreeSpace is replication.BrokerConfig.FreeSpace: 0 usable bytes
	// under disk=enospc, the file system's otherwise.
	FreeSpace func(dir string) (int64, error)

	disk  atomic.Value // string: "", "eio", "enospc", "fsync"
	clock atomic.Int64 // offset in nanoseconds
}

// startFaultInjection reads the control file named by the environment
// until ctx ends; off (the zero value) without the variable.
func startFaultInjection(ctx context.Context, logger *slog.Logger) *faultInjection {
	fi := &faultInjection{}
	path := os.Getenv(faultControlEnv)
	if path == "" {
		return fi
	}
	fi.disk.Store("")
	fi.FS = &faultFS{inner: segment.OSFS{}, fi: fi}
	fi.Now = func() time.Time { return time.Now().Add(time.Duration(fi.clock.Load())) }
	fi.FreeSpace = func(dir string) (int64, error) {
		if fi.disk.Load() == "enospc" {
			return 0, nil
		}
		return replication.UsableBytes(dir)
	}
	logger.Warn("TEST-ONLY fault injection enabled", "control", path)
	fi.read(path, logger)
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fi.read(path, logger)
			}
		}
	}()
	return fi
}

func (fi *faultInjection) read(path string, logger *slog.Logger) {
	b, _ := os.ReadFile(path) // missing: no fault
	disk, clock := "", time.Duration(0)
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), "=")
		switch k {
		case "disk":
			disk = v
		case "clock":
			clock, _ = time.ParseDuration(v)
		}
	}
	if old := fi.disk.Swap(disk); old != disk {
		logger.Warn("fault injection: disk", "mode", disk)
	}
	if old := fi.clock.Swap(int64(clock)); old != int64(clock) {
		logger.Warn("fault injection: clock offset", "offset", clock)
	}
}

// writeErr is the error of a write that needs new space under the
// current disk fault.
func (fi *faultInjection) writeErr() error {
	switch fi.disk.Load() {
	case "eio":
		return syscall.EIO
	case "enospc":
		return syscall.ENOSPC
	}
	return nil
}

// overwriteErr is the error of a write that needs no new space (inside a
// file, a shrinking truncate): EIO fails it, a full disk does not.
func (fi *faultInjection) overwriteErr() error {
	if fi.disk.Load() == "eio" {
		return syscall.EIO
	}
	return nil
}

func (fi *faultInjection) syncErr() error {
	if fi.disk.Load() == "fsync" {
		return syscall.EIO
	}
	return nil
}

// faultFS is segment.FS failing as the control file says.
type faultFS struct {
	inner segment.FS
	fi    *faultInjection
}

func (f *faultFS) Create(name string) (segment.File, error) {
	if err := f.fi.writeErr(); err != nil {
		return nil, &os.PathError{Op: "create", Path: name, Err: err}
	}
	fl, err := f.inner.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: fl, fi: f.fi, name: name}, nil
}

func (f *faultFS) Open(name string) (segment.File, error) {
	fl, err := f.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: fl, fi: f.fi, name: name}, nil
}

func (f *faultFS) Stat(name string) (int64, error) { return f.inner.Stat(name) }

func (f *faultFS) Rename(oldname, newname string) error {
	if err := f.fi.writeErr(); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return f.inner.Rename(oldname, newname)
}

func (f *faultFS) Remove(name string) error    { return f.inner.Remove(name) }
func (f *faultFS) RemoveAll(name string) error { return f.inner.RemoveAll(name) }

func (f *faultFS) MkdirAll(name string) error {
	if err := f.fi.writeErr(); err != nil {
		return &os.PathError{Op: "mkdir", Path: name, Err: err}
	}
	return f.inner.MkdirAll(name)
}

func (f *faultFS) ReadDir(name string) ([]segment.DirEntry, error) { return f.inner.ReadDir(name) }

func (f *faultFS) SyncDir(name string) error {
	if err := f.fi.syncErr(); err != nil {
		return &os.PathError{Op: "fsync", Path: name, Err: err}
	}
	return f.inner.SyncDir(name)
}

// faultFile fails writes and syncs; reads and maps pass through.
type faultFile struct {
	segment.File
	fi   *faultInjection
	name string
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	check := f.fi.writeErr
	if size, err := f.File.Size(); err == nil && off+int64(len(p)) <= size {
		check = f.fi.overwriteErr
	}
	if err := check(); err != nil {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: err}
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Append(p []byte) (int, error) {
	if err := f.fi.writeErr(); err != nil {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: err}
	}
	return f.File.Append(p)
}

func (f *faultFile) Truncate(size int64) error {
	check := f.fi.writeErr
	if cur, err := f.File.Size(); err == nil && size <= cur {
		check = f.fi.overwriteErr
	}
	if err := check(); err != nil {
		return &os.PathError{Op: "truncate", Path: f.name, Err: err}
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Sync() error {
	if err := f.fi.syncErr(); err != nil {
		return &os.PathError{Op: "fsync", Path: f.name, Err: err}
	}
	return f.File.Sync()
}
