//go:build !linux && !darwin

package replication

import "errors"

// statfsUsable: no statfs on this platform; the free-space check is off
// (diskLoop logs it once).
func statfsUsable(string) (int64, error) {
	return 0, errors.New("statfs not available on this platform")
}
