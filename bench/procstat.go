package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux architecture Go supports (sysconf needs cgo).
const clockTicks = 100

// ProcCPU returns the CPU time (user + system) process pid has used, in
// seconds, from /proc/<pid>/stat.
func ProcCPU(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrBroker, err)
	}
	return parseStatCPU(b)
}

// parseStatCPU reads fields 14 (utime) and 15 (stime) of a stat line. The
// command name (field 2) is in parentheses and may hold spaces or ')', so
// fields are counted from the last ')'.
func parseStatCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: stat: no command name", ErrBroker)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: stat: %d fields", ErrBroker, len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%w: stat: utime %q stime %q", ErrBroker, f[11], f[12])
	}
	return float64(ut+st) / clockTicks, nil
}

// ProcPeakRSS returns the peak resident set size (VmHWM) of process pid in
// bytes, from /proc/<pid>/status.
func ProcPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrBroker, err)
	}
	return parseStatusKB(b, "VmHWM:")
}

func parseStatusKB(b []byte, field string) (int64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb << 10, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("%w: status: no %s", ErrBroker, field)
}

// ProcChildren returns the processes whose parent is pid (field 4 of
// /proc/<child>/stat), at most max of them.
func ProcChildren(pid, max int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBroker, err)
	}
	var kids []int
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		if ppid, err := parseStatPPID(b); err == nil && ppid == pid {
			kids = append(kids, child)
			if len(kids) >= max {
				break
			}
		}
	}
	return kids, nil
}

// parseStatPPID reads field 4 (ppid) of a stat line.
func parseStatPPID(b []byte) (int, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: stat: no command name", ErrBroker)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, fmt.Errorf("%w: stat: %d fields", ErrBroker, len(f))
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, fmt.Errorf("%w: stat: ppid %q", ErrBroker, f[1])
	}
	return n, nil
}
