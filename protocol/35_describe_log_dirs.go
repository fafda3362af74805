package protocol

import (
	"context"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/acl"
)

// DescribeLogDirs: v0-4
//
// Behaviour:
//   - One log directory: the broker's data directory (absolute path),
//     with every partition of the request that has a log on this broker,
//     leader or follower (Topics null = all of them).
//   - Each partition's Size is the bytes of its segments' record batches
//     (the .log files, as Kafka's log.size; indexes and checkpoints are
//     not counted). OffsetLag is max(high watermark - log end, 0), as
//     Kafka computes it for a current (not future) replica: 0, since a
//     replica's high watermark never passes its own log end. IsFuture is
//     always false (no AlterReplicaLogDirs).
//   - TotalBytes / UsableBytes (v4+): the size of the file system holding
//     the data directory and what an unprivileged writer may still use
//     (statfs: blocks and available blocks); -1 where statfs is not
//     available.
//   - Requested partitions this broker has no log of are left out, as
//     Kafka does; a repeated partition is answered once.
//   - The directory's ErrorCode is KAFKA_STORAGE_ERROR while it is below
//     strata.log.dir.min.free.bytes (produce to it refused; Kafka reports
//     an offline directory so); its partitions and space are still
//     listed, since they can still be read.
//
// Version notes:
//   - v1: throttle after the response; v2: flexible; v3: top-level
//     ErrorCode (authorization only, always 0 here); v4: TotalBytes,
//     UsableBytes. (Kafka 4.0 removed v0; we keep it for 2.x clients.)
//
// Differences from Kafka: Kafka lists every topic with a log in the
// directory, with an empty partition list for those the request did not
// name; we list only topics with at least one answered partition. There
// is one directory (log.dirs with several entries is not supported). An
// offline directory in Kafka lists nothing; a full one here lists what it
// holds. Other storage failures show in the partitions' own errors.
func init() {
	register(35, 0, 4, concurrent, (*Server).handleDescribeLogDirs, needsCluster(acl.Describe))
}

func (s *Server) handleDescribeLogDirs(_ context.Context, req *kmsg.DescribeLogDirsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	cfg := s.broker.Config()
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = cfg.DataDir
	if abs, err := filepath.Abs(cfg.DataDir); err == nil {
		dir.Dir = abs
	}
	if req.Version >= 4 {
		dir.TotalBytes, dir.UsableBytes = diskSpace(dir.Dir)
	}
	if err := s.broker.LogDirError(); err != nil {
		dir.ErrorCode = kerr.KafkaStorageError.Code
	}
	// add appends one partition's entry if it has a log here; byTopic
	// keeps one entry per topic and seen one per partition (a request may
	// name either twice). Both grow at most with the request or the
	// metadata image.
	byTopic := map[string]int{}
	type tp struct {
		topic     string
		partition int32
	}
	seen := map[tp]struct{}{}
	add := func(topic string, partition int32) {
		if _, dup := seen[tp{topic, partition}]; dup {
			return
		}
		seen[tp{topic, partition}] = struct{}{}
		p := s.broker.LocalLog(topic, partition)
		if p == nil {
			return
		}
		i, ok := byTopic[topic]
		if !ok {
			i = len(dir.Topics)
			byTopic[topic] = i
			t := kmsg.NewDescribeLogDirsResponseDirTopic()
			t.Topic = topic
			dir.Topics = append(dir.Topics, t)
		}
		t := &dir.Topics[i]
		sp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		sp.Partition = partition
		for _, seg := range p.Segments() {
			sp.Size += seg.Size
		}
		off := p.Offsets()
		sp.OffsetLag = max(off.HighWatermark-off.LogEnd, 0)
		t.Partitions = append(t.Partitions, sp)
	}
	if req.Topics == nil {
		for _, t := range s.broker.Topics() {
			for _, pi := range t.Partitions {
				add(t.Name, pi.Partition)
			}
		}
	} else {
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				add(rt.Topic, p)
			}
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	return resp, nil
}
