//go:build !linux

package bench

import "os/exec"

// setDeathSignal: only Linux has a parent-death signal; elsewhere a broker
// child of a killed compare run must be stopped by hand.
func setDeathSignal(cmd *exec.Cmd) {}
