package replication

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/strata-io/strata/replication/transport"
)

// refused is a refusal of a peer or of its request, as the transport's
// own refusals (transport.ErrRefused).
func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", transport.ErrRefused, fmt.Sprintf(format, args...))
}

// checkForward checks a request another broker forwarded over the
// replication transport against the node of its connection (peer; ""
// when the dialer named none: a test's Mux). With mTLS the peer is
// authenticated (transport/tls.go), and a node speaks only for itself:
// a broker's registration (its addresses, rack, endpoints) is written by
// that broker alone. Another node may forward only a change of a
// registered broker's Fenced flag (metadata_fencing.go: the controller fences and
// unfences brokers, and a command in flight when the controller moved is
// forwarded to the next one). Anything else is refused before the
// handler sees it: answered with an error and logged (handleForward).
func (q *metadataQuorum) checkForward(peer string, body []byte) error {
	if peer == "" {
		return nil
	}
	var req forwardRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil // the handler answers a request that does not decode
	}
	if err := checkJoin(peer, req.Join); err != nil {
		return err
	}
	c := req.Command
	if c.Type != CmdRegisterBroker || c.Broker == nil || strconv.Itoa(int(c.Broker.NodeID)) == peer {
		return nil
	}
	if img := q.img.Load(); img != nil {
		if cur, ok := img.brokers[c.Broker.NodeID]; ok {
			cur.Fenced = c.Broker.Fenced
			if cur == *c.Broker {
				return nil
			}
		}
	}
	return refused("node %s forwarded the registration of node %d", peer, c.Broker.NodeID)
}

// expectPeer names the node whose replication listener is at addr, from
// controller.quorum.voters (every broker is a voter; partition groups
// dial the voters' addresses, peerAddr): with mTLS a server at a voter's
// address must present that voter's certificate.
func (q *metadataQuorum) expectPeer(addr string) (string, bool) {
	for _, v := range q.cfg.Voters {
		if v.Addr == addr {
			return strconv.Itoa(int(v.NodeID)), true
		}
	}
	if img := q.img.Load(); img != nil && addr != "" {
		for id, bi := range img.brokers { // broker-only nodes (metadata_roles.go)
			if bi.ReplicationAddr == addr {
				return strconv.Itoa(int(id)), true
			}
		}
	}
	return "", false
}
