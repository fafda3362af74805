package bench

import (
	"os/exec"
	"syscall"
)

// setDeathSignal has the kernel send SIGTERM to a broker child if the
// tool dies without stopping it (killed, crashed), so no broker outlives
// a compare run. (Linux ties the signal to the thread that started the
// child; Go ends threads only for goroutines that locked one, which this
// tool does not do.)
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
