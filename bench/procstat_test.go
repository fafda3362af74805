package bench

import (
	"os"
	"os/exec"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	// Field 2 holds spaces and a ')' to make sure fields count from the last ')'.
	line := "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 3 0 5 1000 200\n"
	got, err := parseStatCPU([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got != 3.8 {
		t.Errorf("cpu = %v, want 3.8 (380 ticks)", got)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 a b"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestParseStatusPeakRSS(t *testing.T) {
	status := "Name:\tstrata\nVmPeak:\t  100 kB\nVmHWM:\t   2048 kB\nVmRSS:\t 1024 kB\n"
	got, err := parseStatusKB([]byte(status), "VmHWM:")
	if err != nil || got != 2048<<10 {
		t.Fatalf("got %d, %v", got, err)
	}
	if _, err := parseStatusKB([]byte("Name: x\n"), "VmHWM:"); err == nil {
		t.Error("want an error without VmHWM")
	}
}

func TestProcSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := ProcCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	rss, err := ProcPeakRSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("rss %d, %v", rss, err)
	}
}

func TestProcChildren(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	if ppid, err := parseStatPPID([]byte("12 (a) b) S 34 12 12 0")); err != nil || ppid != 34 {
		t.Fatalf("ppid %d %v", ppid, err)
	}
	if _, err := parseStatPPID([]byte("12 (a")); err == nil {
		t.Error("want an error")
	}
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	kids, err := ProcChildren(os.Getpid(), 100)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range kids {
		found = found || k == cmd.Process.Pid
	}
	if !found {
		t.Errorf("children %v, want %d among them", kids, cmd.Process.Pid)
	}
}
