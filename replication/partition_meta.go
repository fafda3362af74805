package replication

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

// Each partition directory names the topic ID it belongs to, in Kafka's
// partition.metadata file ("version: 0", "topic_id: <base64url UUID>"), so
// a directory left by a topic that was deleted while this broker was down
// is told apart from the new topic of the same name: a broker that missed
// a deletion and a re-creation would otherwise open the old directory as
// the new topic's partition and serve its records. At start, and whenever
// a partition of a topic opens, a directory of another topic ID (or of no
// topic in the metadata) is a stray and is deleted, as Kafka deletes stray
// replicas (KAFKA-14616). A directory without the file (written before it
// existed, or lost in a crash: it is written without fsync, like Kafka's)
// is adopted and the file written.

const partitionMetaFile = "partition.metadata"

// kafkaUUID is Kafka's text form of a UUID (URL-safe base64, no padding).
func kafkaUUID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// readPartitionTopicID returns the topic ID dir's partition.metadata
// names; ok is false when the file is missing or does not parse.
func readPartitionTopicID(fsys segment.FS, dir string) (id [16]byte, ok bool) {
	path := filepath.Join(dir, partitionMetaFile)
	size, err := fsys.Stat(path)
	if err != nil || size <= 0 || size > 4096 {
		return id, false
	}
	f, err := fsys.Open(path)
	if err != nil {
		return id, false
	}
	defer f.Close()
	buf := make([]byte, size)
	if n, err := f.ReadAt(buf, 0); n != len(buf) && err != nil {
		return id, false
	}
	for _, line := range bytes.Split(buf, []byte("\n")) {
		k, v, found := strings.Cut(string(line), ":")
		if !found || strings.TrimSpace(k) != "topic_id" {
			continue
		}
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(v))
		if err != nil || len(raw) != 16 {
			return id, false
		}
		copy(id[:], raw)
		return id, true
	}
	return id, false
}

// writePartitionTopicID writes dir's partition.metadata (no fsync: a
// missing file is adopted at the next open).
func writePartitionTopicID(fsys segment.FS, dir string, id [16]byte) error {
	f, err := fsys.Create(filepath.Join(dir, partitionMetaFile))
	if err != nil {
		return err
	}
	_, err = f.Append([]byte("version: 0\ntopic_id: " + kafkaUUID(id) + "\n"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// dropStrayDir deletes tp's directory if it belongs to a topic ID other
// than id (a topic of the same name deleted while this broker was down).
// The partition must not have a running group. It reports whether the
// directory is (now) absent or ours.
func (r *partitionReplicas) dropStrayDir(tp log.TopicPartition, id [16]byte) error {
	lp := r.logs.Get(tp)
	if lp == nil || r.group(tp) != nil {
		return nil
	}
	got, ok := readPartitionTopicID(r.cfg.FS, lp.Dir())
	if !ok || got == id {
		return nil
	}
	r.logger.Warn("partition directory belongs to an earlier topic of the same name (deleted while this broker was away); deleting it",
		"partition", tp.String(), "dir_topic_id", kafkaUUID(got), "topic_id", kafkaUUID(id))
	if err := r.logs.Delete(tp); err != nil {
		return fmt.Errorf("replication: delete stray %s: %w", tp, err)
	}
	return nil
}

// adoptDir writes lp's partition.metadata when it has none.
func (r *partitionReplicas) adoptDir(lp *log.Partition, id [16]byte) {
	if got, ok := readPartitionTopicID(r.cfg.FS, lp.Dir()); ok && got == id {
		return
	}
	if err := writePartitionTopicID(r.cfg.FS, lp.Dir(), id); err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.logger.Warn("could not write partition.metadata", "partition", lp.TopicPartition().String(), "err", err)
	}
}
