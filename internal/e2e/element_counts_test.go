package e2e

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMetadataDuplicateTopics: a Metadata request naming one topic of P
// partitions N times was answered N times, N x P partitions (issue 19,
// item 6: a 700 KB request naming a 100-partition topic 100,000 times
// made the broker build a response of 10 million partitions). Kafka reads
// the names into a set; so does Strata now: one answer per topic.
func TestMetadataDuplicateTopics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	metrics := freeAddr(t)
	b := startBroker(t, "", "--set", "metrics.listener="+metrics)
	cl := b.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 100, 1, nil, "wide"); err != nil || resp.Err != nil {
		t.Fatalf("create wide: %v %v", err, resp.Err)
	}
	const n = 100000
	req := kmsg.NewPtrMetadataRequest()
	name := "wide"
	for i := 0; i < n; i++ {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &name
		req.Topics = append(req.Topics, rt)
	}
	missing := "missing"
	for i := 0; i < 10; i++ {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &missing
		req.Topics = append(req.Topics, rt)
	}
	before := goAllocatedKiB(t, metrics)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	alloc := goAllocatedKiB(t, metrics) - before
	parts := 0
	for _, rt := range resp.Topics {
		parts += len(rt.Partitions)
	}
	t.Logf("Metadata naming a 100-partition topic %d times: %d topics, %d partitions answered; the broker allocated %d KiB", n, len(resp.Topics), parts, alloc)
	if len(resp.Topics) != 2 || parts != 100 || *resp.Topics[0].Topic != "wide" || *resp.Topics[1].Topic != "missing" {
		t.Fatalf("answered %d topics, %d partitions", len(resp.Topics), parts)
	}
	if alloc > 64<<10 {
		t.Errorf("the broker allocated %d KiB for one Metadata request", alloc)
	}
	b.alive(t)
}

// TestOffsetCommitElementCount: an OffsetCommit naming 2 million empty
// topics (6 MB; kmsg decodes each 3-byte topic into a 64-byte struct, and
// the handler answers each) is refused before it is decoded: the
// connection closes and the broker allocates little.
func TestOffsetCommitElementCount(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	metrics := freeAddr(t)
	b := startBroker(t, "", "--set", "metrics.listener="+metrics)
	const topics = 2000000
	body := []byte{2, 'g', 0xff, 0xff, 0xff, 0xff, 1, 0} // group "g", generation -1, member "", instance null
	body = binary.AppendUvarint(body, topics+1)
	for i := 0; i < topics; i++ {
		body = append(body, 1, 1, 0) // empty name, no partitions, no tags
	}
	body = append(body, 0)
	before := goAllocatedKiB(t, metrics)
	c, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Write(kafkaFrame(8, 8, 1, true, body))
	if !closedWithin(c, 30*time.Second) {
		t.Fatal("an OffsetCommit of 2 million topics was not refused")
	}
	alloc := goAllocatedKiB(t, metrics) - before
	t.Logf("OffsetCommit of %d topics (%d bytes): refused; the broker allocated %d KiB", topics, len(body), alloc)
	if alloc > 32<<10 {
		t.Errorf("the broker allocated %d KiB", alloc)
	}
	if !strings.Contains(b.logText(), "names more than") {
		t.Error("no log line for the refused request")
	}
	b.alive(t)
}
