//go:build !linux

package procs

import "errors"

// setIdleSlack: timer slack is a Linux feature.
func setIdleSlack(ns int64) error { return errors.New("timer slack is Linux-only") }
