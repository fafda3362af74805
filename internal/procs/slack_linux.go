package procs

import (
	"errors"
	"os"
	"strconv"
)

// setIdleSlack sets the kernel timer slack of every thread of the process:
// ns > 0 lets the kernel fire each of the thread's timed sleeps (epoll,
// futex, nanosleep) up to ns late, together with its neighbours; 0 puts
// back each thread's default (50 µs unless the operator set another,
// e.g. systemd's TimerSlackNSec). Changing another thread's slack needs
// CAP_SYS_NICE (Linux's rule for /proc/<tid>/timerslack_ns): without it
// the first refusal is returned and the governor keeps only the single P.
func setIdleSlack(ns int64) error {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	val := []byte(strconv.FormatInt(ns, 10))
	var first error
	for _, e := range ents {
		// The file is in /proc/<tid>/ (a thread's own directory, not
		// listed in /proc but there), not in /proc/self/task/<tid>/.
		f, err := os.OpenFile("/proc/"+e.Name()+"/timerslack_ns", os.O_WRONLY, 0)
		if err == nil {
			_, err = f.Write(val)
			f.Close()
		}
		if err == nil || first != nil {
			continue
		}
		// A thread that exited meanwhile is no refusal; a kernel
		// without the file (before Linux 4.6) is.
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat("/proc/self/task/" + e.Name()); serr != nil {
				continue
			}
		}
		first = err
	}
	return first
}
