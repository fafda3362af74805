package protocol

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/testwait"
)

// kadm's reassignment calls against the single-node default: a move to
// the replica it already has completes at once, a cancel of nothing and
// an unknown partition get Kafka's codes, and kadm's ForbidAlterRf (v1
// AllowReplicationFactorChange false) refuses a different replica count.
func TestPartitionReassignmentsKadm(t *testing.T) {
	c := newCluster(t, nil)
	c.createTopic("ra", 2)
	adm := c.admin()
	ctx := testCtx(t)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("ra", 0, []int32{1})
	req.CancelAssign("ra", 1)
	req.Assign("ra", 7, []int32{1})
	req.Assign("nope", 0, []int32{1})
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		topic string
		p     int32
		err   error
	}{{"ra", 0, nil}, {"ra", 1, kerr.NoReassignmentInProgress}, {"ra", 7, kerr.UnknownTopicOrPartition}, {"nope", 0, kerr.UnknownTopicOrPartition}} {
		got := resp[want.topic][want.p]
		if !errors.Is(got.Err, want.err) && !(want.err == nil && got.Err == nil) {
			t.Errorf("%s-%d: %v, want %v", want.topic, want.p, got.Err, want.err)
		}
	}
	var ls kadm.ListPartitionReassignmentsResponses
	if !testwait.Until(10*time.Second, func() bool {
		var err error
		if ls, err = adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"ra": {0: {}, 1: {}}}); err != nil {
			t.Fatal(err)
		}
		return len(ls) == 0 || len(ls["ra"]) == 0
	}) {
		t.Fatalf("reassignment to the same replica never finished: %+v", ls)
	}
	// Bad replica lists: Kafka's INVALID_REPLICA_ASSIGNMENT, nothing recorded.
	for _, bad := range [][]int32{{1, 1}, {-1}, {1, 7}} {
		var r kadm.AlterPartitionAssignmentsReq
		r.Assign("ra", 1, bad)
		resp, err := adm.AlterPartitionAssignments(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := resp["ra"][1].Err; !errors.Is(err, kerr.InvalidReplicaAssignment) {
			t.Errorf("replicas %v: %v, want INVALID_REPLICA_ASSIGNMENT", bad, err)
		}
	}
	if ls, _ := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"ra": {1: {}}}); len(ls["ra"]) != 0 {
		t.Fatalf("a refused reassignment is listed: %+v", ls)
	}
	var grow kadm.AlterPartitionAssignmentsReq
	grow.Assign("ra", 0, []int32{1, 2})
	resp, err = adm.AlterPartitionAssignments(kadm.ForbidAlterRf(ctx), grow)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp["ra"][0].Err; !errors.Is(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("replica count change with ForbidAlterRf: %v", err)
	}
}
