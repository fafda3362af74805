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

// TestOffsetCommitElementCount: an OffsetCommit, and a Fetch, naming 2
// million empty topics (6 MB; kmsg decodes each 3-byte topic into a
// 64-byte struct, and the handler answers each) are refused before they
// are decoded: the connection closes and the broker allocates little.
func TestOffsetCommitElementCount(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	metrics := freeAddr(t)
	b := startBroker(t, "", "--set", "metrics.listener="+metrics)
	const topics = 2000000
	for _, p := range []struct {
		name         string
		key, version int16
		head         []byte
	}{
		// group "g", generation -1, member "", instance null
		{"OffsetCommit", 8, 8, []byte{2, 'g', 0xff, 0xff, 0xff, 0xff, 1, 0}},
		// replica -1, max wait 0, min bytes 0, max bytes 0, isolation 0, session 0, epoch -1
		{"Fetch", 1, 12, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}},
	} {
		body := append([]byte(nil), p.head...)
		body = binary.AppendUvarint(body, topics+1)
		for i := 0; i < topics; i++ {
			body = append(body, 1, 1, 0) // empty name, no partitions, no tags
		}
		body = append(body, 1, 1, 0) // (Fetch: no forgotten topics, rack "", no tags)
		before := goAllocatedKiB(t, metrics)
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go c.Write(kafkaFrame(p.key, p.version, 1, true, body))
		if !closedWithin(c, 30*time.Second) {
			t.Fatalf("a %s of 2 million topics was not refused", p.name)
		}
		alloc := goAllocatedKiB(t, metrics) - before
		t.Logf("%s of %d topics (%d bytes): refused; the broker allocated %d KiB", p.name, topics, len(body), alloc)
		if alloc > 32<<10 {
			t.Errorf("%s: the broker allocated %d KiB", p.name, alloc)
		}
	}
	if !strings.Contains(b.logText(), "names more than") {
		t.Error("no log line for the refused requests")
	}
	b.alive(t)
}
