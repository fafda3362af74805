package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

func init() {
	kafkaTools["kafka-metadata-quorum"] = "org.apache.kafka.tools.MetadataQuorumCommand"
}

// TestMetadataQuorumTool: Kafka's kafka-metadata-quorum (describe
// --status, --replication) against three brokers, each a voter, through
// DescribeQuorum (API 55); the same request sent by franz-go to a broker
// that is not the controller (it forwards it), and again with one voter
// SIGKILLed (its log end offset unknown, -1; the quorum still described).
// Not in -short.
func TestMetadataQuorumTool(t *testing.T) {
	if testing.Short() {
		t.Skip("three brokers: not in -short")
	}
	r := startToolRunner(t)
	c := startChaosCluster(t, 3, 500*time.Millisecond)
	bs := []string{"--bootstrap-server", strings.Join(c.bootstrap(), ",")}

	status := r.ok("kafka-metadata-quorum", with(bs, "describe", "--status")...)
	for _, want := range []string{"ClusterId:", "LeaderId:", "LeaderEpoch:", "HighWatermark:", "MaxFollowerLag:", "CurrentVoters:", "CurrentObservers:"} {
		if !strings.Contains(status, want) {
			t.Fatalf("describe --status lacks %q:\n%s", want, status)
		}
	}
	m := regexp.MustCompile(`LeaderId:\s+(\d+)`).FindStringSubmatch(status)
	if m == nil {
		t.Fatalf("no LeaderId in:\n%s", status)
	}
	for _, id := range []string{`"id": 1`, `"id": 2`, `"id": 3`} {
		if !strings.Contains(status, id) {
			t.Fatalf("describe --status: voter %s missing:\n%s", id, status)
		}
	}
	repl := r.ok("kafka-metadata-quorum", with(bs, "describe", "--replication")...)
	lines := strings.Split(strings.TrimSpace(repl), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "NodeId") || !strings.Contains(lines[0], "LogEndOffset") {
		t.Fatalf("describe --replication: want a header and three voters:\n%s", repl)
	}
	t.Logf("describe --status:\n%s\ndescribe --replication:\n%s", status, repl)
	leaders, followers := 0, 0
	for _, l := range lines[1:] {
		switch {
		case strings.Contains(l, "Leader"):
			leaders++
		case strings.Contains(l, "Follower"):
			followers++
		}
	}
	if leaders != 1 || followers != 2 {
		t.Fatalf("describe --replication: want one leader and two followers:\n%s", repl)
	}

	// franz-go, to a broker that is not the controller.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	describe := func(n *chaosNode) (*kmsg.DescribeQuorumResponseTopicPartition, error) {
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		kresp, err := c.direct(n).SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			return nil, err
		}
		resp := kresp.(*kmsg.DescribeQuorumResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, err
		}
		p := &resp.Topics[0].Partitions[0]
		return p, kerr.ErrorForCode(p.ErrorCode)
	}
	leader, err := describe(c.nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	var follower, victim *chaosNode
	for _, n := range c.nodes {
		if n.id != leader.LeaderID {
			if follower == nil {
				follower = n
			} else {
				victim = n
			}
		}
	}
	p, err := describe(follower)
	if err != nil || p.LeaderID != leader.LeaderID || len(p.CurrentVoters) != 3 || len(p.Observers) != 0 {
		t.Fatalf("via broker %d: %+v %v", follower.id, p, err)
	}
	for _, v := range p.CurrentVoters {
		if v.LogEndOffset < 1 || v.LastFetchTimestamp <= 0 {
			t.Fatalf("via broker %d: voter %+v", follower.id, v)
		}
	}

	// One voter down: described as unknown, the others as before.
	victim.kill()
	var last string
	ok := testwait.Until(60*time.Second, func() bool {
		p, err := describe(follower)
		if err != nil {
			last = err.Error()
			return false
		}
		down, up := 0, 0
		var vs []string
		for _, v := range p.CurrentVoters {
			vs = append(vs, fmt.Sprintf("%d: leo %d fetch %d caught up %d", v.ReplicaID, v.LogEndOffset, v.LastFetchTimestamp, v.LastCaughtUpTimestamp))
			switch {
			case v.ReplicaID == victim.id && v.LogEndOffset == -1:
				down++
			case v.ReplicaID != victim.id && v.LogEndOffset >= 1:
				up++
			}
		}
		last = fmt.Sprintf("leader %d hw %d: %s", p.LeaderID, p.HighWatermark, strings.Join(vs, "; "))
		return down == 1 && up == 2
	})
	if !ok {
		t.Fatalf("voter %d not described as down (log end offset -1) with the other two up within 60s: last %s", victim.id, last)
	}
	t.Logf("with broker %d down: %s", victim.id, last)
}
