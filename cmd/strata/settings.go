package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Reading settings from the merged configuration (config.go): each
// parse*Settings function checks its settings with these, so every
// invalid value is reported the same way, naming where it came from.

// badSetting is the error for setting name's invalid value (a secret's
// value hidden), saying why.
func badSetting(merged map[string]rawValue, name, why string) error {
	rv := merged[name]
	return fmt.Errorf("%w: invalid value %q for %s (from %s): %s", errConfig, shown(name, rv.value), name, rv.origin, why)
}

// intSetting is setting name as an integer in [lo, hi].
func intSetting(merged map[string]rawValue, name string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(merged[name].value, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badSetting(merged, name, fmt.Sprintf("must be an integer between %d and %d", lo, hi))
	}
	return n, nil
}

// msSetting is setting name, in milliseconds, as a duration in [lo, hi]
// milliseconds.
func msSetting(merged map[string]rawValue, name string, lo, hi int64) (time.Duration, error) {
	n, err := intSetting(merged, name, lo, hi)
	return time.Duration(n) * time.Millisecond, err
}

// boolSetting is setting name as true or false (any case).
func boolSetting(merged map[string]rawValue, name string) (bool, error) {
	switch strings.ToLower(merged[name].value) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, badSetting(merged, name, "expected true or false")
}
