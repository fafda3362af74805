package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testwait"
)

// The fault harness's injection (test only): off without the variable;
// with it, the control file fails writes with EIO or ENOSPC, fsyncs with
// EIO, and moves the clock.
func TestFaultInjection(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv(faultControlEnv, "")
	if fi := startFaultInjection(ctx, logger); fi.FS != nil || fi.Now != nil {
		t.Fatal("fault injection on without STRATA_FAULTS_CONTROL")
	}

	dir := t.TempDir()
	control := filepath.Join(dir, "control")
	t.Setenv(faultControlEnv, control)
	fi := startFaultInjection(ctx, logger)
	if fi.FS == nil || fi.Now == nil {
		t.Fatal("fault injection off with STRATA_FAULTS_CONTROL set")
	}
	f, err := fi.FS.Create(filepath.Join(dir, "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Append([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	set := func(s string) {
		t.Helper()
		if err := os.WriteFile(control, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(msg string, cond func() bool) {
		t.Helper()
		testwait.For(t, 10*time.Second, cond, "%s", msg)
	}
	// Each mode, waited for (the file is read every 50 ms).
	set("disk=eio\n")
	wait("writes fail with EIO", func() bool {
		_, err := f.Append([]byte("x"))
		return errors.Is(err, syscall.EIO)
	})
	if _, err := fi.FS.Create(filepath.Join(dir, "other")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("create under disk=eio: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("sync under disk=eio: %v", err)
	}
	set("disk=enospc\n")
	wait("writes that need space fail with ENOSPC", func() bool {
		_, err := f.Append([]byte("x"))
		return errors.Is(err, syscall.ENOSPC)
	})
	// A full disk: writes inside the file and shrinking it need no space;
	// growing it, a new file and the free-space check see it full.
	if _, err := f.WriteAt([]byte("y"), 0); err != nil {
		t.Fatalf("overwrite under disk=enospc: %v", err)
	}
	size, _ := f.Size()
	if _, err := f.WriteAt([]byte("yy"), size-1); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the end under disk=enospc: %v", err)
	}
	if _, err := fi.FS.Create(filepath.Join(dir, "other")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create under disk=enospc: %v", err)
	}
	if n, err := fi.FreeSpace(dir); err != nil || n != 0 {
		t.Fatalf("free space under disk=enospc: %d %v", n, err)
	}
	if err := f.Truncate(1); err != nil {
		t.Fatalf("shrinking truncate under disk=enospc: %v", err)
	}
	set("disk=fsync\n")
	wait("fsyncs fail with EIO", func() bool {
		return errors.Is(f.Sync(), syscall.EIO)
	})
	if _, err := f.Append([]byte("x")); err != nil {
		t.Fatalf("write under disk=fsync: %v", err)
	}
	if err := fi.FS.SyncDir(dir); !errors.Is(err, syscall.EIO) {
		t.Fatalf("directory sync under disk=fsync: %v", err)
	}
	set("clock=-90s\n")
	wait("the clock 90 s behind", func() bool {
		d := time.Since(fi.Now())
		return d > 89*time.Second && d < 100*time.Second
	})
	os.Remove(control)
	wait("no fault once the file is gone", func() bool {
		_, err := f.Append([]byte("x"))
		return err == nil && f.Sync() == nil && time.Since(fi.Now()) < 5*time.Second
	})
}
