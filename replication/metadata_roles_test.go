package replication

import (
	"errors"
	"net"
	"testing"

	"github.com/strata-io/strata/replication/transport"
)

// TestAdmitJoiner: a controller's plaintext replication listener admits a
// node it does not know yet (a broker-only node asking to join) from
// loopback, and from elsewhere only with JoinOffLoopback
// (replication.plaintext.allow.nonloopback); a broker-only node takes no
// joins; a name that is not a node ID is refused.
func TestAdmitJoiner(t *testing.T) {
	voters := []Voter{{NodeID: 1, Addr: "127.0.0.1:9093"}, {NodeID: 2, Addr: "127.0.0.1:9094"}}
	broker := func(id int32, offLoopback bool) *metadataQuorum {
		return newMetadataQuorum(&node{cfg: BrokerConfig{NodeID: id, Voters: voters, BrokerOnly: id > 2, JoinOffLoopback: offLoopback}}, "")
	}
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	loop6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 40000}
	far := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 40000}
	for _, c := range []struct {
		b      *metadataQuorum
		id     string
		remote net.Addr
		ok     bool
	}{
		{broker(1, false), "7", loop, false}, // plaintext joins need the setting
		{broker(1, false), "7", loop6, false},
		{broker(1, true), "7", loop, true},
		{broker(1, false), "7", far, false},
		{broker(1, true), "7", far, true},
		{broker(1, false), "2", far, true}, // a voter, as before
		{broker(5, false), "7", loop, false},
		{broker(5, true), "7", far, false},
		{broker(1, true), "x", loop, false},
		{broker(1, true), "07", loop, false},
	} {
		err := c.b.admitPeerFrom(c.id, c.remote)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, transport.ErrRefused)) {
			t.Errorf("node %d admitting %q from %v: %v; want admitted %v", c.b.cfg.NodeID, c.id, c.remote, err, c.ok)
		}
	}
	// Registered with a replication address: admitted from anywhere, and
	// a dialed address names it (expectPeer).
	b := broker(1, false)
	img := newImage()
	img.brokers[7] = BrokerInfo{NodeID: 7, ReplicationAddr: "10.1.2.3:9093"}
	b.img.Store(img)
	if err := b.admitPeerFrom("7", far); err != nil {
		t.Errorf("registered node 7: %v", err)
	}
	if id, ok := b.expectPeer("10.1.2.3:9093"); !ok || id != "7" {
		t.Errorf("expectPeer: %q %v", id, ok)
	}
	if a, err := b.peerAddr(7); err != nil || a != "10.1.2.3:9093" {
		t.Errorf("peerAddr(7): %q %v", a, err)
	}
	if err := checkJoin("7", &joinRequest{Node: 8, Addr: "h:1"}); err == nil {
		t.Errorf("node 7 asking node 8 to join was not refused")
	}
}
