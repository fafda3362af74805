// Package e2e holds Strata's end-to-end tests: the real `strata` binary,
// started as a separate process on 127.0.0.1, driven by real Kafka clients
// (franz-go in Go; kcat, python3-confluent-kafka and python3-kafka through
// their command-line programs). These tests prove compatibility and crash
// safety from the outside: they kill the process with SIGKILL, restart it and
// check that every acknowledged record is still there.
//
// Nothing here is imported by the broker; the package has only tests.
package e2e
