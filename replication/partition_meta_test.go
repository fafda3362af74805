package replication

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testwait"
	"github.com/strata-io/strata/log"
	"github.com/strata-io/strata/segment"
)

func TestPartitionMetaRoundTrip(t *testing.T) {
	dir := t.TempDir()
	fsys := segment.OSFS{}
	if _, ok := readPartitionTopicID(fsys, dir); ok {
		t.Fatal("a topic id read from a directory without partition.metadata")
	}
	id := [16]byte{0xfb, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff}
	if err := writePartitionTopicID(fsys, dir, id); err != nil {
		t.Fatal(err)
	}
	if got, ok := readPartitionTopicID(fsys, dir); !ok || got != id {
		t.Fatalf("read back %x %v", got, ok)
	}
	// Kafka's text form: URL-safe base64 without padding.
	if s := kafkaUUID(id); s != "-wECAwQFBgcICQoLDA0O_w" {
		t.Fatalf("kafka uuid %q", s)
	}
}

// A broker down while a topic is deleted and another of the same name
// created comes back with neither stale copy: the deleted topic's
// directory is removed at start, and the old directory of the recreated
// name (another topic ID in its partition.metadata) is deleted before the
// new topic's partition opens, so the broker holds the new topic's
// records only (it used to open the old directory as the new partition).
func TestStrayDirectoriesOfMissedDeletions(t *testing.T) {
	q := newTestQuorum(t)
	ctx := context.Background()
	q.controller()
	testwait.For(t, 30*time.Second, func() bool { return len(q.brokers[0].Brokers()) == 3 }, "three brokers registered")
	all := map[int32][]int32{0: {1, 2, 3}}
	for _, name := range []string{"re", "gone"} {
		if _, err := q.brokers[0].CreateTopic(ctx, CreateTopicRequest{Name: name, NumPartitions: -1, ReplicationFactor: -1, Assignment: all}); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 5; k++ {
			q.produceTo(name, 0, batch(2, -1, -1, -1))
		}
		q.waitSameReplicas(name, 0, 5)
	}
	// The broker that misses the deletion is not the controller (its
	// writes then need no new election); the others retry a controller
	// change all the same.
	v := (q.controller() + 1) % 3
	adm := q.brokers[(v+1)%3]
	q.brokers[v].Close()
	q.brokers[v] = nil
	for _, name := range []string{"re", "gone"} {
		var err error
		if !testwait.Until(30*time.Second, func() bool {
			err = adm.DeleteTopic(ctx, name)
			return err == nil || errors.Is(err, ErrUnknownTopicOrPartition)
		}) {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
	var re TopicInfo
	var err error
	if !testwait.Until(30*time.Second, func() bool {
		re, err = adm.CreateTopic(ctx, CreateTopicRequest{Name: "re", NumPartitions: -1, ReplicationFactor: -1, Assignment: all})
		return err == nil
	}) {
		t.Fatalf("recreate re: %v", err)
	}
	q.produceTo("re", 0, batch(1, -1, -1, -1))
	q.produceTo("re", 0, batch(1, -1, -1, -1))

	if err := q.start(v); err != nil {
		t.Fatal(err)
	}
	q.waitSameReplicas("re", 0, 2)
	b3 := q.brokers[v]
	if b3.hasLog(log.TopicPartition{Topic: "gone", Partition: 0}) {
		t.Fatalf("broker %d kept the directory of a topic deleted while it was down", v+1)
	}
	lp := b3.logs.Get(log.TopicPartition{Topic: "re", Partition: 0})
	if lp == nil {
		t.Fatalf("broker %d has no log of the recreated topic", v+1)
	}
	if id, ok := readPartitionTopicID(b3.cfg.FS, lp.Dir()); !ok || id != re.ID {
		t.Fatalf("broker %d's re-0 names topic id %x (%v), want the new topic's %x", v+1, id, ok, re.ID)
	}
}
