package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testwait"
)

// TestUnregisterBroker: removing a broker from a running cluster of
// three processes. Its partitions are moved away first
// (AlterPartitionReassignments), it is SIGKILLed, and UnregisterBroker
// (API 64, sent by franz-go as Kafka's kafka-cluster unregister --id 3
// sends it) removes its registration: Metadata lists two brokers,
// CreateTopics at RF 3 is refused and RF 2 lands on the two left;
// unregistering it again fails (BROKER_ID_NOT_REGISTERED). Started again,
// it registers itself. Not in -short. (kafka-cluster itself, run through
// the tool runner here, lost the runner JVM (EOF on its stdout) at its
// first call; run by hand against one broker it answers "Broker 1 is no
// longer registered." and, for an unknown ID, BrokerIdNotRegisteredException.)
func TestUnregisterBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("three brokers: not in -short")
	}
	c := startChaosCluster(t, 3, 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.client())
	if _, err := adm.CreateTopic(ctx, 3, 3, nil, "leaving"); err != nil {
		t.Fatal(err)
	}
	c.waitLeaders(ctx, adm, "leaving", 3, 60*time.Second)

	// Move every replica off broker 3 (RF 3 -> 2 on brokers 1 and 2).
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign("leaving", 0, []int32{1, 2})
	req.Assign("leaving", 1, []int32{2, 1})
	req.Assign("leaving", 2, []int32{1, 2})
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range res {
		for _, p := range ps {
			if p.Err != nil {
				t.Fatalf("reassign %s-%d: %v", p.Topic, p.Partition, p.Err)
			}
		}
	}
	var last string
	if !testwait.Until(60*time.Second, func() bool {
		tds, err := adm.ListTopics(ctx, "leaving")
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprint(tds["leaving"].Partitions)
		for _, pd := range tds["leaving"].Partitions {
			if len(pd.Replicas) != 2 || hasNode(pd.Replicas, 3) {
				return false
			}
		}
		return len(tds["leaving"].Partitions) == 3
	}) {
		t.Fatalf("replicas not moved off broker 3 within 60s: %s", last)
	}

	n3 := c.node(3)
	n3.kill()
	unregister := func(id int32) error {
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = id
		resp, err := req.RequestWith(ctx, c.client())
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	// Broker 3 may have been the controller: NOT_CONTROLLER (retriable)
	// until the others elect one.
	var uerr error
	testwait.Until(30*time.Second, func() bool {
		uerr = unregister(3)
		return !errors.Is(uerr, kerr.NotController)
	})
	if uerr != nil {
		t.Fatalf("unregister broker 3: %v", uerr)
	}
	// brokers asks broker 1 for Metadata's broker list.
	var lastBrokers string
	brokers := func() string {
		kr, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, c.direct(c.node(1)))
		if err != nil {
			lastBrokers = err.Error()
			return lastBrokers
		}
		var ids []int32
		for _, b := range kr.Brokers {
			ids = append(ids, b.NodeID)
		}
		lastBrokers = fmt.Sprint(ids)
		return lastBrokers
	}
	if !testwait.Until(30*time.Second, func() bool { return brokers() == "[1 2]" }) {
		t.Fatalf("brokers listed after unregistering 3: %s, want [1 2]", lastBrokers)
	}
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "after-rf3"); err == nil {
		t.Fatal("RF 3 created with two brokers registered")
	}
	if _, err := adm.CreateTopic(ctx, 2, 2, nil, "after-rf2"); err != nil {
		t.Fatal(err)
	}
	if err := unregister(3); !errors.Is(err, kerr.BrokerIDNotRegistered) {
		t.Fatalf("unregister broker 3 again: %v, want BROKER_ID_NOT_REGISTERED", err)
	}

	n3.start()
	n3.waitReady(60 * time.Second)
	if !testwait.Until(30*time.Second, func() bool { return brokers() == "[1 2 3]" }) {
		t.Fatalf("brokers listed after broker 3 started again: %s, want [1 2 3]", lastBrokers)
	}
}
