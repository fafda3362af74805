package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestUnregisterBroker on one broker: an unknown ID is
// BROKER_ID_NOT_REGISTERED; unregistering the broker itself takes it out
// of Metadata's broker list. (Three brokers and kafka-cluster unregister:
// internal/e2e TestUnregisterBroker.)
func TestUnregisterBroker(t *testing.T) {
	c := newCluster(t, nil)
	rc := dialRaw(t, c.addr)
	unregister := func(id int32) *kmsg.UnregisterBrokerResponse {
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = id
		return rc.roundTrip(req).(*kmsg.UnregisterBrokerResponse)
	}
	if r := unregister(7); r.ErrorCode != kerr.BrokerIDNotRegistered.Code || r.ErrorMessage == nil {
		t.Fatalf("unknown broker: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := unregister(-1); r.ErrorCode != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("negative broker: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := unregister(1); r.ErrorCode != 0 {
		t.Fatalf("broker 1: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	if r := rc.roundTrip(metadataReq(1)).(*kmsg.MetadataResponse); len(r.Brokers) != 0 {
		t.Fatalf("brokers after unregistering the only one: %+v", r.Brokers)
	}
	if r := unregister(1); r.ErrorCode != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("broker 1 again: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
