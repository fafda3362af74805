package replication

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// Broker fencing (Kafka's broker.session.timeout.ms).
//
// Kafka's controller fences a broker whose heartbeats stop for the session
// timeout: it leaves Metadata's broker list (its replicas are reported
// offline) and gets no new partitions, until it heartbeats again. Here the
// brokers' heartbeats to the controller are the metadata group's own
// traffic: the controller's Mux hears from every member several times a
// second. The controller checks every fenceCheckInterval; a registered
// broker it has not heard from for the session timeout is fenced, and one
// fenced that it hears from again is unfenced. Both are a
// CmdRegisterBroker with BrokerInfo.Fenced set or cleared (so an older
// broker, which does not know the field, applies it as a registration);
// a broker that starts registers itself unfenced. A controller that has
// led for less than the session timeout fences nobody: it has not had the
// time to hear from everyone.

// defaultBrokerSessionTimeout is Kafka's broker.session.timeout.ms.
const defaultBrokerSessionTimeout = 9 * time.Second

// fenceCheckInterval is how often the controller checks.
const fenceCheckInterval = time.Second

// fenceLoop runs the check while this broker is the controller; it ends
// when the broker stops. fenceDone closes when it returns.
func (q *metadataQuorum) fenceLoop() {
	defer close(q.fenceDone)
	timeout := q.cfg.BrokerSessionTimeout
	if timeout <= 0 {
		return
	}
	tick := time.NewTicker(min(fenceCheckInterval, timeout/2))
	defer tick.Stop()
	var leaderSince time.Time
	for {
		select {
		case <-q.stop:
			return
		case <-tick.C:
		}
		if q.raft == nil || q.raft.State() != raft.Leader {
			leaderSince = time.Time{}
			continue
		}
		if leaderSince.IsZero() {
			leaderSince = time.Now()
		}
		if q.closed.Load() || !q.ready.Load() || time.Since(leaderSince) < timeout {
			continue
		}
		q.fenceOnce(timeout)
	}
}

// fenceOnce fences the registered brokers not heard from within timeout
// and unfences the fenced ones heard from again.
func (q *metadataQuorum) fenceOnce(timeout time.Duration) {
	for _, bi := range q.Brokers() {
		if bi.NodeID == q.cfg.NodeID {
			continue
		}
		addr, err := q.peerAddr(bi.NodeID)
		if err != nil {
			continue // no replication address known: nothing to hear from
		}
		heard := q.mux.PeerHeardWithin(addr, timeout)
		if heard != bi.Fenced {
			continue // fenced and silent, or unfenced and heard
		}
		next := bi
		next.Fenced = !heard
		if err := q.registerAs(next); err != nil {
			q.logger.Warn("broker fencing: could not record the change", "node_id", bi.NodeID, "fenced", next.Fenced, "err", err)
			continue
		}
		if next.Fenced {
			q.logger.Warn("broker fenced: not heard from within broker.session.timeout.ms; left out of Metadata until it is heard from again",
				"node_id", bi.NodeID, "session_timeout", timeout)
		} else {
			q.logger.Info("broker unfenced: heard from again", "node_id", bi.NodeID)
		}
	}
}

// registerAs commits bi as bi.NodeID's registration, if the image still
// holds the registration it was derived from but for Fenced (a broker
// that re-registered meanwhile wins).
func (q *metadataQuorum) registerAs(bi BrokerInfo) error {
	ctx, cancel := context.WithTimeout(context.Background(), metadataApplyTimeout)
	defer cancel()
	if err := q.lockWriter(ctx); err != nil {
		return err
	}
	defer q.mu.Unlock()
	cur, ok := q.img.Load().brokers[bi.NodeID]
	if !ok {
		return nil // unregistered meanwhile
	}
	was := cur
	was.Fenced = bi.Fenced
	if was != bi || cur.Fenced == bi.Fenced {
		return nil
	}
	_, err := q.commitLocked(Command{Type: CmdRegisterBroker, Broker: &bi})
	return err
}
