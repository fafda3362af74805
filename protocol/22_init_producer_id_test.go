package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestInitProducerID(t *testing.T) {
	c := newCluster(t, nil)
	rc := dialRaw(t, c.addr)
	seen := map[int64]bool{}
	for v := int16(0); v <= 5; v++ {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = v
		r := rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
		if r.ErrorCode != 0 || r.ProducerID < 0 || r.ProducerEpoch != 0 || seen[r.ProducerID] {
			t.Fatalf("v%d: %+v", v, r)
		}
		seen[r.ProducerID] = true
	}
	// KIP-360: the existing ID and epoch come back with the epoch bumped.
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	req.ProducerID, req.ProducerEpoch = 42, 3
	if r := rc.roundTrip(req).(*kmsg.InitProducerIDResponse); r.ErrorCode != 0 || r.ProducerID != 42 || r.ProducerEpoch != 4 {
		t.Fatalf("bump: %+v", r)
	}
	req.ProducerEpoch = -1
	if r := rc.roundTrip(req).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("id without epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Transactions: the coordinator's epochs.
	req = kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	txn := "t1"
	req.TransactionalID = &txn
	if r := rc.roundTrip(req).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("no timeout: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	req.TransactionTimeoutMillis = 60000
	first := rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if first.ErrorCode != 0 || first.ProducerID < 0 || first.ProducerEpoch != 0 {
		t.Fatalf("transactional: %+v", first)
	}
	second := rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if second.ErrorCode != 0 || second.ProducerID != first.ProducerID || second.ProducerEpoch != 1 {
		t.Fatalf("second instance: %+v", second)
	}
	// KIP-360: the fenced first instance cannot bump with its old epoch.
	req.ProducerID, req.ProducerEpoch = first.ProducerID, first.ProducerEpoch
	if r := rc.roundTrip(req).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("fenced instance: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// The current one can.
	req.ProducerEpoch = second.ProducerEpoch
	if r := rc.roundTrip(req).(*kmsg.InitProducerIDResponse); r.ErrorCode != 0 || r.ProducerEpoch != 2 {
		t.Fatalf("bump: %+v", r)
	}
}
