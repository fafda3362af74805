package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
)

// diskSettings: what a broker does when its disk fills (replication's
// partition_disk_space.go). Kafka has no such setting: it takes a log directory
// offline once a write to it fails.
var diskSettings = []setting{
	{"strata.log.dir.min.free.bytes", "268435456", "Below this many usable bytes on the file system holding the data directory (checked every 500 ms), produce answers KAFKA_STORAGE_ERROR, the directory is reported offline (DescribeLogDirs, kafka_log_logmanager_offlinelogdirectorycount) and this broker's partition and controller leaderships move to other replicas; reads go on, and produce resumes by itself once the usable bytes are back above the threshold plus 10%. Replication to this broker and internal writes go on into the margin. 0 disables the check (Strata-specific). 0..2^63-1."},
}

// diskConfig is the parsed disk settings.
type diskConfig struct {
	MinFreeBytes int64
}

func parseDiskSettings(merged map[string]rawValue, cfg *Config) error {
	const name = "strata.log.dir.min.free.bytes"
	rv := merged[name]
	n, err := strconv.ParseInt(rv.value, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%w: invalid value %q for %s (from %s): expected a non-negative integer", errConfig, rv.value, name, rv.origin)
	}
	cfg.Disk.MinFreeBytes = n
	return nil
}

// exitStorage: raft's own state (its current term) could not be written;
// the broker stopped at once (storageFatal).
const exitStorage = 4

// storageFatal is BrokerConfig.OnStorageFatal for strata serve: raft
// cannot go on without saving its term (hashicorp/raft panics on that
// error), so the broker logs why and exits with status 4 instead of a
// panic trace. Kafka halts a broker whose only log directory failed in
// the same way. What the replicas acknowledged is on their disks: a
// restart recovers like after a crash.
func storageFatal(logger *slog.Logger) func(error) {
	return func(err error) {
		logger.Error("storage failure: raft's state cannot be written; stopping the broker (exit status 4). Check the data directory's disk, then restart", "err", err)
		os.Exit(exitStorage)
	}
}
