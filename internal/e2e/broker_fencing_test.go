package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// TestBrokerFencing: three brokers as real processes with
// broker.session.timeout.ms=3000. A broker cut off from the others (its
// replication traffic refused) is fenced by the controller: Metadata
// leaves it out and reports its replicas offline, DescribeCluster lists
// it only with IncludeFencedBrokers (IsFenced), new topics are placed on
// the two others only; healed, it is unfenced. SIGKILLed, it is fenced
// again; restarted, it registers itself unfenced. Not in -short.
func TestBrokerFencing(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test (real processes); skipped with -short")
	}
	c := startChaosCluster(t, 3, 500*time.Millisecond, "--set", "broker.session.timeout.ms=3000")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.client())
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "fenced-rf3"); err != nil {
		t.Fatal(err)
	}
	c.waitLeaders(ctx, adm, "fenced-rf3", 3, 60*time.Second)

	// The victim is a broker that is not the controller.
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var victim, asked *chaosNode
	for _, n := range c.nodes {
		if n.id != md.Controller {
			if victim == nil {
				victim = n
			} else {
				asked = n
			}
		}
	}

	// state asks broker n for Metadata's brokers, the offline replicas of
	// fenced-rf3 and DescribeCluster's (with fenced brokers) fenced IDs.
	state := func(n *chaosNode) (brokers, offline, fenced []int32, err error) {
		cl := c.direct(n).SeedBrokers()[0]
		mreq := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("fenced-rf3")
		mreq.Topics = append(mreq.Topics, rt)
		kr, err := cl.Request(ctx, mreq)
		if err != nil {
			return nil, nil, nil, err
		}
		mr := kr.(*kmsg.MetadataResponse)
		for _, b := range mr.Brokers {
			brokers = append(brokers, b.NodeID)
		}
		seen := map[int32]bool{}
		for _, tp := range mr.Topics {
			for _, p := range tp.Partitions {
				for _, o := range p.OfflineReplicas {
					if !seen[o] {
						seen[o] = true
						offline = append(offline, o)
					}
				}
			}
		}
		dreq := kmsg.NewPtrDescribeClusterRequest()
		dreq.IncludeFencedBrokers = true
		kr, err = cl.Request(ctx, dreq)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, b := range kr.(*kmsg.DescribeClusterResponse).Brokers {
			if b.IsFenced {
				fenced = append(fenced, b.NodeID)
			}
		}
		for _, s := range [][]int32{brokers, offline, fenced} {
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		}
		return brokers, offline, fenced, nil
	}
	var last string
	waitState := func(what string, want func(brokers, offline, fenced []int32) bool) {
		t.Helper()
		ok := testwait.Until(60*time.Second, func() bool {
			b, o, f, err := state(asked)
			last = fmt.Sprintf("brokers %v, offline replicas %v, fenced %v, err %v", b, o, f, err)
			return err == nil && want(b, o, f)
		})
		if !ok {
			t.Fatalf("%s: not within 60s; broker %d answers %s\n%s", what, asked.id, last, c.grepLogs(10, "fenced"))
		}
		t.Logf("%s: %s", what, last)
	}
	isFenced := func(brokers, offline, fenced []int32) bool {
		return len(brokers) == 2 && !hasNode(brokers, victim.id) && fmt.Sprint(offline) == fmt.Sprint([]int32{victim.id}) &&
			fmt.Sprint(fenced) == fmt.Sprint([]int32{victim.id})
	}
	unfenced := func(brokers, offline, fenced []int32) bool {
		return len(brokers) == 3 && len(offline) == 0 && len(fenced) == 0
	}

	c.net.isolate(victim.id)
	waitState(fmt.Sprintf("broker %d cut off", victim.id), isFenced)
	// New partitions go to the two brokers not fenced.
	_, err = adm.CreateTopic(ctx, 1, 3, nil, "fenced-rf3-new")
	if !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("RF 3 with a broker fenced: %v, want INVALID_REPLICATION_FACTOR", err)
	}
	if _, err := adm.CreateTopic(ctx, 4, 2, nil, "fenced-rf2"); err != nil {
		t.Fatal(err)
	}
	tds, err := adm.ListTopics(ctx, "fenced-rf2")
	if err != nil {
		t.Fatal(err)
	}
	for _, pd := range tds["fenced-rf2"].Partitions {
		if hasNode(pd.Replicas, victim.id) {
			t.Fatalf("partition %d placed on fenced broker %d: %v", pd.Partition, victim.id, pd.Replicas)
		}
	}
	c.net.heal(victim.id)
	waitState(fmt.Sprintf("broker %d healed", victim.id), unfenced)

	victim.kill()
	waitState(fmt.Sprintf("broker %d killed", victim.id), isFenced)
	victim.start()
	victim.waitReady(60 * time.Second)
	waitState(fmt.Sprintf("broker %d restarted", victim.id), unfenced)
}

func hasNode(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
