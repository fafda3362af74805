//go:build !unix

package sim

import "time"

// cpuTime is not measured here.
func cpuTime() time.Duration { return 0 }
