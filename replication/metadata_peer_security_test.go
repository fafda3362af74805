package replication

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/strata-io/strata/replication/transport"
)

// TestCheckForward: a forwarded registration of another node is refused
// unless it changes only that node's Fenced flag.
func TestCheckForward(t *testing.T) {
	b := &metadataQuorum{}
	img := &image{brokers: map[int32]BrokerInfo{2: {NodeID: 2, Host: "h2", Port: 9092}}}
	b.img.Store(img)
	fwd := func(bi BrokerInfo) []byte {
		body, err := json.Marshal(forwardRequest{Command: Command{Type: CmdRegisterBroker, Broker: &bi}})
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	for _, tc := range []struct {
		name string
		peer string
		body []byte
		ok   bool
	}{
		{"its own registration", "2", fwd(BrokerInfo{NodeID: 2, Host: "elsewhere", Port: 1}), true},
		{"a new node's own registration", "7", fwd(BrokerInfo{NodeID: 7, Host: "h7", Port: 9092}), true},
		{"fencing another node", "1", fwd(BrokerInfo{NodeID: 2, Host: "h2", Port: 9092, Fenced: true}), true},
		{"moving another node", "1", fwd(BrokerInfo{NodeID: 2, Host: "evil", Port: 9092}), false},
		{"registering another node", "1", fwd(BrokerInfo{NodeID: 9, Host: "evil", Port: 9092}), false},
		{"no identity (a test's Mux)", "", fwd(BrokerInfo{NodeID: 9, Host: "evil", Port: 9092}), true},
		{"another command", "1", []byte(`{"command":{"type":2,"topic":"t"}}`), true},
	} {
		err := b.checkForward(tc.peer, tc.body)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, transport.ErrRefused)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
